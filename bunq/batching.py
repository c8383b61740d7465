"""Leader/follower batching: concurrent callers share one expensive step.

The first caller to arrive becomes the leader: it takes every call that queued
up (up to ``most`` units of ``size``), hands them to ``flush`` at once, and
repeats until nothing is left; the others wait for their answer. A lone caller
pays one lock round and flushes alone. Used by SQL group commit (one
transaction, one disk flush for many writers) and by the remote backend's
``add`` (one frame, one round trip for many producers).

``flush(batch)`` sets each slot's ``result`` or ``error``; if it raises, every
slot without an error gets that exception, except that an exception of an
``alone_on`` type from a batch of several is taken as one caller's own fault
(its data refused the shared step) and each caller is flushed alone, so one
caller's error never becomes another's.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

W = TypeVar("W")
BULK = 64  # calls with this many jobs pause the cyclic GC (see paused_gc)


def paused_gc() -> _PausedGc:
    """Pause the cyclic garbage collector for one bulk call.

    A bulk add, lease or complete allocates a few thousand short-lived
    objects; letting the collector scan them (and every object the process
    keeps: the engine's records, a backend's caches) every 700 allocations costs
    ~25 % of an ``add_bulk``. Bulk calls create no reference cycles, so deferring
    collection loses nothing; the collector is re-enabled only if it was enabled
    when the call began.

    Re-enabling is the last thing the block does: a generator-based context manager
    would raise StopIteration after it, and that allocation alone starts the young
    collection the pause put off, while the call's results (1,000 ``Job`` objects
    for an ``add_bulk`` of 1,000) are still alive, so every one of them is scanned.
    Ended last, with the results returned from inside the block, a caller that drops
    them frees them before anything allocates again, and the collection that was due
    finds nothing of theirs to scan.
    """
    return _PausedGc()


class _PausedGc:
    __slots__ = ("_was",)

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        if self._was:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was:
            gc.enable()  # nothing may allocate after this (see paused_gc)


class Slot(Generic[W]):
    """One caller's work and, once flushed, its answer."""

    __slots__ = ("work", "done", "result", "error")

    def __init__(self, work: W) -> None:
        self.work = work
        self.done: threading.Event | None = None  # only followers wait
        self.result: Any = None
        self.error: BaseException | None = None


class Batcher(Generic[W]):
    """Run units of work through ``flush`` in batches, led by one of the callers."""

    def __init__(self, flush: Callable[[list[Slot[W]]], None], *,
                 alone_on: tuple[type[BaseException], ...] = (), most: int | None = None,
                 size: Callable[[W], int] | None = None) -> None:  # fmt: skip
        self._flush = flush
        self._alone_on = alone_on
        self._most = most  # units per batch (a batch holds at least one call)
        self._size = size or (lambda _w: 1)
        self._lock = threading.Lock()
        self._pending: list[Slot[W]] = []
        self._leader = False

    def run(self, work: W) -> Any:
        """Flush ``work`` (possibly with others') and return its result or raise its error."""
        slot: Slot[W] = Slot(work)
        with self._lock:
            self._pending.append(slot)
            lead = not self._leader
            self._leader = True
            if not lead:
                slot.done = threading.Event()
        if lead:
            self._lead()
        else:
            assert slot.done is not None
            slot.done.wait()
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _take(self) -> list[Slot[W]]:
        """The first pending calls within ``most`` units (at least one call)."""
        assert self._most is not None
        k, total = 0, 0
        for s in self._pending:
            total += self._size(s.work)
            if k and total > self._most:
                break
            k += 1
        batch = self._pending[:k]
        del self._pending[:k]
        return batch

    def _lead(self) -> None:
        while True:
            with self._lock:
                if self._most is None:
                    batch, self._pending = self._pending, []
                else:
                    batch = self._take()
                if not batch:
                    self._leader = False
                    return
            try:
                self._flush(batch)
            except BaseException as exc:  # every waiting caller must hear of it
                self._failed(batch, exc)
            for s in batch:
                if s.done is not None:
                    s.done.set()

    def _failed(self, batch: list[Slot[W]], exc: BaseException) -> None:
        if len(batch) > 1 and isinstance(exc, self._alone_on):
            for s in batch:  # one caller's data failed the shared step: each alone
                s.result, s.error = None, None
                try:
                    self._flush([s])
                except BaseException as alone:
                    self._failed([s], alone)
            return
        for s in batch:
            if s.error is None:
                s.error = exc
