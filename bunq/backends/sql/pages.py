"""Cursor pages over SQL (``get_jobs_page``; :mod:`bunq.pages` has the contract).

Each page is an index seek after the previous page's last key (the ``page_*``
statements of :mod:`.queries`), so the thousandth page costs what the first
does, where ``get_jobs``' ``OFFSET`` walks every row before it. The keys are
the listing orders of ``get_jobs`` with the job id last: (priority, ord_at,
seq, id) for the ready order, (run_at, seq, id) for delayed jobs and
(finished_at, seq, id), newest first, for completed and failed ones.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from ...job import JobState
from ...pages import JobPage, Key, cut, decode, page_limit
from ..base import check_queue_name as _qn
from .core import SqlCore, Tx, unit_of_work
from .rows import COL, job_from_row

_READY = (int, int, int, str)
_TIMED = (int, int, str)
_FAR = 2**62  # a key beyond every time: the first page of a timed order


class SqlPages(SqlCore):
    """Part of SqlBackend: keyset pages of a state's jobs."""

    @abstractmethod
    def _paused(self, tx: Tx, queue: str) -> bool:
        """Whether ``queue`` is paused (SqlAdmin)."""

    @unit_of_work(idempotent=True)
    def get_jobs_page(self, queue: str, state: JobState, limit: int = 100,
                      after: str | None = None) -> JobPage:  # fmt: skip
        _qn(queue)
        state = JobState.parse(state)
        limit = page_limit(limit)
        finished = state is JobState.COMPLETED or state is JobState.FAILED
        timed = finished or state is JobState.DELAYED
        key = None if after is None else decode(state, after, _TIMED if timed else _READY)
        n = limit + 1
        with self._read() as tx:
            now = self.clock()
            if finished:
                o, s, i = key if key is not None else (_FAR, _FAR, "")
                rows = tx.q("page_finished", queue=queue, state=state.value, o=o, s=s, id=i,
                            limit=n)  # fmt: skip
            elif state is JobState.DELAYED:
                o, s, i = key if key is not None else (-_FAR, -_FAR, "")
                rows = tx.q("page_delayed", queue=queue, now=now, o=o, s=s, id=i, limit=n)
            elif state in (JobState.ACTIVE, JobState.WAITING_CHILDREN):
                rows = self._ready(tx, "state", key, n, queue=queue, state=state.value)
            elif (state is JobState.PAUSED) != self._paused(tx, queue):
                return JobPage()
            else:
                rows = self._ready(tx, "waiting", key, n, queue=queue, now=now)
        keyed: list[Key]
        if finished:
            keyed = [(r[COL.finished_at], r[COL.seq], r[COL.id]) for r in rows]
        elif timed:
            keyed = [(r[COL.run_at], r[COL.seq], r[COL.id]) for r in rows]
        else:
            keyed = [(r[COL.priority], r[COL.ord_at], r[COL.seq], r[COL.id]) for r in rows]
        return cut(
            state, [(k, job_from_row(r, now)) for k, r in zip(keyed, rows, strict=True)], limit
        )

    def _ready(self, tx: Tx, kind: str, key: Key | None, n: int,
               **args: Any) -> list[tuple[Any, ...]]:  # fmt: skip
        """The ready order after ``key``: the rest of its priority, then the lower ones."""
        if key is None:
            return tx.q(f"page_{kind}_first", limit=n, **args)
        p, o, s, i = key
        rows = tx.q(f"page_{kind}_tie", p=p, o=o, s=s, id=i, limit=n, **args)
        if len(rows) < n:
            rows += tx.q(f"page_{kind}_below", p=p, limit=n - len(rows), **args)
        return rows
