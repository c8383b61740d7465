"""Reading jobs: GetJob, GetState, GetResult, GetJobs, counts, progress and logs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...backends.base import Backend
from ...errors import JobNotFound, ValidationError
from ...job import Job, JobState
from ...protocol import Prepared
from ...wire_shapes import job_to_wire
from ..context import BIG_LIST, ServerContext, Session
from ..fields import as_int, as_str, opt_int
from ..wire import counts_to_wire, queue_of, state_of
from . import command

MAX_LIST = 1000
_PENDING = (JobState.WAITING, JobState.DELAYED, JobState.PAUSED)


def _job_and_state(backend: Backend, job_id: str) -> tuple[Job | None, str]:
    job = backend.get_job(job_id)
    if job is None:
        return None, "unknown"
    if job.state is JobState.WAITING and backend.is_paused(job.queue):
        return job, JobState.PAUSED.value
    return job, job.state.value


def _id(msg: Mapping[str, Any]) -> str:
    return as_str(msg.get("id"), "id", 1024)


@command("GetJob")
async def get_job(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id}`` -> ``{job}`` with ``state``, ``returnvalue``, ``failedReason``.

    A missing job answers ``ok: false`` with 'Job not found' (clients map it to null).
    """
    job_id = _id(msg)
    job, state = await ctx.run(_job_and_state, ctx.backend, job_id)
    if job is None:
        raise JobNotFound(f"Job not found: {job_id}", job_id=job_id)
    return Prepared(job=job_to_wire(job, state, with_result=True))


@command("GetState")
async def get_state(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id}`` -> ``{id, state}``; ``unknown`` for a missing job (as bunqueue)."""
    job_id = _id(msg)
    _, state = await ctx.run(_job_and_state, ctx.backend, job_id)
    return {"id": job_id, "state": state}


@command("GetResult")
async def get_result(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id}`` -> ``{id, result}``; ``result`` is absent unless the job completed."""
    job_id = _id(msg)
    job = await ctx.run(ctx.backend.get_job, job_id)
    if job is not None and job.state is JobState.COMPLETED:
        return {"id": job_id, "result": job.result}
    return {"id": job_id}


def _list(
    backend: Backend, queue: str, states: list[JobState], offset: int, limit: int
) -> list[dict[str, Any]]:
    jobs: list[Any] = []
    for st in states:
        jobs += [
            job_to_wire(j, st.value, with_result=True)
            for j in backend.get_jobs(queue, st, 0, offset + limit)
        ]
        if len(jobs) >= offset + limit:
            break
    return jobs[offset : offset + limit]


@command("GetJobs")
async def get_jobs(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, state (name or list), offset, limit}`` -> ``{jobs}`` (``asc`` is not honoured)."""
    queue = queue_of(msg)
    raw = msg.get("state")
    states: list[JobState]
    if raw is None:
        states = [st for st in JobState if st is not JobState.PAUSED]
    elif isinstance(raw, list):
        states = list(dict.fromkeys(state_of(v) for v in raw[:16]))
    else:
        states = [state_of(raw)]
    offset = opt_int(msg, "offset", 0, 0, 10**9)
    limit = opt_int(msg, "limit", 100, 0, MAX_LIST)
    if limit <= BIG_LIST:
        return Prepared(jobs=await ctx.run(_list, ctx.backend, queue, states, offset, limit))
    return {"jobs": await ctx.long_read(s, _list, ctx.backend, queue, states, offset, limit)}


@command("GetJobCounts")
async def get_job_counts(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue}`` -> ``{counts: {waiting, prioritized, delayed, active, completed, ...}}``.

    ``completed`` counts every completed job not removed, as bunqueue does: those the
    backend's retention bounds dropped too (``completed_retired``: memory, SQL, Redis).
    """
    counts = await ctx.run(_wire_counts, ctx.backend, queue_of(msg))
    return {"counts": counts_to_wire(counts)}


def _wire_counts(backend: Backend, queue: str) -> dict[JobState, int]:
    counts = backend.counts(queue)
    retired = getattr(backend, "completed_retired", None)  # not on SQS, bunq://
    if retired is not None:
        counts[JobState.COMPLETED] = counts.get(JobState.COMPLETED, 0) + retired(queue)
    return counts


@command("Count")
async def count(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue}`` -> ``{count}``: jobs waiting to run (waiting, delayed, paused)."""
    counts = await ctx.run(ctx.backend.counts, queue_of(msg))
    return {"count": sum(counts.get(st, 0) for st in _PENDING)}


@command("Progress")
async def progress(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, progress, message?}``: 0..100 (bunq accepts it in any state)."""
    value = as_int(msg.get("progress"), "progress", 0, 100)
    job_id = _id(msg)
    await ctx.run(ctx.backend.update_progress, job_id, value)
    if ctx.events.active:  # the event names the job's queue: a lookup only for listeners
        job = ctx.leases.job(job_id) or await ctx.run(ctx.backend.get_job, job_id)
        if job is not None:
            message = msg.get("message")
            text = message[:4096] if isinstance(message, str) else None
            ctx.events.progress(job.queue, job_id, value, text)
    return {}


@command("GetProgress")
async def get_progress(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    job_id = _id(msg)
    job = await ctx.run(ctx.backend.get_job, job_id)
    if job is None:
        raise JobNotFound(f"Job not found: {job_id}", job_id=job_id)
    return {"progress": job.progress, "message": None}


@command("AddLog")
async def add_log(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, message}`` -> ``{data: {added: true}}``."""
    line = msg.get("message")
    if not isinstance(line, str) or len(line) > 65_536:
        raise ValidationError("message must be a string of at most 64 KiB", field="message")
    await ctx.run(ctx.backend.add_log, _id(msg), line)
    return {"data": {"added": True}}


@command("GetLogs")
async def get_logs(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, start?, end?}`` -> ``{data: {logs: [{message, level}], count}}``."""
    lines: list[str] = await ctx.run(ctx.backend.get_logs, _id(msg))
    total = len(lines)
    if msg.get("start") is not None or msg.get("end") is not None:
        start = opt_int(msg, "start", 0, 0, 10**9)
        end = opt_int(msg, "end", total - 1, -1, 10**9)
        lines = lines[start : end + 1]
    return {"data": {"logs": [{"message": ln, "level": "info"} for ln in lines], "count": total}}
