"""Cursor pages of a state's jobs (``get_jobs_page``; :mod:`bunq.pages` has the contract).

Completed and failed jobs are read from their queue's time index
(:class:`~.finished.Finished`): a page costs O(log n + page) at any depth.

Waiting, paused, delayed, waiting-children and active pages are a *selection*
over the shard's records: the ``limit + 1`` smallest sort keys after the
cursor (``heapq.nsmallest``), O(jobs in the shard) with no sort and no copy,
at any depth alike (an offset read sorts them all, and the last page costs
twice the first). The ready lanes are 4-ary heaps ordered for leasing; an
index in listing order would cost every add and lease a second O(log n)
insertion, which the hot path does not pay for a page an operator may never
ask for (docs/performance.md, "Cursor pages").
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any

from ..job import JobState
from ..pages import JobPage, Key, cut, decode, page_limit
from .core import Core
from .query import result_of
from .record import CHILDREN, WAITING, Rec, snapshot

_READY_KEY = (int, int, int)  # Rec.order_key
_TIME_KEY = (int, int)  # (time, signed admission number)


def _delayed_key(rec: Rec) -> tuple[int, int]:
    return rec.run_at, rec.signed_seq()


def _select(recs: Iterable[Rec], key: Callable[[Rec], Any], after: Key | None,
            n: int) -> list[Rec]:  # fmt: skip
    if after is not None:
        recs = (r for r in recs if key(r) > after)
    return heapq.nsmallest(n, recs, key=key)


def get_jobs_page(core: Core, queue: str, state: JobState, limit: int = 100,
                  after: str | None = None) -> JobPage:  # fmt: skip
    """One page of ``get_jobs(queue, state)``'s order after the cursor ``after``."""
    state = JobState.parse(state)
    limit = page_limit(limit)
    finished = state is JobState.COMPLETED or state is JobState.FAILED
    shape = _TIME_KEY if finished or state is JobState.DELAYED else _READY_KEY
    key = None if after is None else decode(state, after, shape)
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None:
            return JobPage()
        now = core.clock()
        if finished:
            index = q.completed if state is JobState.COMPLETED else q.dlq
            recs = (index.newest(0, limit + 1) if key is None
                    else index.older_than(int(key[0]), int(key[1]), limit + 1))  # fmt: skip
            rows = [(index.key_of(r), r) for r in recs]
        else:
            if state is JobState.ACTIVE:
                mine: Iterable[Rec] = (r for r in shard.active.values() if r.queue == queue)
            elif state is JobState.WAITING_CHILDREN:
                mine = (r for r in shard.jobs.values() if r.state is CHILDREN and r.queue == queue)
            elif state is JobState.DELAYED:
                mine = (r for r in shard.jobs.values()
                        if r.state is WAITING and r.run_at > now and r.queue == queue)  # fmt: skip
            elif (state is JobState.PAUSED) != q.paused:
                return JobPage()
            else:  # the ready lanes' listing, and the few parked jobs
                shard.promote(now)
                listing = q.lanes.listed(shard.jobs, queue, now / 1000)
                ready = listing.after(key, limit + 1)  # type: ignore[arg-type]
                mine = [*ready, *q.parked.values()] if q.parked else ready
            by = _delayed_key if state is JobState.DELAYED else Rec.order_key
            rows = [(by(r), r) for r in _select(mine, by, key, limit + 1)]
        return cut(state, [(k, snapshot(r, now, result_of(core, r))) for k, r in rows], limit)
