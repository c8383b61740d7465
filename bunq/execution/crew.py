"""A Worker's concurrent loop for a sync handler over the memory engine, run by the
handler threads themselves.

With a pool fed by the worker's thread, every batch crossed two threads: the loop
thread leased and handed each job over, a pool thread ran it and handed its outcome
back, and the loop thread woke to settle it. For a fast handler those hops (thread
wake-ups, the GIL passed back and forth) were most of a job's cost. Here a handler
thread that finds no job waiting when its call returns does the loop's work itself
(settle what finished, lease for the free slots), then runs what it leased: over the
memory engine, whose calls never wait on I/O, that costs no handler thread anything
but the time of the calls.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Callable

from ..job import Lease
from .context import JobContext
from .run import Executor, Outcome, run_sync

Ready = list[tuple[Lease, Outcome]]
POLL_S = 0.05  # while slots are free and nothing was leased: look again this often


class Crew:
    """Lease, start and settle as ``_loop_concurrent`` does, on ``concurrency`` threads.

    Each thread runs the leased jobs waiting in :attr:`jobs`, one at a time; one that
    finds none left leads (one leader at a time: a lock taken without waiting): it
    settles every outcome that is ready, leases ``min(free, batch)`` jobs and queues
    them (they start at once: there is a thread per slot). The worker's own thread
    (:meth:`run`) waits for work while nothing is in flight, looks again every
    :data:`POLL_S` while slots are free, and ends the crew once stopped with nothing
    in flight.

    :param lease: ``lease(n)``: up to ``n`` held contexts (their leases, jobs).
    :param settle: records a batch of ``(lease, outcome)``.
    :param idle: waits a while for work.
    """

    def __init__(self, ex: Executor, concurrency: int, batch: int, stop: threading.Event,
                 lease: Callable[[int], list[JobContext]], settle: Callable[[Ready], None],
                 idle: Callable[[], None], name: str = "bunq-job") -> None:  # fmt: skip
        self.ex, self.concurrency, self.batch, self.stop = ex, concurrency, batch, stop
        self.lease, self.settle, self.idle, self.name = lease, settle, idle, name
        self.jobs: queue.SimpleQueue[JobContext | None] = queue.SimpleQueue()
        self.ready: collections.deque[tuple[Lease, Outcome]] = collections.deque()
        self.lead = threading.Lock()
        self.inflight = 0  # leased and started, not yet settled (changed by the leader)
        self.wake = threading.Event()  # the worker's thread has something to do
        self.failed: list[BaseException] = []

    def run(self) -> None:
        """Run until stopped with nothing in flight; an error in the loop's work (on
        any thread) ends it and is raised here."""
        threads = [threading.Thread(target=self._serve, name=f"{self.name}-{i}", daemon=True)
                   for i in range(self.concurrency)]  # fmt: skip
        for t in threads:
            t.start()
        try:
            while not self.failed:
                self._drive()
                if self.failed:
                    break
                with self.lead:  # not while a leader is between settling and leasing
                    inflight = self.inflight
                if self.ready:  # left to the lock's holder (this thread): settle it first
                    continue
                if not inflight:
                    if self.stop.is_set():
                        break
                    self.idle()
                    continue
                self.wake.wait(POLL_S)
                self.wake.clear()
        finally:
            for _ in threads:
                self.jobs.put(None)
            for t in threads:
                t.join()
        if self.failed:
            raise self.failed[0]

    def _serve(self) -> None:
        get, empty, append = self.jobs.get, self.jobs.empty, self.ready.append
        ex = self.ex  # run_sync as ex.run calls it, without that call per job
        handler, clock, give = ex.handler, ex.clock, ex.with_context
        while (ctx := get()) is not None:
            append((ctx.lease, run_sync(handler, ctx.job, clock, ctx, give)))  # type: ignore[arg-type]
            if empty():  # no job waiting for this thread: it does the loop's work
                self._drive()

    def _drive(self) -> None:
        """Settle what is ready and lease for the free slots, unless another thread is
        at it: that one looks again after letting go, so no outcome is left behind."""
        ready = self.ready
        while self.lead.acquire(blocking=False):
            try:
                self._round()
            except BaseException as exc:  # ends the worker, as in _loop_concurrent
                self.failed.append(exc)
                self.wake.set()
                return
            finally:
                self.lead.release()
            if not ready:
                return

    def _round(self) -> None:
        ready = self.ready
        n = len(ready)
        if n:
            done = [ready.popleft() for _ in range(n)]  # appends go on meanwhile
            self.inflight -= n
            self.settle(done)
        free = self.concurrency - self.inflight
        ctxs = self.lease(min(free, self.batch)) if free > 0 and not self.stop.is_set() else []
        if ctxs:
            now = time.monotonic()
            put = self.jobs.put
            self.inflight += len(ctxs)
            for ctx in ctxs:
                ctx.started = now
                put(ctx)
        elif not self.inflight:
            self.wake.set()  # the worker's thread waits for work, or ends the crew
