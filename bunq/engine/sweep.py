"""Maintenance: expired leases (two-phase stall detection), TTLs, DLQ, retention.

``sweep`` visits every shard under its lock once: it promotes due delayed
jobs, recovers expired leases through :func:`bunq.policy.decide_stall`,
dead-letters jobs whose TTL ran out, expires unique keys, runs DLQ
maintenance, drops completed jobs past ``completed_max_age`` and forgets idle
queues. It is idempotent.

Two-phase stall detection (``phases=2``, what the maintenance thread runs):
a pass only *marks* an active job whose lease expired as a candidate,
remembering its fence; the next pass acts on it if it is still active under
the same fence and still expired. A worker that was merely paused (GC, a
network hiccup) and extends in between keeps its job. An explicit ``sweep()``
call (``phases=1``) acts at once, as the Backend contract asks.
"""

from __future__ import annotations

import threading

from ..job import Attempt, FailureReason
from ..policy import decide_stall
from ..values import SweepResult
from .core import Core
from .dlq import maintain
from .flowfail import settle_flows
from .record import WAITING, Rec
from .shard import Shard

STALLED = FailureReason.STALLED
TTL_EXPIRED = FailureReason.TTL_EXPIRED


def sweep(core: Core, phases: int = 1) -> SweepResult:
    """Run one maintenance pass over every shard; return what it did."""
    requeued = dead = expired = retried = dropped = 0
    for shard in core.shards:
        with shard.lock:
            now = core.clock()
            shard.promote(now)
            r, d = stalls(core, shard, now, phases)
            requeued += r
            dead += d
            expired += ttl(shard, now)
            for key, _ in shard.unique_ttl.pop_due(now - 1):  # until < now, as SQL
                shard.del_unique(key)
            for q in list(shard.queues.values()):
                r, d = maintain(shard, q, now)
                retried += r
                dropped += d
            retention(shard, now)
            cleanup(shard, now)
    settle_flows(core)
    return SweepResult(requeued, dead, expired, retried, dropped)


def stalls(core: Core, shard: Shard, now: int, phases: int) -> tuple[int, int]:
    """Recover active jobs whose lease expired; return (requeued, dead)."""
    expired = [rec for rec in shard.active.values() if rec.lease_until < now]
    if phases >= 2:
        seen = shard.candidates
        act = [r for r in expired if seen.get(r.id) == (r.token, r.attempts)]
        acted = {r.id for r in act}
        shard.candidates = {r.id: (r.token, r.attempts) for r in expired if r.id not in acted}
    else:
        act = expired
        shard.candidates = {}
    requeued = dead = 0
    for rec in act:
        q = shard.queues[rec.queue]
        started = rec.started_at if rec.started_at is not None else now
        shard.leave_active(q, rec)
        rec.stalls += 1
        rec.error = "lease expired"
        rec.reason = STALLED
        rec.add_attempt(Attempt(rec.attempts, "lease expired", max(now - started, 0), now, STALLED))
        if decide_stall(rec.attempts, rec.opts.attempts, rec.stalls, core.max_stalls):
            shard.to_failed(q, rec, now)
            shard.drop_unique(rec, held_only=True)
            dead += 1
        else:
            rec.run_at = now
            shard.to_waiting(q, rec, now)
            requeued += 1
    return requeued, dead


def ttl(shard: Shard, now: int) -> int:
    """Dead-letter waiting jobs whose TTL ran out (reason ttl_expired); return how many."""
    count = 0
    for jid, _ in shard.ttl.pop_due(now):
        rec = shard.jobs.get(jid)
        if rec is None or rec.state is not WAITING or rec.expire_at is None:
            continue
        if rec.expire_at > now:
            continue
        expire(shard, rec, now)
        count += 1
    return count


def expire(shard: Shard, rec: Rec, now: int) -> None:
    """Move a waiting ``rec`` to the DLQ as ttl_expired."""
    q = shard.queues[rec.queue]
    shard.leave_waiting(q, rec)
    rec.error = "not started within its ttl"
    rec.reason = TTL_EXPIRED
    shard.to_failed(q, rec, now)
    shard.drop_unique(rec, held_only=True)


def retention(shard: Shard, now: int) -> None:
    """Drop completed jobs finished more than ``completed_max_age`` ago (oldest first)."""
    before = now - shard.config.completed_max_age - 1  # finished before the age limit
    for q in list(shard.queues.values()):
        if q.completed:
            for rec in q.completed.until(before):
                shard.forget(q, rec)
                q.completed_dropped += 1


def cleanup(shard: Shard, now: int) -> None:
    """Forget idle queues and idle per-group state (keeps memory bounded)."""
    shard.drop_idle_queues()
    now_s = now / 1000
    for q in shard.queues.values():
        q.lanes.trim(now_s)


class Maintenance:
    """A daemon thread that sweeps every ``interval_ms`` until stopped.

    Uses the engine's ``stall_phases`` (two-phase by default). Sleeping is an
    ``Event.wait``, so ``stop()`` returns at once.
    """

    def __init__(self, core: Core, interval_ms: int) -> None:
        self.core = core
        self.interval = max(interval_ms, 1) / 1000
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bunq-engine-sweep", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                sweep(self.core, self.core.config.stall_phases)
            except Exception:  # a failed pass must not end maintenance
                self.errors += 1

    def stop(self) -> None:
        """Stop the thread and wait for it to finish its current pass."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
