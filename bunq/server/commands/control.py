"""Queue control and the dead-letter queue: pause, drain, clean, limits, DLQ."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...backends.base import Backend, QueueLimits
from ...job import JobState
from ...jobevents import DRAINED, PAUSED, RESUMED
from ...stacks import split
from ...validate import MAX_DURATION_MS
from ...wire_shapes import job_to_wire
from ..context import ServerContext, Session
from ..fields import as_bool, as_int, as_str, opt_int
from ..wire import queue_of, state_of
from . import command


@command("Pause", "Resume")
async def pause(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    queue = queue_of(msg)
    if msg.get("cmd") == "Pause":
        await ctx.run(ctx.backend.pause, queue)
        ctx.events.queue_event(queue, PAUSED)
    else:
        await ctx.run(ctx.backend.resume, queue)
        ctx.waiters.notify((queue,))
        ctx.events.queue_event(queue, RESUMED)
    return {}


@command("IsPaused")
async def is_paused(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    return {"paused": await ctx.run(ctx.backend.is_paused, queue_of(msg))}


@command("Drain")
async def drain(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """Remove waiting and delayed jobs -> ``{count}`` (and a ``drained`` event)."""
    queue = queue_of(msg)
    count = await ctx.run(ctx.backend.drain, queue)
    ctx.events.queue_event(queue, DRAINED)
    return {"count": count}


def _obliterate(backend: Backend, queue: str, force: bool) -> None:
    if force:
        call: Any = backend.obliterate  # ``force`` is an extension some backends offer
        call(queue, force=True)
    else:
        backend.obliterate(queue)


@command("Obliterate")
async def obliterate(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """Remove a queue and its jobs, active ones too, as bunqueue does (their later
    ACK/FAIL answer as stale). ``force: false`` (bunq's own client) refuses instead
    while jobs are active: ``Queue.obliterate(force=False)``."""
    force = msg.get("force")
    await ctx.run(_obliterate, ctx.backend, queue_of(msg),
                  True if force is None else as_bool(force, "force"))  # fmt: skip
    return {}


@command("Clean")
async def clean(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, grace, limit, state}`` -> ``{count, ids}`` (state completed or failed)."""
    queue = queue_of(msg)
    grace = opt_int(msg, "grace", 0)
    limit = opt_int(msg, "limit", 1000, 0, 100_000)
    state = state_of(msg.get("state") or "completed")
    ids = await ctx.run(ctx.backend.clean, queue, grace, limit, state)
    ctx.events.removed(queue, ids, state.value)
    return {"count": len(ids), "ids": list(ids)}


@command("ListQueues")
async def list_queues(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    return {"queues": await ctx.run(ctx.backend.queues)}


def _set_limits(backend: Backend, queue: str, changes: dict[str, Any]) -> QueueLimits:
    limits_ = replace(backend.get_limits(queue), **changes)
    backend.set_limits(queue, limits_)
    return limits_


@command("RateLimit", "RateLimitClear", "SetConcurrency", "ClearConcurrency")
async def limits(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """Queue-wide limits: ``RateLimit {limit, duration, ttl?}``, ``SetConcurrency {limit}``.

    With ``ttl`` (ms) the rate limit lapses by itself after that long
    (:mod:`bunq.server.ratettl`).
    """
    cmd = msg.get("cmd")
    queue = queue_of(msg)
    changes: dict[str, Any]
    ttl = None
    if cmd == "RateLimit":
        changes = {
            "rate_max": as_int(msg.get("limit"), "limit", 1, 10**9),
            "rate_duration": opt_int(msg, "duration", 1000, 1, 86_400_000),
        }
        if msg.get("ttl") is not None:
            ttl = as_int(msg.get("ttl"), "ttl", 1, MAX_DURATION_MS)
    elif cmd == "SetConcurrency":
        changes = {"concurrency": as_int(msg.get("limit"), "limit", 1, 10**9)}
    elif cmd == "RateLimitClear":
        changes = {"rate_max": None}
    else:
        changes = {"concurrency": None}
    if "rate_max" in changes:  # validated: an earlier expiry no longer applies
        ctx.rate_expiry.cancel(queue)
    limits_ = await ctx.run(_set_limits, ctx.backend, queue, changes)
    if ttl is not None:
        ctx.rate_expiry.expire(ctx, queue, limits_, ttl)
    ctx.waiters.notify((queue,))
    return {}


def _dlq_entries(backend: Backend, queue: str, count: int) -> list[dict[str, Any]]:
    out = []
    for e in backend.dlq_list(queue, count, 0):
        out.append(
            {
                "job": job_to_wire(e.job, JobState.FAILED.value, with_result=True),
                "reason": e.reason.value,
                "error": split(e.error)[0],
                "enteredAt": float(e.entered_at),
                "attempts": [a.to_dict() for a in e.history],
                "retryCount": e.auto_retries,
            }
        )
    return out


@command("Dlq")
async def dlq(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, count?}`` -> ``{jobs, entries}`` (newest first)."""
    count = opt_int(msg, "count", 100, 0, 10_000)
    entries = await ctx.run(_dlq_entries, ctx.backend, queue_of(msg), count)
    return {"jobs": [e["job"] for e in entries], "entries": entries}


def _retry_dlq(backend: Backend, queue: str, job_id: str | None, count: int | None) -> int:
    if job_id is not None or count is None:
        return backend.dlq_retry(queue, job_id)
    return sum(backend.dlq_retry(queue, e.job.id) for e in backend.dlq_list(queue, count, 0))


@command("RetryDlq")
async def retry_dlq(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, jobId?, count?}`` -> ``{count}``: back to waiting with fresh attempts."""
    queue = queue_of(msg)
    job_id = None if msg.get("jobId") is None else as_str(msg.get("jobId"), "jobId", 1024)
    count = None if msg.get("count") is None else as_int(msg.get("count"), "count", 0, 100_000)
    n = await ctx.run(_retry_dlq, ctx.backend, queue, job_id, count)
    ctx.waiters.notify((queue,))
    return {"count": n}


@command("PurgeDlq")
async def purge_dlq(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    return {"count": await ctx.run(ctx.backend.dlq_purge, queue_of(msg))}


@command("RemoveDlqJob")
async def remove_dlq_job(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    job_id = as_str(msg.get("jobId"), "jobId", 1024)
    removed = await ctx.run(ctx.backend.dlq_remove, queue_of(msg), job_id)
    return {"data": {"removed": removed}}


@command("GetDlqStats")
async def dlq_stats(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    return {"data": {"stats": {"total": await ctx.run(ctx.backend.dlq_size, queue_of(msg))}}}


def _limits_and_active(backend: Backend, queue: str) -> tuple[QueueLimits, int]:
    limits_ = backend.get_limits(queue)
    active = 0 if limits_.concurrency is None else backend.counts(queue).get(JobState.ACTIVE, 0)
    return limits_, active


@command("GetQueueLimits")
async def get_limits(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue}`` -> ``{data: {limits: {rateLimit: {max, duration} | null, rateLimitTtl,
    concurrencyLimit, maxed}}}`` (bunqueue's shape). ``rateLimitTtl``: ms until a
    ``RateLimit {ttl}`` lapses, 0 for a limit without one, -2 without a limit."""
    queue = queue_of(msg)
    limits_, active = await ctx.run(_limits_and_active, ctx.backend, queue)
    rate = None
    ttl = -2
    if limits_.rate_max is not None:
        rate = {"max": limits_.rate_max, "duration": limits_.rate_duration}
        ttl = ctx.rate_expiry.remaining_ms(queue) or 0
    cap = limits_.concurrency
    return {
        "data": {
            "limits": {
                "rateLimit": rate,
                "rateLimitTtl": ttl,
                "concurrencyLimit": cap,
                "maxed": cap is not None and active >= cap,
            }
        }
    }
