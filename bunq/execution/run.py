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
import inspect
import queue
import threading
import types
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any

from .. import tracing
from ..job import Job
from .context import JobContext, takes_context
from .outcome import (
    OK_NONE,
    Clock,
    Outcome,
    cancelled_outcome,
    ms_since,
    ok_outcome,
    perf,
    raised,
    returned,
    took_since,
)
from .slots import Item, Slots

# Outcome is .outcome's, imported from here by the drivers
__all__ = ["Executor", "Handler", "Outcome", "is_async", "run_async", "run_sync"]

Handler = Callable[[Job], Any | Awaitable[Any]]
_Coro = types.CoroutineType


def is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - callable objects
    )


def run_sync(handler: Handler, job: Job, clock: Clock | None = None,
             ctx: JobContext | None = None, pass_ctx: bool = False) -> Outcome:  # fmt: skip
    """Call a handler (a coroutine result is run to completion on a fresh loop);
    with ``pass_ctx``, as ``handler(job, ctx)``; a cancelled ``ctx`` makes it cancelled."""
    t0 = clock() if clock is not None else 0
    start = perf()
    try:
        result = handler(job, ctx) if pass_ctx else handler(job)  # type: ignore[call-arg]
        if result is not None and inspect.isawaitable(result):  # None: the common, cheap case
            result = asyncio.run(_timed(result, job.opts.timeout))
    except asyncio.TimeoutError as exc:
        return Outcome(False, None, exc, ms_since(start), True, took_since(clock, t0))
    except Exception as exc:
        if ctx is not None and ctx.cancel_requested:
            return cancelled_outcome(job, start, clock, t0)
        return Outcome(False, None, exc, ms_since(start), False, took_since(clock, t0))
    if ctx is not None and ctx.cancel_requested:
        return cancelled_outcome(job, start, clock, t0)
    ms, limit = int((perf() - start) * 1000), job.opts.timeout
    if limit is not None and ms > limit:  # it ran past its timeout: it failed, timeout
        err = TimeoutError(f"ran {ms} ms, past its timeout of {limit} ms")
        return Outcome(False, None, err, ms, True, took_since(clock, t0))
    if result is None and ms == 0 and clock is None:  # ok_outcome's common case, no call
        return OK_NONE
    return ok_outcome(result, ms, took_since(clock, t0))


async def run_async(handler: Handler, job: Job, clock: Clock | None = None,
                    ctx: JobContext | None = None, pass_ctx: bool = False,
                    bind: bool = True) -> Outcome:  # fmt: skip
    """Await a coroutine handler, enforcing ``opts.timeout`` by cancellation; a cancelled
    ``ctx`` cancels it too (CancelledError inside the handler). ``bind=False``: the
    caller binds ``ctx`` itself. (The executor's slot tasks run this body inline.)"""
    t0 = clock() if clock is not None else 0
    start = perf()
    try:
        result = handler(job, ctx) if pass_ctx else handler(job)  # type: ignore[call-arg]
        if type(result) is _Coro or inspect.isawaitable(result):  # a coroutine: no call
            if ctx is not None and bind:  # a cancel cancels the task awaiting the handler
                _bind(ctx)
            if job.opts.timeout is None:
                result = await result  # no wrapping coroutine when nothing is timed
            else:
                result = await _timed(result, job.opts.timeout)
    except (Exception, asyncio.CancelledError) as exc:
        return raised(exc, job, ctx, start, clock, t0)
    return returned(result, job, ctx, start, clock, t0)


def _bind(ctx: JobContext) -> None:
    """Bind ``ctx`` to the running task: a cancel cancels it."""
    task = asyncio.current_task()
    assert task is not None, "run_async runs in a task"
    ctx.bind(asyncio.get_running_loop(), task.cancel)


async def _timed(aw: Awaitable[Any], timeout_ms: int | None) -> Any:
    if timeout_ms is None:
        return await aw
    return await asyncio.wait_for(aw, timeout_ms / 1000)


