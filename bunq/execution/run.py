"""Calling handlers: one job (:func:`run_sync`, :func:`run_async`) and where calls run
(:class:`Executor`: inline, a thread pool, or one event-loop thread).

A handler's outcome is an :class:`Outcome`, never an exception. A sync handler
cannot be interrupted: one that returns after its ``opts.timeout`` has failed
with reason timeout all the same (a coroutine is cancelled at its timeout).
A handler that takes a second argument gets a :class:`~.context.JobContext`; a job
whose context was cancelled while it ran ends ``cancelled`` however it returned.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from .. import tracing
from ..errors import JobCancelled
from ..job import Job
from .context import JobContext, takes_context

Handler = Callable[[Job], Any | Awaitable[Any]]
Clock = Callable[[], int]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one handler call did.

    ``duration_ms``: how long the handler ran (a monotonic measure, recorded with a
    failure); ``took``: the same call timed with the driver's clock, when it gave one
    (tick's deadline estimates follow that clock, a fake one in tests), else 0.
    """

    ok: bool
    result: Any = None
    error: BaseException | None = None
    duration_ms: int = 0
    timed_out: bool = False
    took: int = 0
    cancelled: bool = False


def is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - callable objects
    )


def run_sync(handler: Handler, job: Job, clock: Clock | None = None,
             ctx: JobContext | None = None, pass_ctx: bool = False) -> Outcome:  # fmt: skip
    """Call a handler (a coroutine result is run to completion on a fresh loop);
    with ``pass_ctx``, as ``handler(job, ctx)``; a cancelled ``ctx`` makes it cancelled."""
    t0 = clock() if clock is not None else 0
    start = time.perf_counter()
    try:
        result = handler(job, ctx) if pass_ctx else handler(job)  # type: ignore[call-arg]
        if inspect.isawaitable(result):
            result = asyncio.run(_timed(result, job.opts.timeout))
    except asyncio.TimeoutError as exc:
        return Outcome(False, None, exc, _ms(start), True, _took(clock, t0))
    except Exception as exc:
        if ctx is not None and ctx.cancelled:
            return _cancelled(job, start, clock, t0)
        return Outcome(False, None, exc, _ms(start), False, _took(clock, t0))
    if ctx is not None and ctx.cancelled:
        return _cancelled(job, start, clock, t0)
    ms, limit = _ms(start), job.opts.timeout
    if limit is not None and ms > limit:  # it ran past its timeout: it failed, timeout
        err = TimeoutError(f"ran {ms} ms, past its timeout of {limit} ms")
        return Outcome(False, None, err, ms, True, _took(clock, t0))
    return Outcome(True, result, None, ms, False, _took(clock, t0))


async def run_async(handler: Handler, job: Job, clock: Clock | None = None,
                    ctx: JobContext | None = None, pass_ctx: bool = False) -> Outcome:  # fmt: skip
    """Await a coroutine handler, enforcing ``opts.timeout`` by cancellation; a cancelled
    ``ctx`` cancels it too (CancelledError inside the handler)."""
    t0 = clock() if clock is not None else 0
    start = time.perf_counter()
    try:
        result = handler(job, ctx) if pass_ctx else handler(job)  # type: ignore[call-arg]
        if inspect.isawaitable(result):
            if ctx is None:
                result = await _timed(result, job.opts.timeout)
            else:
                task = asyncio.ensure_future(_timed(result, job.opts.timeout))
                ctx.bind(asyncio.get_running_loop(), task)
                result = await task
    except asyncio.TimeoutError as exc:
        return Outcome(False, None, exc, _ms(start), True, _took(clock, t0))
    except asyncio.CancelledError:
        if ctx is None or not ctx.cancelled:
            raise
        return _cancelled(job, start, clock, t0)
    except Exception as exc:
        if ctx is not None and ctx.cancelled:
            return _cancelled(job, start, clock, t0)
        return Outcome(False, None, exc, _ms(start), False, _took(clock, t0))
    if ctx is not None and ctx.cancelled:
        return _cancelled(job, start, clock, t0)
    return Outcome(True, result, None, _ms(start), False, _took(clock, t0))


def _cancelled(job: Job, start: float, clock: Clock | None, t0: int) -> Outcome:
    err = JobCancelled(f"job {job.id} was cancelled", job_id=job.id)
    return Outcome(False, None, err, _ms(start), False, _took(clock, t0), cancelled=True)


def _took(clock: Clock | None, t0: int) -> int:
    return clock() - t0 if clock is not None else 0


async def _timed(aw: Awaitable[Any], timeout_ms: int | None) -> Any:
    if timeout_ms is None:
        return await aw
    return await asyncio.wait_for(aw, timeout_ms / 1000)


def _ms(start: float) -> int:
    return int((time.perf_counter() - start) * 1000)


class Executor:
    """Where a driver's handler calls run, ``concurrency`` at a time.

    A sync handler runs inline (:meth:`run`, on the caller's thread: no thread hop
    per job) when ``concurrency == 1``, else on a pool of ``concurrency`` threads;
    a coroutine handler runs on one event-loop thread. :meth:`close` (or leaving
    the ``with`` block) joins what the executor started.

    :param clock: epoch-ms clock that times each call (``Outcome.took``) for the
        driver's estimates (tick's deadline).
    """

    def __init__(self, handler: Handler, concurrency: int, *, clock: Clock | None = None,
                 name: str = "bunq-job") -> None:  # fmt: skip
        self.handler, self.clock = tracing.traced(handler), clock
        self.is_async = is_async(handler)
        self.with_context = takes_context(handler)  # decided once: handler(job, ctx)
        self.inline = concurrency == 1 and not self.is_async
        self._pool: cf.ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        if self.is_async:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name=f"{name}-loop",
                                            daemon=True)  # fmt: skip
            self._thread.start()
        elif not self.inline:
            self._pool = cf.ThreadPoolExecutor(concurrency, thread_name_prefix=name)

    def run(self, job: Job, ctx: JobContext | None = None) -> Outcome:
        """Run ``job`` on this thread (inline executors); ``ctx`` reaches handlers that
        take one."""
        return run_sync(self.handler, job, self.clock, ctx, self.with_context and ctx is not None)

    def submit(self, job: Job, ctx: JobContext | None = None) -> cf.Future[Outcome]:
        """Start ``job`` off this thread; the future gives its :class:`Outcome`."""
        give = self.with_context and ctx is not None
        if self._loop is not None:
            coro = run_async(self.handler, job, self.clock, ctx, give)
            return asyncio.run_coroutine_threadsafe(coro, self._loop)
        if self._pool is None:
            raise RuntimeError("an inline executor runs jobs with run()")
        return self._pool.submit(run_sync, self.handler, job, self.clock, ctx, give)

    def close(self) -> None:
        """Wait for submitted jobs (threads), stop the loop thread; idempotent."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
            self._thread = None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        self.close()
