"""A Worker's concurrent loop run as callbacks of its coroutine handler's event loop.

Over the memory engine (whose calls never wait on I/O) a Worker with a coroutine
handler runs its executor's loop on its own thread, and leases and settles there,
between handler calls: no hop between two threads per batch (a call that never
suspends is done when ``Executor.start`` returns), which was most of the wall time of
a fast handler's run (two thread wake-ups per batch, the GIL passed back and forth).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from ..job import Lease
from .context import JobContext
from .run import Executor, Outcome

Ready = list[tuple[Lease, Outcome]]
# Rounds one turn runs while no call is suspended (none waits on the loop): the loop's
# other callbacks (a cancel, a timer, a task a handler left running) wait at most this
# many batches for their turn (a turn of the loop per batch was a poll per batch).
BATCHES_PER_TURN = 8


class OnLoop:
    """Lease, start and settle as ``_loop_concurrent`` does, one turn per callback.

    Each turn settles what finished, leases for the free slots and starts those; the
    next turn comes at once when slots are left or outcomes are ready (one loop
    iteration between: suspended calls go on), when an outcome arrives
    (``Executor.wake``; after 50 ms at most while slots are free), or after an idle wait
    for work, which runs on the loop's default executor (it never blocks the loop).

    :param lease: ``lease(n)``: up to ``n`` held contexts (their leases, jobs).
    :param settle: records a batch of ``(lease, outcome)``.
    :param idle: waits a while for work (blocking: run off the loop).
    """

    def __init__(self, ex: Executor, concurrency: int, batch: int, stop: threading.Event,
                 lease: Callable[[int], list[JobContext]], settle: Callable[[Ready], None],
                 idle: Callable[[], None]) -> None:  # fmt: skip
        assert ex.loop is not None, "a coroutine handler's executor"
        self.ex, self.loop, self.concurrency, self.batch = ex, ex.loop, concurrency, batch
        self.stop, self.lease, self.settle, self.idle = stop, lease, settle, idle
        self.inflight = 0  # started, outcome not yet collected from ex.done
        self.parked = False  # waiting for ex.wake (or the timer)
        self.timer: asyncio.TimerHandle | None = None
        self.failed: list[BaseException] = []
        self.ended = False  # the loop was stopped: a late callback starts nothing

    def run(self) -> None:
        """Run the loop on this thread until stopped with nothing in flight; an error in
        a turn ends it and is raised here."""
        self.loop.call_soon(self._turn)
        self.ex.run_loop()
        if self.failed:
            raise self.failed[0]

    def _wake(self) -> None:  # an outcome was put in ex.done (on the loop thread)
        if self.parked:
            self._unpark()
            if self.timer is not None:
                self.timer.cancel()
            self.loop.call_soon(self._turn)

    def _park(self) -> None:
        """Wait for an outcome: ``ex.wake`` is set only meanwhile (a call that finishes
        while the turn runs makes no call of its own)."""
        self.parked = True
        self.ex.wake = self._wake

    def _unpark(self) -> None:
        self.parked = False
        self.ex.wake = None

    def _idle_done(self, f: asyncio.Future[None]) -> None:
        exc = None if f.cancelled() else f.exception()
        if exc is not None:
            self._fail(exc)
        else:
            self._turn()

    def _fail(self, exc: BaseException) -> None:
        self.failed.append(exc)
        self._end()

    def _end(self) -> None:
        self.ended = True
        self.loop.stop()

    def _turn(self) -> None:
        if self.parked:  # the timer's turn
            self._unpark()
        self.timer = None
        if self.ended:  # run_loop's shutdown turns the loop again (a timer, an outcome)
            return
        try:
            for _ in range(BATCHES_PER_TURN):
                if not self._step():
                    return  # it waits: for an outcome, a timer or work
                if self.ex.suspended:
                    break  # a call waits on the loop: one turn of it first
            self.loop.call_soon(self._turn)
        except BaseException as exc:  # ends the worker, as in _loop_concurrent
            self._fail(exc)

    def _step(self) -> bool:
        """One lease-start-settle round; True: go on at once (else it has set up what
        calls the next turn, or stopped the loop)."""
        done = self.ex.done
        ready: Ready = []
        # Only this thread takes from done: qsize() items are there (no Empty raised).
        for _ in range(done.qsize()):
            ctx, o = done.get_nowait()
            ready.append((ctx.lease, o))
        if ready:
            self.inflight -= len(ready)
            self.settle(ready)
        stopping = self.stop.is_set()
        if stopping and not self.inflight:
            self._end()
            return False
        free = self.concurrency - self.inflight
        ctxs = self.lease(min(free, self.batch)) if free > 0 and not stopping else []
        if ctxs:
            now = time.monotonic()
            for ctx in ctxs:
                ctx.started = now
            self.inflight += len(ctxs)
            self.ex.start([(ctx, ctx.job, ctx) for ctx in ctxs])  # key: the context itself
        if not self.inflight:
            self.loop.run_in_executor(None, self.idle).add_done_callback(self._idle_done)
        elif not done.empty() or (ctxs and self.inflight < self.concurrency):
            return True
        else:  # every slot busy, or nothing to lease now: wait for an outcome
            self._park()
            if self.inflight < self.concurrency:
                self.timer = self.loop.call_later(0.05, self._turn)
        return False
