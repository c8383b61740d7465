"""Per-job operations on the wire, with bunqueue 2.9.5's names and result shapes.

``Cancel`` (remove a job that is not active, or ask an active one to stop), ``Update``,
``ChangePriority``,
``ChangeDelay``, ``Promote``, ``PromoteJobs``, ``Discard``, ``RetryCompleted``,
``MoveToDelayed``, ``MoveToWait``, ``ClearLogs``, ``GetJobByCustomId``, ``GetCountsPerPriority``,
``GetDeduplicationJobId``, ``RemoveDeduplicationKey``,
``RemoveJobDeduplicationKey``, and bunq's ``BqRetryJob`` (a failed or
completed job back to waiting: what :meth:`bunq.Queue.retry` sends). Each maps
onto one :mod:`bunq.backends.jobops` operation; a refusal is a typed error
(``job_state``, ``job_not_found``, ``unsupported``) whose message names the
job's state, as bunqueue's do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...backends.base import Backend, Capability, require
from ...errors import JobNotFound, JobStateError
from ...execution.context import request_cancel
from ...job import FailureReason, JobState, Lease, Settle
from ...jobrules import MAX_PROMOTE
from ...policy import FailDecision
from ...protocol import Prepared
from ...wire_shapes import job_to_wire
from ..context import ServerContext, Session
from ..fields import as_int, as_str, opt_int
from ..wire import queue_of
from . import command

MAX_DELAY = 100 * 365 * 86_400_000


def _id(msg: Mapping[str, Any], name: str = "id") -> str:
    return as_str(msg.get(name), name, 1024)


def _ops(backend: Backend) -> Any:
    require(backend, Capability.JOB_OPS)
    return backend


def _on_job(backend: Backend, job_id: str, fn: Callable[..., Any], *args: Any) -> str | None:
    """Run ``fn(job_id, *args)``; return the job's queue afterwards (None once it is gone)."""
    fn(job_id, *args)
    job = backend.get_job(job_id)
    return None if job is None else job.queue


async def _apply(ctx: ServerContext, name: str, job_id: str, *args: Any) -> dict[str, Any]:
    """Apply operation ``name``; wake the job's queue (it may have become leasable)."""
    fn = getattr(_ops(ctx.backend), name)
    queue = await ctx.run(_on_job, ctx.backend, job_id, fn, *args)
    if queue is not None:
        ctx.waiters.notify((queue,))
    return {}


