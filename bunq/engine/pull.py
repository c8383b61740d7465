"""Leasing: ``lease`` due jobs in one atomic step, and long-poll ``wait``.

Order (the SQL backends' ``ORDER BY priority DESC, ord_at, seq``): higher
priority first; at equal priority LIFO jobs first, newest first, then FIFO
jobs by run time and admission. Ready lanes keep that order because a job
enters its lane when it becomes ready, and due delayed jobs are always
promoted (in run-time order) before anything else enters a lane.

Limits never raise: a paused queue, a spent rate bucket, a full concurrency
budget or blocked FIFO groups just yield fewer (or no) jobs. A job whose TTL
ran out is never leased; it is parked and the next sweep dead-letters it.
"""

from __future__ import annotations

import math
import os

from ..job import Lease
from ..validate import lease_args
from .core import Core
from .qstate import QueueState
from .record import Rec, leases_of
from .shard import Shard


def lease(core: Core, queue: str, n: int, lease_ms: int, owner: str = "") -> list[Lease]:
    """Lease up to ``n`` due jobs of ``queue`` for ``lease_ms``; each spends an attempt.

    Every lease of one call shares a token; the fence is (token, attempt).
    """
    shard = core.route(queue)
    lease_args(n, lease_ms, owner)
    if n <= 0:
        return []
    token = os.urandom(16).hex()
    out: list[Lease] = []
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None or q.paused:
            return out
        now = core.clock()
        shard.promote(now)
        if not q.n_waiting:
            return out
        now_s = now / 1000
        n = q.admissible(n, now_s)
        if n <= 0:
            return out
        lanes, until = q.lanes, now + lease_ms
        if not lanes.groups and lanes.listing is None:  # the common case: one lane's head
            recs = shard.lease_ready(q, n, now, token, until, owner)
        else:
            recs = _pick(shard, q, n, now, token, until, owner)
        if len(recs) < n and q.n_waiting > len(q.parked):
            q.stuck = q.version  # only blocked groups left: wait() must not spin
        out = leases_of(recs, token, until, owner)
        if out and q.bucket is not None:
            q.bucket.try_acquire(now_s, len(out))
    if out and core.store is not None:
        core.store.kick()
    return out


def _pick(shard: Shard, q: QueueState, n: int, now: int, token: str, until: int,
          owner: str) -> list[Rec]:  # fmt: skip
    """Lease up to ``n`` jobs through :meth:`Lanes.pick` (groups and their limits, or a
    listing to keep); a job whose TTL ran out is parked instead."""
    lanes, jobs, limits = q.lanes, shard.jobs, q.limits
    blocked: set[str] = set()
    now_s = now / 1000
    recs: list[Rec] = []
    while len(recs) < n:
        jid = lanes.pick(jobs, limits, now_s, blocked)
        if jid is None:
            break
        rec = jobs[jid]
        expire_at = rec.expire_at
        if expire_at is not None and expire_at <= now:
            q.park(rec)
            continue
        shard.to_active(q, rec, now, token, until, owner)
        recs.append(rec)
    return recs


def wait(core: Core, queue: str, timeout_ms: int) -> bool:
    """Block up to ``timeout_ms`` until ``queue`` may have a leasable job.

    Wakes on an add, a retry, a promotion, a resume or a freed slot (no
    polling); the wait is capped at the shard's next delayed run time and at
    the rate bucket's refill. Returns True when woken (a hint: may be early),
    False on timeout.
    """
    shard = core.route(queue)
    with shard.lock:
        now = core.clock()
        shard.promote(now)
        q = shard.queue(queue)
        timeout = max(timeout_ms, 0) / 1000
        if not q.paused and q.n_waiting > len(q.parked) and q.stuck != q.version:
            limits = q.limits
            if limits is None or (
                    not (limits.concurrency and q.n_active >= limits.concurrency)):  # fmt: skip
                if q.bucket is None:
                    return True
                refill = q.bucket.time_until(now / 1000, 1)
                if refill <= 0:
                    return True
                timeout = min(timeout, refill)
        if q.stuck == q.version and q.limits is not None and q.limits.group_rate_max:
            timeout = min(timeout, max(q.limits.group_rate_duration, 1) / 1000)
        if shard.next_due < math.inf:
            timeout = min(timeout, max((shard.next_due - now) / 1000, 0.001))
        if timeout <= 0:
            return False
        cond = q.condition(shard.lock)
        q.nwait += 1
        try:
            woke = cond.wait(timeout)
        finally:
            q.nwait -= 1
        return woke or shard.next_due <= core.clock()
