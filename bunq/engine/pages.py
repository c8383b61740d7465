"""Cursor pages of a state's jobs (``get_jobs_page``; :mod:`bunq.pages` has the contract).

Every page of a state with many jobs costs O(log n + page) at any depth:

- completed and failed jobs are read from their queue's time index
  (:class:`~.finished.Finished`);
- waiting (or paused) and delayed jobs from the queue's *listings*
  (:mod:`.listing`): the ready or delayed records in listing order, built by
  the first page read of the queue and state (O(n log n), once), kept in step
  by every transition afterwards and dropped after ten unread minutes. The
  ready lanes are heaps ordered for leasing and the delayed heap is the
  shard's, by time: neither gives the jobs after a cursor without a scan and
  a sort of all of them; a listing kept for every queue would cost each add
  and lease a second insertion, so only queues someone pages through keep one
  (the trade-off and its figures: docs/performance.md, "Cursor pages");
- active and waiting-children jobs, fewer by nature (leases in flight, parents
  waiting for children), are a selection of the ``limit + 1`` smallest keys
  after the cursor (``heapq.nsmallest``): O(those jobs of the shard), no sort.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any

from ..job import JobState
from ..pages import JobPage, Key, cut, decode, page_limit
from .core import Core
from .listing import Listing, run_order
from .query import result_of
from .record import CHILDREN, Rec, snapshot

_READY_KEY = (int, int, int)  # Rec.order_key
_TIME_KEY = (int, int)  # (time, signed admission number)


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
    timed = finished or state is JobState.DELAYED
    key: tuple[int, ...] | None = None  # the decoded shape holds only ints
    if after is not None:
        key = tuple(map(int, decode(state, after, _TIME_KEY if timed else _READY_KEY)))
    n = limit + 1
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None:
            return JobPage()
        now = core.clock()
        now_s = now / 1000
        if finished:
            index = q.completed if state is JobState.COMPLETED else q.dlq
            recs = index.newest(0, n) if key is None else index.older_than(key[0], key[1], n)
            rows: list[tuple[Key, Rec]] = [(index.key_of(r), r) for r in recs]
        elif state is JobState.DELAYED:
            shard.promote(now)  # then the delayed heap holds exactly the delayed jobs
            if q.delayed_listing is None:
                delayed = shard.delayed
                mine = (r for r in shard.jobs.values() if r.queue == queue and r.id in delayed)
                q.delayed_listing = Listing(mine, now_s, run_order)
            q.delayed_listing.read_at = now_s
            rows = [(run_order(r), r) for r in q.delayed_listing.after(key, n)]
        elif state is JobState.ACTIVE or state is JobState.WAITING_CHILDREN:
            if state is JobState.ACTIVE:
                mine = (r for r in shard.active.values() if r.queue == queue)
            else:
                mine = (r for r in shard.jobs.values() if r.state is CHILDREN and r.queue == queue)
            rows = [(r.order_key(), r) for r in _select(mine, Rec.order_key, key, n)]
        elif (state is JobState.PAUSED) != q.paused:
            return JobPage()
        else:
            shard.promote(now)  # then the lanes hold exactly the due jobs (and `parked`)
            ready = q.lanes.listed(shard.jobs, queue, now_s).after(key, n)
            if q.parked:  # ready jobs whose TTL ran out, until the sweep takes them
                ready = _select([*ready, *q.parked.values()], Rec.order_key, key, n)
            rows = [(r.order_key(), r) for r in ready]
        return cut(state, [(k, snapshot(r, now, result_of(core, r))) for k, r in rows], limit)