@command("Cancel")
async def cancel(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id}``: remove a job that is not active (bunqueue's Queue.remove; a ``removed``
    event names the state it left); an active job is asked to stop: its bunq worker sees
    the request (``ctx.cancelled``) and settles it as cancelled (docs/events.md).
    ``removeOnly: true`` (bunq's ``remove_job``) refuses an active job (``job_state``)."""
    job_id = _id(msg)
    ops = _ops(ctx.backend)
    job = await ctx.run(ctx.backend.get_job, job_id)
    only = msg.get("removeOnly") is True
    if job is not None and job.state is JobState.ACTIVE and not only:
        await ctx.run(request_cancel, ctx.backend, job)
        return {}
    try:
        removed = await ctx.run(ops.remove_job, job_id)
    except JobStateError:  # active (or leased meanwhile)
        job = await ctx.run(ctx.backend.get_job, job_id)
        if only or job is None or job.state is not JobState.ACTIVE:
            raise
        await ctx.run(request_cancel, ctx.backend, job)
        return {}
    if not removed:
        raise JobNotFound(f"Job not found or cannot be cancelled: {job_id}", job_id=job_id)
    if job is not None:
        ctx.events.removed(job.queue, (job_id,), job.state.value)
    return {}


@command("Update")
async def update(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, data}``: replace the data of a job that has not finished."""
    return await _apply(ctx, "update_data", _id(msg), msg.get("data"))


@command("ChangePriority")
async def change_priority(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, priority}`` (``lifo`` is not changed by bunq)."""
    priority = as_int(msg.get("priority"), "priority", -(2**31), 2**31 - 1)
    return await _apply(ctx, "change_priority", _id(msg), priority)


@command("ChangeDelay")
async def change_delay(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, delay}``: a waiting or delayed job becomes due ``delay`` ms from now."""
    return await _apply(ctx, "change_delay", _id(msg), as_int(msg.get("delay"), "delay", 0,
                                                                MAX_DELAY))  # fmt: skip


@command("Promote")
async def promote(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id}``: a delayed job becomes due now."""
    return await _apply(ctx, "promote_job", _id(msg))


@command("PromoteJobs")
async def promote_jobs(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, count?}`` -> ``{count}``: delayed jobs made due, earliest first."""
    queue = queue_of(msg)
    count = opt_int(msg, "count", MAX_PROMOTE, 0, MAX_PROMOTE)
    n = await ctx.run(_ops(ctx.backend).promote_jobs, queue, count)
    if n:
        ctx.waiters.notify((queue,))
    return {"count": n}


@command("Discard")
async def discard(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id}``: a waiting, delayed or active job goes to the DLQ now."""
    return await _apply(ctx, "discard_job", _id(msg))


@command("BqRetryJob")
async def retry_job(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id}``: a failed or completed job goes back to waiting with fresh attempts."""
    return await _apply(ctx, "retry_job", _id(msg))


def _retry_completed(backend: Backend, queue: str, job_id: str | None, count: int,
                     before: int | None) -> int:  # fmt: skip
    ops = _ops(backend)
    if job_id is not None:
        job = backend.get_job(job_id)
        if job is None or job.queue != queue or job.state is not JobState.COMPLETED:
            return 0
        ops.retry_job(job_id)
        return 1
    done = backend.get_jobs(queue, JobState.COMPLETED, 0, count)
    picked = [j for j in done if before is None or (j.finished_at or 0) <= before]
    for job in picked:
        ops.retry_job(job.id)
    return len(picked)


@command("RetryCompleted")
async def retry_completed(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, id?, count?, timestamp?}`` -> ``{count}``: completed jobs run again."""
    queue = queue_of(msg)
    job_id = None if msg.get("id") is None else _id(msg)
    count = opt_int(msg, "count", MAX_PROMOTE, 0, MAX_PROMOTE)
    before = None if msg.get("timestamp") is None else as_int(msg["timestamp"], "timestamp")
    n = await ctx.run(_retry_completed, ctx.backend, queue, job_id, count, before)
    if n:
        ctx.waiters.notify((queue,))
    return {"count": n}


async def _give_back(ctx: ServerContext, msg: Mapping[str, Any], job_id: str,
                     delay: int) -> Settle:  # fmt: skip
    """Give an active job back under its lease, due in ``delay`` ms (its attempt kept)."""
    lease: Lease = await ctx.resolve(job_id, msg.get("token"))
    run_at = await ctx.run(ctx.backend.clock) + delay
    decision = FailDecision("delay", run_at, FailureReason.UNKNOWN)
    settled: Settle = await ctx.run(ctx.backend.fail, lease, None, decision)
    ctx.leases.forget(lease)
    if settled is Settle.OK:
        ctx.waiters.notify((lease.job.queue,))
    return settled


async def _state(ctx: ServerContext, job_id: str) -> JobState:
    job = await ctx.run(ctx.backend.get_job, job_id)
    if job is None:
        raise JobNotFound(f"Job not found: {job_id}", job_id=job_id)
    return job.state


@command("MoveToDelayed")
async def move_to_delayed(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, delay, token?}``: an active job goes back, due ``delay`` ms from now."""
    job_id = _id(msg)
    delay = as_int(msg.get("delay"), "delay", 0, MAX_DELAY)
    state = await _state(ctx, job_id)
    if state is not JobState.ACTIVE:
        raise JobStateError(job_id, state.value, "move to delayed",
                            f"Job is not active (current state: {state.value})")  # fmt: skip
    if await _give_back(ctx, msg, job_id, delay) is not Settle.OK:
        raise JobStateError(job_id, "unknown", "move to delayed", "Job is not active")
    return {}


@command("MoveToWait")
async def move_to_wait(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, token?}``: active -> waiting (attempt kept), delayed -> promoted,
    failed -> retried from the DLQ, waiting -> nothing to do."""
    job_id = _id(msg)
    state = await _state(ctx, job_id)
    if state is JobState.ACTIVE:
        if await _give_back(ctx, msg, job_id, 0) is not Settle.OK:
            raise JobStateError(job_id, "unknown", "move to wait", "Job not found or not active")
        return {}
    if state is JobState.DELAYED:
        return await _apply(ctx, "promote_job", job_id)
    if state is JobState.FAILED:
        return await _apply(ctx, "retry_job", job_id)
    if state is JobState.WAITING:
        return {}
    raise JobStateError(job_id, state.value, "move to wait",
                        f"Cannot move job from state '{state.value}' to waiting")  # fmt: skip


@command("MoveToWaitingChildren")
async def to_children(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, token?}``: bunqueue moves an active job with unfinished children to
    waiting-children, and answers "not moved" when it has none. In bunq a job's
    dependencies are fixed when it is added and an active job's are all done, so
    the answer is always "not moved" (after the token is checked)."""
    job_id = _id(msg)
    state = await _state(ctx, job_id)
    if state is JobState.ACTIVE:
        await ctx.resolve(job_id, msg.get("token"))
    raise JobStateError(job_id, state.value, "move to waiting-children",
                        "Job has no pending dependencies (bunq fixes them when a job is added)"
                        if state is JobState.ACTIVE else "Job is not active")  # fmt: skip


@command("ClearLogs")
async def clear_logs(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, keepLogs?}``: drop a job's log lines but the newest ``keepLogs``."""
    keep = opt_int(msg, "keepLogs", 0, 0, 1 << 31)
    await ctx.run(_ops(ctx.backend).clear_logs, _id(msg), keep)
    return {}


@command("GetJobByCustomId")
async def by_custom_id(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{customId}`` -> ``{job}``: a custom id is the job's id in bunq."""
    custom = _id(msg, "customId")
    job = await ctx.run(ctx.backend.get_job, custom)
    if job is None:
        raise JobNotFound(f"Job not found: {custom}", job_id=custom)
    return Prepared(job=job_to_wire(job, job.state.value, with_result=True))


@command("GetCountsPerPriority")
async def per_priority(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue}`` -> ``{queue, counts: {"<priority>": n}}`` over waiting and delayed jobs."""
    queue = queue_of(msg)
    counts = await ctx.run(_ops(ctx.backend).counts_per_priority, queue)
    return {"queue": queue, "counts": {str(p): n for p, n in sorted(counts.items())}}


def _dedup_key(msg: Mapping[str, Any]) -> str:
    return as_str(msg.get("deduplicationId"), "deduplicationId", 1024)


@command("GetDeduplicationJobId")
async def get_dedup(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, deduplicationId}`` -> ``{data: {jobId}}`` (null when the key is free)."""
    job_id = await ctx.run(_ops(ctx.backend).dedup_job_id, queue_of(msg), _dedup_key(msg))
    return {"data": {"jobId": job_id}}


@command("RemoveDeduplicationKey")
async def remove_dedup(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, deduplicationId}`` -> ``{data: {count}}`` (0 or 1 keys released)."""
    held = await ctx.run(_ops(ctx.backend).remove_dedup_key, queue_of(msg), _dedup_key(msg))
    return {"data": {"count": int(held)}}


def _remove_job_key(backend: Backend, job_id: str) -> bool:
    ops = _ops(backend)
    job = backend.get_job(job_id)
    key = None if job is None else job.opts.unique_key
    if job is None or key is None or ops.dedup_job_id(job.queue, key) != job_id:
        return False
    return bool(ops.remove_dedup_key(job.queue, key))


@command("RemoveJobDeduplicationKey")
async def job_dedup(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id}`` -> ``{data: {removed}}``: release the key the job holds, if it still does."""
    return {"data": {"removed": await ctx.run(_remove_job_key, ctx.backend, _id(msg))}}
