"""The dead-letter queue of each queue: list, retry, purge, remove, settings.

Entries are the jobs themselves in state ``failed``, kept per queue in DLQ
order (oldest first) and bounded by the queue's ``DlqConfig.max_entries``:
the oldest entry is dropped the moment the bound is passed, and the next
sweep reports it in ``dlq_dropped``.
"""

from __future__ import annotations

from ..job import DlqEntry, FailureReason, JobId
from ..queueconfig import DlqConfig
from ..validate import page
from .core import Core
from .qstate import QueueState
from .query import MAX_PAGE
from .record import Rec, snapshot
from .shard import Shard

TTL_EXPIRED = FailureReason.TTL_EXPIRED


def revive(shard: Shard, q: QueueState, rec: Rec, now: int, auto: bool) -> None:
    """Move a DLQ entry back to waiting with fresh attempts and stalls."""
    shard.displace(q, rec)
    rec.attempts = 0
    rec.stalls = 0
    rec.finished_at = None
    rec.dlq_at = None
    rec.dlq_retries += int(auto)
    rec.run_at = now
    shard.to_waiting(q, rec, now)


def dlq_list(core: Core, queue: str, limit: int = 100, offset: int = 0) -> list[DlqEntry]:
    """Return entries newest first, each with reason, last error and attempt history."""
    shard = core.route(queue)
    offset, limit = page(offset, limit)
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None:
            return []
        now = core.clock()
        out = []
        for rec in q.dlq.newest(offset, min(limit, MAX_PAGE)):
            job = snapshot(rec, now, history=True)
            out.append(DlqEntry(job, rec.reason or FailureReason.UNKNOWN, rec.error,
                                job.history, rec.dlq_at or 0, rec.dlq_retries))  # fmt: skip
    return out


def dlq_retry(core: Core, queue: str, job_id: JobId | None = None) -> int:
    """Move one entry (or all) back to waiting; return how many moved."""
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None:
            return 0
        now = core.clock()
        if job_id is None:
            recs = list(q.dlq)
        else:
            one = q.dlq.get(job_id)
            recs = [] if one is None else [one]
        for rec in recs:
            revive(shard, q, rec, now, auto=False)
    return len(recs)


def dlq_purge(core: Core, queue: str) -> int:
    """Remove every entry of ``queue``; return how many."""
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None:
            return 0
        recs = list(q.dlq)
        for rec in recs:
            shard.forget(q, rec)
    return len(recs)


def dlq_size(core: Core, queue: str) -> int:
    """Return the number of entries of ``queue``."""
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        return 0 if q is None else len(q.dlq)


def dlq_remove(core: Core, queue: str, job_id: JobId) -> bool:
    """Remove one entry; return whether it was there."""
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        rec = None if q is None else q.dlq.get(job_id)
        if q is None or rec is None:
            return False
        shard.forget(q, rec)
    return True


def dlq_config(core: Core, queue: str, config: DlqConfig | None = None) -> DlqConfig:
    """Return the queue's DLQ settings, replacing them first when ``config`` is given."""
    shard = core.route(queue)
    with shard.lock:
        if config is None:
            q = shard.queues.get(queue)
            return DlqConfig() if q is None else q.dlq_config
        q = shard.queue(queue)
        q.dlq_config = config
        shard.touch_queue(q)
    return config


def maintain(shard: Shard, q: QueueState, now: int) -> tuple[int, int]:
    """Auto-retry due entries, drop old and excess ones; return (retried, dropped).

    Same rules as the SQL backends: an entry is retried once it has been in
    the DLQ ``auto_retry_interval`` ms, at most ``max_auto_retries`` times and
    never for ``ttl_expired``; entries older than ``max_age`` are dropped, then
    the oldest beyond ``max_entries``.
    """
    cfg = q.dlq_config
    dropped = q.take_evicted()
    retried = 0
    if not q.dlq:
        return retried, dropped
    if cfg.auto_retry:
        due = [r for r in q.dlq.until(now - cfg.auto_retry_interval)
               if r.dlq_retries < cfg.max_auto_retries and r.reason is not TTL_EXPIRED]  # fmt: skip
        for rec in due:
            revive(shard, q, rec, now, auto=True)
        retried = len(due)
    if cfg.max_age is not None:
        for rec in q.dlq.until(now - cfg.max_age - 1):  # older than max_age
            shard.forget(q, rec)
            dropped += 1
    while len(q.dlq) > max(cfg.max_entries, 0):
        shard.forget(q, q.dlq.oldest())
        dropped += 1
    return retried, dropped
