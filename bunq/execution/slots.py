"""A coroutine handler's calls, run one after another by long-lived tasks (:class:`Slots`).

An :class:`~.run.Executor` with a coroutine handler keeps up to ``concurrency`` slot
tasks. Each takes ``(key, job, ctx)`` items from a deque and awaits the call itself (no
task per call): the handler runs in an ordinary :class:`asyncio.Task`
(``current_task()``, ``asyncio.timeout()``, ``wait_for``, cancel), but a call that never
suspends costs no task of its own, nor (on 3.11) its entry in asyncio's Python-level
``WeakSet`` of tasks.

- A slot with nothing to do parks on a Future. :meth:`Slots.spawn` wakes one parked
  slot per item (a new one while fewer than ``concurrency`` exist). On a loop object
  that takes attributes (asyncio's; uvloop's ``Loop``, a Python subclass, too) the
  woken slot's step runs at once
  (:meth:`Slots._now`): a batch whose calls never suspend is done, in one slot, when
  ``spawn`` returns, and the items a slot leaves while suspended in a call go to the
  next slot in the same ``spawn``.
- A cancel reaches the slot through the job's context (``JobContext.canceller``, set per
  call) and cancels the slot's task only while that slot still runs that job (checked
  on the loop's thread, :meth:`_Slot.cancel`); after the job the task's cancel count goes
  back to 0 (``uncancel``, 3.11+), and a cancel a call asked of its own task and
  returned before meeting is met then (:meth:`Slots._clear_cancel`).
- A call that leaves a contextvar set ends its slot (the next job would see the value);
  a new slot, in a copy of the executor's starting context, takes its place.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import queue
import types
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..job import Job
from .context import JobContext
from .outcome import OK_NONE, perf, raised, returned

Item = tuple[Any, Job, "JobContext | None"]  # what Executor.start takes: (key, job, ctx)
CLOSE_WAIT_S = 1.0  # close: how long cancelled slots get to finish their calls


class Owner(Protocol):
    """What the slots read of their :class:`~.run.Executor` (which imports this module)."""

    handler: Callable[..., Any]
    clock: Callable[[], int] | None
    with_context: bool
    done: queue.SimpleQueue[tuple[Any, Any]]
    wake: Callable[[], None] | None


class _Slot:
    """One slot task and the call it runs now (read on the loop's thread by a cancel)."""

    __slots__ = ("task", "ctx", "hit", "canceller")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.task: asyncio.Task[None] | None = None
        self.ctx: JobContext | None = None  # the job of the call it runs (None: parked)
        self.hit: JobContext | None = None  # the job its task was cancelled for
        self.canceller = (loop, self.cancel)  # each job's JobContext.canceller meanwhile

    def cancel(self) -> None:
        """Cancel the task if it still runs a job that was cancelled (once per job): a
        cancel that arrives after its job finished does not reach the next one."""
        ctx = self.ctx
        if ctx is not None and ctx.cancel_requested and self.hit is not ctx:
            self.hit = ctx
            assert self.task is not None, "a call runs in a started slot"
            self.task.cancel()


def _uncancel(task: asyncio.Task[None]) -> None:
    """Back to no cancel requested (3.11+; 3.10 keeps no count), so that the next job's
    ``asyncio.timeout()`` and ``TaskGroup`` see a task nobody cancelled."""
    uncancel = getattr(task, "uncancel", None)
    if uncancel is not None:
        while uncancel():  # the count left
            pass


class Slots:
    """The slot tasks of one executor, on its loop's thread (see the module docstring).

    :param ex: the executor: its handler, clock, ``done`` queue and ``wake``.
    :param size: at most this many slots (the executor's concurrency).
    """

    def __init__(self, ex: Owner, loop: asyncio.AbstractEventLoop, size: int) -> None:
        self.ex, self.loop, self.size = ex, loop, size
        self.items: deque[Item] = deque()
        self.parked: list[asyncio.Future[None]] = []  # one per parked slot
        self.slots: set[_Slot] = set()  # made and not ended
        self.waking = 0  # slots woken (or made) that have not run yet
        self.closing = False
        # Where slots start: the context the executor was made in, never one a call
        # changed (a slot that ended for it asks for its replacement from inside it).
        self.base = contextvars.copy_context()
        self.at_once = hasattr(loop, "__dict__")  # _now can stand in for loop.call_soon
        self._grabbed: tuple[Callable[..., object], tuple[Any, ...], contextvars.Context] | None
        self._grabbed = None
        self._task = functools.partial(asyncio.Task, loop=loop)

    @property
    def busy(self) -> bool:
        """Some slot is in a call that suspended (or was woken and has not run yet)."""
        return len(self.parked) < len(self.slots)

    def spawn(self, items: Sequence[Item]) -> None:
        """Queue ``items`` and wake (or make) a slot for each one no woken slot takes; on
        the loop's thread, in a callback (a woken slot's step may run here)."""
        q = self.items
        q.extend(items)
        while len(q) > self.waking:
            if self.parked:
                fut = self.parked.pop()
                if fut.done():  # cancelled meanwhile: its slot goes on by itself (_serve)
                    continue
                self.waking += 1
                if self.at_once:
                    self._now(fut.set_result, None)
                else:
                    fut.set_result(None)
            elif len(self.slots) < self.size and not self.closing:
                self._add()
            else:
                break  # every slot is in a call: the first to finish takes the rest

    def _add(self) -> None:
        slot = _Slot(self.loop)
        self.slots.add(slot)
        self.waking += 1
        coro = self._serve(slot)
        if self.at_once:  # its first step runs now
            self._now(self.base.run, self._task, coro)
        else:  # (3.12+: the loop's eager task factory runs it now; else in a loop turn)
            self.base.run(self.loop.create_task, coro)

    def _now(self, schedule: Callable[..., object], *args: Any) -> None:
        """Call ``schedule(*args)``, which hands one callback to ``loop.call_soon``
        (``Task()`` its first step, a Future's ``set_result`` the waiting task's
        wake-up), then run that callback here, in its context, as the loop would.

        For that one call ``loop.call_soon`` is :meth:`_grab` (an attribute of the loop
        object, the loop's own method again at once); only the executor's private loop
        is touched this way."""
        loop = self.loop
        loop.call_soon = self._grab  # type: ignore[method-assign, assignment]
        try:
            schedule(*args)
        finally:
            del loop.call_soon
        grabbed, self._grabbed = self._grabbed, None
        assert grabbed is not None, "it scheduled a callback"
        fn, fargs, context = grabbed
        context.run(fn, *fargs)

    def _grab(self, callback: Callable[..., object], *args: Any,
              context: contextvars.Context | None = None) -> None:  # fmt: skip
        assert self._grabbed is None and context is not None, "one task's step at a time"
        self._grabbed = (callback, args, context)

    async def _serve(self, slot: _Slot) -> None:
        """A slot: run the queued calls, park until woken, again; it ends at close, or
        after a call that left a contextvar set (in this task's context)."""
        base = contextvars.copy_context()
        slot.task = asyncio.current_task()
        try:
            while True:
                self.waking -= 1
                if not await self._run_queued(slot, base):
                    return
                slot.ctx = None
                fut: asyncio.Future[None] = asyncio.Future(loop=self.loop)
                self.parked.append(fut)
                try:
                    await fut
                except asyncio.CancelledError:
                    if self.closing:
                        return
                    # A cancel of the task nobody asked of this slot (a handler kept it
                    # and cancelled it later): go on as if woken.
                    if fut.cancelled():  # (else spawn woke it, and counted it)
                        if fut in self.parked:
                            self.parked.remove(fut)
                        self.waking += 1
                    _uncancel(slot.task)  # type: ignore[arg-type]
        finally:
            slot.ctx = None
            self.slots.discard(slot)
            if self.items and not self.closing:  # a slot in its place, out of this context
                self.loop.call_soon(self.spawn, ())

    async def _run_queued(self, slot: _Slot, base: contextvars.Context) -> bool:
        """Run calls while any are queued; False: the slot ends (see :meth:`_serve`)."""
        q, ex, loop, copy_context = self.items, self.ex, self.loop, contextvars.copy_context
        task = slot.task
        handler, clock, done, pass_ctx = ex.handler, ex.clock, ex.done, ex.with_context
        coro, isawaitable, wait_for = types.CoroutineType, inspect.isawaitable, asyncio.wait_for
        while q:
            key, job, ctx = q.popleft()
            slot.ctx = ctx
            if ctx is not None:
                ctx.canceller = slot.canceller
                if ctx.cancel_requested:  # before it started: cancelled if it suspends
                    loop.call_soon(slot.cancel)
            # run.run_async's body, inline (its coroutine cost ~2,000 instructions per call)
            t0 = clock() if clock is not None else 0
            start = perf()
            try:
                result = handler(job, ctx) if pass_ctx and ctx is not None else handler(job)
                if type(result) is coro or isawaitable(result):
                    timeout = job.opts.timeout
                    result = await (result if timeout is None else wait_for(result, timeout / 1000))
            except (Exception, asyncio.CancelledError) as exc:
                out = raised(exc, job, ctx, start, clock, t0)
            else:
                if (
                    result is None
                    and clock is None
                    and perf() - start < 0.001
                    and (ctx is None or not ctx.cancel_requested)
                ):  # returned's common case, no call
                    out = OK_NONE
                else:
                    out = returned(result, job, ctx, start, clock, t0)
            if slot.hit is not None or task._must_cancel:  # type: ignore[union-attr]
                await self._clear_cancel(slot)
            done.put((key, out))
            if ex.wake is not None:
                ex.wake()
            if self.closing or copy_context() != base:  # a call left a contextvar set
                return False
        return True

    async def _clear_cancel(self, slot: _Slot) -> None:
        """After a call its job's cancel reached, or one that cancelled its own task and
        returned (the cancel is still to come): no cancel left for the next call."""
        slot.ctx = slot.hit = None  # its call is over: a late cancel of that job finds none
        task = slot.task
        assert task is not None
        if task._must_cancel:  # type: ignore[attr-defined]
            try:
                await asyncio.sleep(0)  # a bare yield: the pending cancel is thrown here
            except asyncio.CancelledError:
                pass
        _uncancel(task)

    async def close(self) -> None:
        """End every slot: parked ones at once, one in a call by cancelling that call
        (its outcome still arrives in ``done``); waits ``CLOSE_WAIT_S`` at most."""
        self.closing = True
        tasks = [s.task for s in self.slots if s.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=CLOSE_WAIT_S)
