"""Per-job operations on the memory engine (see :mod:`bunq.backends.jobops`).

Each one finds the job's shard, takes its lock and moves the record with the
shard's transition methods (``leave_waiting``/``to_waiting``, ``forget``,
``leave_active``/``to_failed``), so the per-queue counters stay exact. Cost:
one record and its heap entries, O(log n); ``promote_jobs`` reads the
shard's records of the queue (as ``get_jobs`` does): the delayed heap is
shared by the shard's queues.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..codec import pack
from ..errors import JobNotFound
from ..job import Attempt, FailureReason, JobId, JobState, check_options
from ..jobrules import (
    DISCARDABLE,
    DISCARDED,
    PENDING,
    REMOVABLE,
    REPRIORITISABLE,
    RETRYABLE,
    UPDATABLE,
    check_count,
    check_delay,
    check_keep,
    check_key,
    check_priority,
    expect,
)
from .core import Core
from .dlq import revive
from .flowfail import settle_flows
from .record import ACTIVE, FAILED, WAITING, Rec
from .shard import Shard

_MISSING = object()


def _state(rec: Rec, now: int) -> JobState:
    """The public state of ``rec`` (delayed derived from ``run_at``)."""
    if rec.state is WAITING and rec.run_at > now:
        return JobState.DELAYED
    return rec.state


def _on(core: Core, job_id: JobId, fn: Any) -> Any:
    """Run ``fn(shard, rec, now)`` under the job's shard lock; JobNotFound if absent."""
    out = core.locked(job_id, lambda shard, rec: fn(shard, rec, core.clock()), _MISSING)
    if out is _MISSING:
        raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
    if core.store is not None:
        core.store.kick()
    return out


def remove_job(core: Core, job_id: JobId) -> bool:
    """Remove a job in any state but active; False when there is no such job."""

    def op(shard: Shard, rec: Rec, now: int) -> bool:
        expect(job_id, _state(rec, now), REMOVABLE, "remove")
        shard.forget(shard.queues[rec.queue], rec)
        return True

    try:
        return bool(_on(core, job_id, op))
    except JobNotFound:
        return False


def retry_job(core: Core, job_id: JobId) -> None:
    """Move a failed or completed job back to waiting with fresh attempts."""

    def op(shard: Shard, rec: Rec, now: int) -> None:
        expect(job_id, _state(rec, now), RETRYABLE, "retry")
        q = shard.queues[rec.queue]
        if rec.state is FAILED:
            revive(shard, q, rec, now, auto=False)
            return
        shard.displace(q, rec)
        with core.xlock:
            core.results.pop(rec.id)
        rec.attempts = rec.stalls = 0
        rec.finished_at = rec.started_at = None
        rec.run_at = now
        shard.to_waiting(q, rec, now)

    _on(core, job_id, op)


def _rewrite(rec: Rec) -> None:
    """Have the write-behind store rewrite the whole row (its data or options changed):
    a saved row is otherwise updated in its mutable fields only."""
    rec.saved = False


def _requeue(shard: Shard, rec: Rec, now: int, **changes: Any) -> None:
    """Take a waiting/delayed ``rec`` out, apply ``changes``, put it back."""
    q = shard.queues[rec.queue]
    shard.leave_waiting(q, rec)
    for name, value in changes.items():
        setattr(rec, name, value)
    shard.to_waiting(q, rec, now)


def promote_job(core: Core, job_id: JobId) -> None:
    """Make a delayed job due now."""

    def op(shard: Shard, rec: Rec, now: int) -> None:
        expect(job_id, _state(rec, now), frozenset((JobState.DELAYED,)), "promote")
        _requeue(shard, rec, now, run_at=now)

    _on(core, job_id, op)


def promote_jobs(core: Core, queue: str, count: int) -> int:
    """Make up to ``count`` delayed jobs of ``queue`` due now, earliest first."""
    count = check_count(count)
    shard = core.route(queue)
    with shard.lock:
        now = core.clock()
        if queue not in shard.queues or count == 0:
            return 0
        due = sorted((r for r in shard.jobs.values()
                      if r.queue == queue and r.state is WAITING and r.run_at > now),
                     key=lambda r: (r.run_at, r.seq))[:count]  # fmt: skip
        for rec in due:
            _requeue(shard, rec, now, run_at=now)
    if due and core.store is not None:
        core.store.kick()
    return len(due)


