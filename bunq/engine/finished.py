"""Finished jobs of one queue (completed, or failed in the DLQ), ordered by time.

A :class:`~bunq._core.SkipList` of job ids scored by the time each job
finished (its DLQ time for failed jobs); the records are the shard's. The
oldest is found in O(1); a time range — ``clean(grace)``, completed
retention, DLQ age and auto-retry — costs O(log n + k), and a page of the
newest (``get_jobs(completed|failed)``, ``dlq_list``) O(log n + k + ties),
where a scan and a sort of every finished job cost O(n log n).

Equal times keep the SQL backends' tie order: pages list newest first, and
jobs that finished in the same millisecond by admission number, newest
first; time ranges list oldest first, in finish order.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from .._core import SkipList
from .record import Rec


class Finished:
    """The finished jobs of one queue in one state, indexed by time (shard lock held)."""

    __slots__ = ("_recs", "_order")

    def __init__(self, recs: dict[str, Rec]) -> None:
        """:param recs: the shard's records (id -> record), where indexed ids are looked up."""
        self._recs = recs
        self._order: SkipList[str] = SkipList()

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._order

    def __iter__(self) -> Iterator[Rec]:
        """Iterate over a snapshot of the records, oldest first."""
        recs = self._recs
        return iter([recs[jid] for jid in self._order])

    def get(self, job_id: str) -> Rec | None:
        """Return the record of ``job_id`` if it is here."""
        return self._recs[job_id] if job_id in self._order else None

    def add(self, rec: Rec, at: int, bound: float = math.inf) -> Rec | None:
        """Index ``rec`` as finished at ``at`` (ms).

        Past ``bound`` records the oldest is taken out again and returned (the
        caller forgets it); else None. One call, as a completion is the hot path.
        """
        order = self._order
        order.insert(rec.id, at)
        if len(order) <= bound:
            return None
        return self._recs[order.pop_min()[0]]

    def remove(self, rec: Rec) -> None:
        """Drop ``rec`` from the index (the caller removes the record)."""
        self._order.remove(rec.id)

    def oldest(self) -> Rec:
        """Return the record that finished first (``IndexError`` if empty)."""
        return self._recs[self._order.peek_min()[0]]

    def until(self, at: int, limit: int | None = None) -> list[Rec]:
        """Return the records finished at or before ``at``, oldest first, at most ``limit``."""
        recs = self._recs
        return [recs[jid] for jid, _ in self._order.range_by_score(float("-inf"), at, limit)]

    def newest(self, offset: int, count: int) -> list[Rec]:
        """Return positions ``offset .. offset + count`` of the newest-first order.

        The positions are located by rank; the window is then widened to whole
        runs of equal time, sorted by the exact order and cut back to the page.
        """
        order = self._order
        n = len(order)
        hi = n - offset  # the page, as ascending ranks [lo, hi)
        if hi <= 0 or count <= 0:
            return []
        window = order.range_by_rank(max(hi - count, 0), hi)
        run = order.range_by_score(window[0][1], window[-1][1])
        after = n - order.rank(run[0][0]) - len(run)  # newer than the whole run
        recs = self._recs
        ranked = sorted(((at, recs[jid].signed_seq(), recs[jid]) for jid, at in run),
                        key=lambda e: (e[0], e[1]), reverse=True)  # fmt: skip
        start = offset - after
        return [e[2] for e in ranked[start : start + count]]

    def key_of(self, rec: Rec) -> tuple[int, int]:
        """Return the sort key of an indexed ``rec``: (its time here, signed admission number)."""
        return int(self._order.score_of(rec.id)), rec.signed_seq()

    def older_than(self, at: int, sseq: int, count: int) -> list[Rec]:
        """Return up to ``count`` records after key (``at``, ``sseq``) in the newest-first order.

        The cursor read of :meth:`newest`: O(log n + count + ties at ``at``),
        whether or not the record at the key is still here.
        """
        order, recs = self._order, self._recs
        tied = [recs[jid] for jid, _ in order.range_by_score(at, at)]
        out = sorted((r for r in tied if r.signed_seq() < sseq), key=Rec.signed_seq, reverse=True)
        del out[count:]
        if len(out) < count:
            above = order.range_by_score(at, math.inf, 1)  # the first at or after `at`
            below = order.rank(above[0][0]) if above else len(order)  # how many are older
            out += self.newest(len(order) - below, count - len(out))
        return out

    def _check(self) -> None:
        """Assert the index and the records agree (tests; O(n))."""
        self._order._check()
        for jid in self._order:
            assert self._recs[jid].id == jid, jid
