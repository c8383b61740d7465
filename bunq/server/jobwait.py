"""Who waits for which job to finish (``WaitJob``), and the wake-ups they get.

A waiter is a future registered under a job id and an owner (its
connection). The server's completion and failure paths settle the waiters
of a job with its outcome (the reply fields), so a job settled through this
server answers at once; everything else (a job settled by another broker,
swept to the DLQ, a disconnect, shutdown) wakes waiters with ``None`` and
the handler re-reads the job. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, TypeVar

from ..stacks import split

Outcome = dict[str, Any]
K = TypeVar("K")


def completed(result: Any) -> Outcome:
    """bunqueue's reply for a finished job: ``{completed: true, result}``."""
    return {"completed": True, "result": result}


def failed(reason: str | None) -> Outcome:
    """bunq's reply for a job in the DLQ: ``{completed: false, failed: true, failedReason}``."""
    return {"completed": False, "failed": True, "failedReason": split(reason)[0] or "failed"}


class JobWaiters:
    """Futures by job id and by owner; a future leaves both when it is settled or dropped."""

    def __init__(self) -> None:
        self._jobs: dict[str, set[asyncio.Future[Outcome | None]]] = {}
        self._owners: dict[int, set[asyncio.Future[Outcome | None]]] = {}
        self._where: dict[asyncio.Future[Outcome | None], tuple[str, int]] = {}

    def __len__(self) -> int:
        return len(self._where)

    def watch(self, job_id: str, owner: int) -> asyncio.Future[Outcome | None]:
        """A future settled with the job's outcome (or ``None``: look again)."""
        fut: asyncio.Future[Outcome | None] = asyncio.get_running_loop().create_future()
        self._jobs.setdefault(job_id, set()).add(fut)
        self._owners.setdefault(owner, set()).add(fut)
        self._where[fut] = (job_id, owner)
        return fut

    def unwatch(self, fut: asyncio.Future[Outcome | None]) -> None:
        """Forget ``fut`` (idempotent); it is cancelled if still pending."""
        where = self._where.pop(fut, None)
        if not fut.done():
            fut.cancel()
        if where is None:
            return
        job_id, owner = where
        _discard(self._jobs, job_id, fut)
        _discard(self._owners, owner, fut)

    def _wake(self, futs: Iterable[asyncio.Future[Outcome | None]], value: Outcome | None) -> None:
        for fut in list(futs):
            if not fut.done():
                fut.set_result(value)
            self.unwatch(fut)

    def settle(self, job_id: str, outcome: Outcome | None) -> None:
        """Answer every waiter of ``job_id`` (``None``: make them re-read the job)."""
        if self._where:
            self._wake(self._jobs.get(job_id, ()), outcome)

    def drop(self, owner: int) -> None:
        """``owner`` disconnected: wake its waiters (they see the closed session and stop)."""
        if self._where:
            self._wake(self._owners.get(owner, ()), None)

    def wake_all(self) -> None:
        """Re-check every waiter (a sweep dead-lettered jobs; shutdown)."""
        self._wake(list(self._where), None)


def _discard(index: dict[K, set[Any]], key: K, fut: Any) -> None:
    group = index.get(key)
    if group is not None:
        group.discard(fut)
        if not group:
            del index[key]