def change_priority(core: Core, job_id: JobId, priority: int) -> None:
    """Give a waiting, delayed or waiting-children job a new priority."""
    priority = check_priority(priority)

    def op(shard: Shard, rec: Rec, now: int) -> None:
        expect(job_id, _state(rec, now), REPRIORITISABLE, "change the priority of")
        opts = check_options(replace(rec.opts, priority=priority))
        lanes = shard.queues[rec.queue].lanes
        ready = rec.state is WAITING and lanes.discard(rec)  # delayed: the heap is by time
        rec.priority, rec.opts = priority, opts
        if ready:  # back into its lane with its entry number: its place among equals
            lanes.push(rec, rec.eseq)
        _rewrite(rec)
        shard.touch(rec)

    _on(core, job_id, op)


def change_delay(core: Core, job_id: JobId, delay: int) -> None:
    """Make a waiting or delayed job due ``delay`` ms from now."""
    delay = check_delay(delay)

    def op(shard: Shard, rec: Rec, now: int) -> None:
        expect(job_id, _state(rec, now), PENDING, "change the delay of")
        _requeue(shard, rec, now, run_at=now + delay)

    _on(core, job_id, op)


def update_data(core: Core, job_id: JobId, data: Any) -> None:
    """Replace the payload of a job that has not finished."""
    blob = pack(data, "data", core.max_payload)

    def op(shard: Shard, rec: Rec, now: int) -> None:
        expect(job_id, _state(rec, now), UPDATABLE, "update")
        rec.data = blob
        _rewrite(rec)
        shard.touch(rec)

    _on(core, job_id, op)


def discard_job(core: Core, job_id: JobId) -> None:
    """Move a waiting, delayed or active job into the DLQ now (no more attempts)."""

    def op(shard: Shard, rec: Rec, now: int) -> None:
        expect(job_id, _state(rec, now), DISCARDABLE, "discard")
        q = shard.queues[rec.queue]
        if rec.state is ACTIVE:
            shard.leave_active(q, rec)
            rec.add_attempt(Attempt(rec.attempts, DISCARDED, 0, now,
                                    FailureReason.EXPLICIT_FAIL))  # fmt: skip
        else:
            shard.leave_waiting(q, rec)
        rec.error, rec.reason = DISCARDED, FailureReason.EXPLICIT_FAIL
        shard.to_failed(q, rec, now)
        shard.drop_unique(rec, held_only=True)

    _on(core, job_id, op)
    settle_flows(core)


def clear_logs(core: Core, job_id: JobId, keep: int = 0) -> None:
    """Drop a job's log lines but the newest ``keep``."""
    keep = check_keep(keep)

    def op(shard: Shard, rec: Rec, now: int) -> None:
        with core.xlock:
            lines = core.logs.peek(job_id)
            if lines:
                del lines[: max(len(lines) - keep, 0)]

    _on(core, job_id, op)


def counts_per_priority(core: Core, queue: str) -> dict[int, int]:
    """Count the waiting and delayed jobs of ``queue`` per priority (reads the shard's jobs)."""
    shard = core.route(queue)
    out: dict[int, int] = {}
    with shard.lock:
        if queue not in shard.queues:
            return out
        for rec in shard.jobs.values():
            if rec.queue == queue and rec.state is WAITING:
                out[rec.priority] = out.get(rec.priority, 0) + 1
    return out


def dedup_job_id(core: Core, queue: str, key: str) -> JobId | None:
    """Return the id of the job holding unique key ``key`` of ``queue``, or None."""
    key = check_key(key)
    shard = core.route(queue)
    with shard.lock:
        entry = shard.unique.get((queue, key))
        if entry is None:
            return None
        until = entry[1]
        if until is not None and until <= core.clock():  # type: ignore[operator]
            return None
        return str(entry[0])


def remove_dedup_key(core: Core, queue: str, key: str) -> bool:
    """Release unique key ``key`` of ``queue``; return whether it was held."""
    key = check_key(key)
    shard = core.route(queue)
    with shard.lock:
        held = (queue, key) in shard.unique
        shard.del_unique((queue, key))
    return held
