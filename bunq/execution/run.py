"""Calling handlers: one job (:func:`run_sync`, :func:`run_async`) and where calls run
(:class:`Executor`: inline, a thread pool, or one event-loop thread).

A handler's outcome is an :class:`Outcome`, never an exception. A sync handler
cannot be interrupted: one that returns after its ``opts.timeout`` has failed
with reason timeout all the same (a coroutine is cancelled at its timeout).
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

from ..job import Job

Handler = Callable[[Job], Any | Awaitable[Any]]
Clock = Callable[[], int]
Ran = tuple["Outcome", int]  # the outcome, and how long it took (ms) by the executor's clock


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one handler call did."""

    ok: bool
    result: Any = None
    error: BaseException | None = None
    duration_ms: int = 0
    timed_out: bool = False


def is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - callable objects
    )


def run_sync(handler: Handler, job: Job) -> Outcome:
    """Call a handler (a coroutine result is run to completion on a fresh loop)."""
    start = time.perf_counter()
    try:
        result = handler(job)
        if inspect.isawaitable(result):
            result = asyncio.run(_timed(result, job.opts.timeout))
    except asyncio.TimeoutError as exc:
        return Outcome(False, error=exc, duration_ms=_ms(start), timed_out=True)
    except Exception as exc:
        return Outcome(False, error=exc, duration_ms=_ms(start))
    took, limit = _ms(start), job.opts.timeout
    if limit is not None and took > limit:  # it ran past its timeout: it failed, timeout
        err = TimeoutError(f"ran {took} ms, past its timeout of {limit} ms")
        return Outcome(False, error=err, duration_ms=took, timed_out=True)
    return Outcome(True, result, duration_ms=took)


async def run_async(handler: Handler, job: Job) -> Outcome:
    """Await a coroutine handler, enforcing ``opts.timeout`` by cancellation."""
    start = time.perf_counter()
    try:
        result = handler(job)
        if inspect.isawaitable(result):
            result = await _timed(result, job.opts.timeout)
    except asyncio.TimeoutError as exc:
        return Outcome(False, error=exc, duration_ms=_ms(start), timed_out=True)
    except Exception as exc:
        return Outcome(False, error=exc, duration_ms=_ms(start))
    return Outcome(True, result, duration_ms=_ms(start))


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

    :param clock: epoch-ms clock that times each call for the driver's estimates
        (tick's deadline); None: the handler's own ``duration_ms``.
    """

    def __init__(self, handler: Handler, concurrency: int, *, clock: Clock | None = None,
                 name: str = "bunq-job") -> None:  # fmt: skip
        self.handler, self.clock = handler, clock
        self.is_async = is_async(handler)
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

    def run(self, job: Job) -> Ran:
        """Run ``job`` on this thread (inline executors)."""
        if self.clock is None:
            o = run_sync(self.handler, job)
            return o, o.duration_ms
        t0 = self.clock()
        return run_sync(self.handler, job), self.clock() - t0

    def submit(self, job: Job) -> cf.Future[Ran]:
        """Start ``job`` off this thread; the future gives what :meth:`run` returns."""
        if self._loop is not None:
            return asyncio.run_coroutine_threadsafe(self._run_async(job), self._loop)
        if self._pool is None:
            raise RuntimeError("an inline executor runs jobs with run()")
        return self._pool.submit(self.run, job)

    async def _run_async(self, job: Job) -> Ran:
        if self.clock is None:
            o = await run_async(self.handler, job)
            return o, o.duration_ms
        t0 = self.clock()
        return await run_async(self.handler, job), self.clock() - t0

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
