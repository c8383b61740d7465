"""Group commit: concurrent writers share one transaction (and one flush).

The first caller becomes the leader and commits every batch that queued up
while it worked; each caller's work runs inside its own savepoint, so one
caller's error (a duplicate, say) rolls back only its own rows. A lone
caller pays one lock round and commits alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

from ...errors import DependencyError, DuplicateJob, ValidationError

T = TypeVar("T")
TxT = TypeVar("TxT")


class _Slot(Generic[TxT]):
    __slots__ = ("work", "done", "result", "error")

    def __init__(self, work: Callable[[TxT], Any]) -> None:
        self.work = work
        self.done: threading.Event | None = None  # only followers wait
        self.result: Any = None
        self.error: BaseException | None = None


class GroupCommit(Generic[TxT]):
    """Run units of work in shared transactions opened by ``begin``."""

    def __init__(self, begin: Callable[[], AbstractContextManager[TxT]],
                 savepoint: Callable[[TxT, str], None]) -> None:  # fmt: skip
        self._begin = begin
        self._savepoint = savepoint  # (tx, "SAVEPOINT x" | "RELEASE x" | "ROLLBACK TO x")
        self._lock = threading.Lock()
        self._pending: list[_Slot[TxT]] = []
        self._leader = False

    def run(self, work: Callable[[TxT], T]) -> T:
        """Run ``work(tx)`` in a committed transaction, possibly shared."""
        slot: _Slot[TxT] = _Slot(work)
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
        return slot.result  # type: ignore[no-any-return]

    def _lead(self) -> None:
        while True:
            with self._lock:
                batch, self._pending = self._pending, []
                if not batch:
                    self._leader = False
                    return
            try:
                self._commit(batch)
            except (DuplicateJob, DependencyError, ValidationError) as exc:
                # One caller's own error failed a shared statement (the PostgreSQL
                # plain-add path has no savepoints): each caller commits alone, so
                # one caller's duplicate never becomes another's.
                if len(batch) == 1:
                    batch[0].error = batch[0].error or exc
                else:
                    for s in batch:
                        s.result, s.error = None, None
                        self._commit_alone(s)
            except BaseException as exc:
                for s in batch:
                    if s.error is None:
                        s.error = exc
            for s in batch:
                if s.done is not None:
                    s.done.set()

    def _commit_alone(self, slot: _Slot[TxT]) -> None:
        try:
            self._commit([slot])
        except Exception as exc:
            if slot.error is None:
                slot.error = exc

    def _commit(self, batch: list[_Slot[TxT]]) -> None:
        with self._begin() as tx:
            if len(batch) == 1:
                try:
                    batch[0].result = batch[0].work(tx)
                except BaseException as exc:
                    batch[0].error = exc
                    raise
                return
            for s in batch:
                self._savepoint(tx, "SAVEPOINT bunq_gc")
                try:
                    s.result = s.work(tx)
                except Exception as exc:
                    s.error = exc
                    self._savepoint(tx, "ROLLBACK TO bunq_gc")
                self._savepoint(tx, "RELEASE bunq_gc")