class Executor:
    """Where a driver's handler calls run, ``concurrency`` at a time.

    A sync handler runs inline (:meth:`run`, on the caller's thread: no thread hop
    per job) when ``concurrency == 1``, else on ``concurrency`` threads of its own;
    a coroutine handler runs on one event-loop thread, in up to ``concurrency``
    long-lived tasks (:class:`~.slots.Slots`: no task per call). :meth:`start` hands
    jobs over, and each one's ``(key, Outcome)`` arrives in :attr:`done` (a
    ``queue.SimpleQueue``): no future, lock or waiter per job, and one wake-up of
    the loop thread per batch. :meth:`close` (or leaving the ``with`` block) joins
    what the executor started.

    :param clock: epoch-ms clock that times each call (``Outcome.took``) for the
        driver's estimates (tick's deadline).
    :param loop_thread: False: a coroutine handler's loop gets no thread of its own;
        the driver runs it (:meth:`run_loop`) and calls :meth:`start` from the loop's
        own callbacks (no hop between threads per batch); :attr:`wake`, if set, is
        called on the loop thread after each outcome is put in ``done``.
    :param pool: False: a sync handler gets no threads of its own; the driver calls
        :meth:`run` from threads it runs (:class:`~bunq.execution.Crew`).
    """

    def __init__(self, handler: Handler, concurrency: int, *, clock: Clock | None = None,
                 name: str = "bunq-job", loop_thread: bool = True,
                 pool: bool = True) -> None:  # fmt: skip
        self.handler, self.clock = tracing.traced(handler), clock
        self.is_async = is_async(handler)
        self.with_context = takes_context(handler)  # decided once: handler(job, ctx)
        self.inline = concurrency == 1 and not self.is_async
        self.done: queue.SimpleQueue[tuple[Any, Outcome]] = queue.SimpleQueue()
        self._jobs: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: Slots | None = None
        self.wake: Callable[[], None] | None = None
        if self.is_async:
            self._loop = asyncio.new_event_loop()
            eager = getattr(asyncio, "eager_task_factory", None)
            if eager is not None:  # Python 3.12+: tasks a handler makes start eagerly too
                self._loop.set_task_factory(eager)
            self._slots = Slots(self, self._loop, concurrency)
            if loop_thread:
                run = self._run_thread
                self._threads.append(threading.Thread(target=run, name=f"{name}-loop", daemon=True))
        elif not self.inline and pool:
            for i in range(concurrency):
                t = threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True)
                self._threads.append(t)
        for t in self._threads:
            t.start()

    def run(self, job: Job, ctx: JobContext | None = None) -> Outcome:
        """Run ``job`` on this thread (inline executors, or ``pool=False``); ``ctx``
        reaches handlers that take one."""
        return run_sync(self.handler, job, self.clock, ctx, self.with_context and ctx is not None)

    def start(self, items: Sequence[Item]) -> None:
        """Start each ``(key, job, ctx)`` off this thread; ``(key, Outcome)`` arrives in
        ``done``. ``ctx`` (or None) reaches handlers that take one; a coroutine handler's
        call is bound to it, so that a cancel cancels the handler.

        A coroutine handler's calls run in the executor's slot tasks (3.11+ and any loop
        object that takes attributes: the first step of each at once, so a call that
        never suspends is done when ``start`` returns on the loop's thread)."""
        if self._slots is not None:
            if self._threads:
                self._loop.call_soon_threadsafe(self._slots.spawn, items)  # type: ignore[union-attr]
            else:  # loop_thread=False: called on the loop's thread, in a callback
                self._slots.spawn(items)
        elif self._threads:
            put = self._jobs.put
            for item in items:
                put(item)
        else:
            raise RuntimeError("an inline executor runs jobs with run()")

    def _serve(self) -> None:
        get, put, handler, clock = self._jobs.get, self.done.put, self.handler, self.clock
        with_context = self.with_context
        while (item := get()) is not None:
            key, job, ctx = item
            put((key, run_sync(handler, job, clock, ctx, with_context and ctx is not None)))

    @property
    def suspended(self) -> bool:
        """Some coroutine call started and suspended, not finished yet."""
        return self._slots is not None and self._slots.busy

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """A coroutine handler's event loop (None for sync handlers)."""
        return self._loop

    def run_loop(self) -> None:
        """Run the loop on this thread until ``loop.stop()`` (``loop_thread=False``);
        then shut its default executor down (the driver's waits ran there)."""
        assert self._loop is not None and not self._threads, "loop_thread=False only"
        self._run_thread()
        self._loop.run_until_complete(self._loop.shutdown_default_executor())

    def _run_thread(self) -> None:
        """Run the loop until stopped, then end the slot tasks (no task left pending)."""
        assert self._loop is not None and self._slots is not None
        self._loop.run_forever()
        self._loop.run_until_complete(self._slots.close())

    def close(self) -> None:
        """Wait for started jobs (threads), stop the loop thread; idempotent."""
        if self._loop is not None:
            if self._threads:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._threads[0].join()
                self._loop.close()
            elif not self._loop.is_closed() and not self._loop.is_running():
                self._loop.close()
        else:
            for _ in self._threads:
                self._jobs.put(None)
            for t in self._threads:
                t.join()
        self._threads = []

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        self.close()
