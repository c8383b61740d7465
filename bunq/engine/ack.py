"""Settling leases: complete, fail and extend under the fence, and dependents.

The fence is (token, attempt): a settle acts only while the job is active
with both still matching, else it answers ``STALE`` and changes nothing.
Completing a job releases the jobs that wait for it (``depends_on``): they
are collected under ``xlock`` together with the completion and moved to
waiting afterwards, each under its own shard's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..codec import pack
from ..job import Attempt, Lease, Settle
from ..policy import FailDecision
from ..validate import duration, storable
from .core import Core
from .flowfail import settle_flows
from .record import ACTIVE, CHILDREN, Rec
from .shard import Shard

OK = Settle.OK
STALE = Settle.STALE


def _fenced(shard: Shard, lease: Lease) -> Rec | None:
    rec = shard.jobs.get(lease.job.id)
    if (rec is None or rec.state is not ACTIVE or rec.token != lease.token
            or rec.attempts != lease.attempt):  # fmt: skip
        return None
    return rec


def complete(core: Core, lease: Lease, result: Any = None) -> Settle:
    """Mark the leased job completed with ``result``; STALE if the fence moved on."""
    return complete_many(core, [(lease, result)])[0]


def complete_many(core: Core, items: Sequence[tuple[Lease, Any]]) -> list[Settle]:
    """Complete several leases; one Settle per item, in order.

    Every result is encoded (and size-checked) before anything changes.
    """
    if not items:
        return []
    limit = core.max_payload
    blobs = [None if r is None else pack(r, "result", limit) for _, r in items]
    out = [STALE] * len(items)
    by_shard: dict[Shard, list[int]] = {}
    queues = {lease.job.queue for lease, _ in items}
    if len(queues) == 1:  # the common case: a driver settles a batch of one queue
        by_shard[core.route(queues.pop())] = list(range(len(items)))
    else:
        route = core.route
        for i, (lease, _) in enumerate(items):
            by_shard.setdefault(route(lease.job.queue), []).append(i)
    released: list[Rec] = []
    for shard, idxs in by_shard.items():
        _complete_in(core, shard, idxs, items, blobs, out, released)
    if released:
        release(core, released)
    if core.store is not None:
        core.store.kick()
    return out


def _complete_in(core: Core, shard: Shard, idxs: list[int], items: Sequence[tuple[Lease, Any]],
                 blobs: list[bytes | None], out: list[Settle],
                 released: list[Rec]) -> None:  # fmt: skip
    """Complete ``items[i]`` (encoded result ``blobs[i]``) for each ``i`` of ``idxs``, all
    of ``shard``: ``out[i]`` OK unless its fence moved on; the jobs waiting on them are
    added to ``released``."""
    waiting_on, results = core.waiting_on, core.results
    with shard.lock, core.xlock:
        now = core.clock()
        queues, jobs = shard.queues, shard.jobs
        for i in idxs:  # each completion inline (_fenced too): no call of its own per job
            lease = items[i][0]
            rec = jobs.get(lease.job.id)
            if (rec is None or rec.state is not ACTIVE or rec.token != lease.token
                    or rec.attempts != lease.attempt):  # fmt: skip
                continue
            q = queues[rec.queue]
            shard.complete(q, rec, now)
            opts = rec.opts
            if opts.unique_key is not None:
                shard.drop_unique(rec, held_only=True)
            if waiting_on:
                waiters = waiting_on.pop(rec.id, None)
                if waiters:
                    released.extend(waiters)
            if opts.remove_on_complete:
                if jobs.get(rec.id) is rec:
                    shard.forget(q, rec)
            elif (blob := blobs[i]) is not None:
                results.put(rec.id, blob)
            out[i] = OK


def release(core: Core, recs: list[Rec]) -> None:
    """Count one completed dependency off each of ``recs``; wake those with none left."""
    by_shard: dict[Shard, list[Rec]] = {}
    for rec in recs:
        by_shard.setdefault(core.route(rec.queue), []).append(rec)
    for shard, group in by_shard.items():
        with shard.lock:
            now = core.clock()
            for rec in group:
                if shard.jobs.get(rec.id) is not rec or rec.state is not CHILDREN:
                    continue  # removed, or re-admitted under the same id meanwhile
                rec.pending -= 1
                if rec.pending > 0:
                    shard.touch(rec)
                    continue
                q = shard.queues[rec.queue]
                shard.leave_children(q, rec)
                rec.run_at = now
                shard.to_waiting(q, rec, now)


def fail(core: Core, lease: Lease, error: str | None, decision: FailDecision,
         duration_ms: int = 0) -> Settle:  # fmt: skip
    """Record a failed attempt and apply ``decision`` (retry, delay or dlq) under the fence.

    ``retry`` spends the attempt and waits until ``decision.run_at``; ``delay``
    gives the attempt back; ``dlq`` moves the job to the dead-letter queue.
    """
    duration(duration_ms, "duration_ms")
    if error is not None:
        error = storable(error, core.config.error_max)
    shard = core.route(lease.job.queue)
    with shard.lock:
        now = core.clock()
        rec = _fenced(shard, lease)
        if rec is None:
            return STALE
        q = shard.queues[rec.queue]
        shard.leave_active(q, rec)
        rec.error = error
        rec.reason = decision.reason
        if decision.kind != "delay":
            rec.add_attempt(Attempt(lease.attempt, error, duration_ms, now, decision.reason))
        if decision.kind == "dlq":
            shard.to_failed(q, rec, now)
            shard.drop_unique(rec, held_only=True)
            if rec.opts.remove_on_fail and shard.jobs.get(rec.id) is rec:
                shard.forget(q, rec)
            dead_child = rec.opts.parent_id is not None
        else:
            dead_child = False
            if decision.kind == "delay":
                rec.attempts -= 1
            rec.run_at = max(decision.run_at, now)
            shard.to_waiting(q, rec, now)
    if dead_child:
        settle_flows(core)
    if core.store is not None and (decision.kind != "dlq" or dead_child):
        core.store.kick()  # (a dead-lettered job alone is written with the next batch)
    return OK


def extend(core: Core, lease: Lease, lease_ms: int) -> Settle:
    """Push the lease's expiry to now + ``lease_ms`` under the fence."""
    shard = core.route(lease.job.queue)
    duration(lease_ms, "lease_ms")
    with shard.lock:
        rec = _fenced(shard, lease)
        if rec is None:
            return STALE
        rec.lease_until = core.clock() + lease_ms
        shard.touch(rec)
    return OK
