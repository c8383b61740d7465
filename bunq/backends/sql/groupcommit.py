"""Group commit: concurrent writers share one transaction (and one flush).

Batched by :class:`bunq.batching.Batcher` (the first caller leads and commits
every unit of work that queued up while it worked); each caller's work runs
inside its own savepoint, so one caller's error (a duplicate, say) rolls back
only its own rows. A lone caller commits alone, without savepoints. When a
caller's own error fails a shared statement (the PostgreSQL plain-add path has
no savepoints), each caller commits alone.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

from ...batching import Batcher, Slot
from ...errors import DependencyError, DuplicateJob, ValidationError

TxT = TypeVar("TxT")
Work = Callable[[TxT], Any]


class GroupCommit(Batcher[Work[TxT]], Generic[TxT]):
    """A Batcher whose flush is one transaction opened by ``begin``."""

    def __init__(self, begin: Callable[[], AbstractContextManager[TxT]],
                 savepoint: Callable[[TxT, str], None]) -> None:  # fmt: skip
        super().__init__(self._commit, alone_on=(DuplicateJob, DependencyError, ValidationError))
        self._begin = begin
        self._savepoint = savepoint  # (tx, "SAVEPOINT x" | "RELEASE x" | "ROLLBACK TO x")

    def _commit(self, batch: list[Slot[Work[TxT]]]) -> None:
        with self._begin() as tx:
            if len(batch) == 1:
                batch[0].result = batch[0].work(tx)
                return
            for s in batch:
                self._savepoint(tx, "SAVEPOINT bunq_gc")
                try:
                    s.result = s.work(tx)
                except Exception as exc:
                    s.error = exc
                    self._savepoint(tx, "ROLLBACK TO bunq_gc")
                self._savepoint(tx, "RELEASE bunq_gc")
