"""Per-queue settings, storage and dashboard reads: bunqueue's config and admin commands.

``GetDlqConfig``/``SetDlqConfig`` (bunq's :class:`~bunq.queueconfig.DlqConfig`
under bunqueue's camelCase names), ``GetStallConfig``/``SetStallConfig``
(:mod:`bunq.server.stallconfig`), ``StorageStatus``, ``CompactMemory``,
``TrimEvents`` and the ``Dashboard*`` reads. Answers carry bunqueue 2.9.5's
field names; what bunq has no counterpart for is answered as a no-op that says
so (``CompactMemory``, ``TrimEvents``: docs/protocol.md).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

from ...backends.base import Backend, DlqConfig
from ...errors import ValidationError
from ...job import JobState
from ..context import ServerContext, Session
from ..fields import as_bool, as_int, opt_int
from ..wire import queue_of
from . import command
from .cron import cron_to_wire
from .monitor import MAX_QUEUES_IN_STATS, per_queue, totals

DLQ_FIELDS = {  # bunqueue's name -> DlqConfig's
    "autoRetry": "auto_retry",
    "autoRetryInterval": "auto_retry_interval",
    "maxAutoRetries": "max_auto_retries",
    "maxAge": "max_age",
    "maxEntries": "max_entries",
}
JOBS_IN_DASHBOARD = 50


def _config_arg(msg: Mapping[str, Any], known: Mapping[str, str]) -> dict[str, Any]:
    raw = msg.get("config")
    if not isinstance(raw, Mapping):
        raise ValidationError("config must be a map", field="config")
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        raise ValidationError(f"unknown config fields: {', '.join(unknown)}", field="config")
    return {known[k]: v for k, v in raw.items()}


def dlq_to_wire(cfg: DlqConfig) -> dict[str, Any]:
    values = asdict(cfg)
    return {wire: values[ours] for wire, ours in DLQ_FIELDS.items()}


def _set_dlq(backend: Backend, queue: str, changes: dict[str, Any]) -> DlqConfig:
    return backend.dlq_config(queue, replace(backend.dlq_config(queue), **changes))


@command("GetDlqConfig")
async def get_dlq_config(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue}`` -> ``{config: {autoRetry, autoRetryInterval, maxAutoRetries, maxAge,
    maxEntries}}``."""
    return {"config": dlq_to_wire(await ctx.run(ctx.backend.dlq_config, queue_of(msg)))}


@command("SetDlqConfig")
async def set_dlq_config(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, config}``: the fields given change, the others keep their value; bounds
    are DlqConfig's (``config`` errors naming the field)."""
    changes = _config_arg(msg, DLQ_FIELDS)
    await ctx.run(_set_dlq, ctx.backend, queue_of(msg), changes)
    return {}


@command("GetStallConfig")
async def get_stall_config(
    ctx: ServerContext, msg: Mapping[str, Any], s: Session
) -> dict[str, Any]:
    """``{queue}`` -> ``{config: {enabled, stallInterval, maxStalls, gracePeriod}}``."""
    cfg = await ctx.stalls.get(ctx, queue_of(msg))
    return {"config": cfg.to_wire(ctx.config.default_lease_ms)}


@command("SetStallConfig")
async def set_stall_config(
    ctx: ServerContext, msg: Mapping[str, Any], s: Session
) -> dict[str, Any]:
    """``{queue, config}``: see :mod:`bunq.server.stallconfig` for what each field does."""
    queue = queue_of(msg)
    raw = msg.get("config")
    if not isinstance(raw, Mapping):
        raise ValidationError("config must be a map", field="config")
    await ctx.stalls.set(ctx, queue, raw)
    return {}


@command("StorageStatus")
async def storage_status(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{data: {diskFull, error, since}}``: bunq reports a write it cannot make as a typed
    error on the request that made it (``backend``, ``backend_unavailable``), so there is
    no sticky disk-full state to report: ``diskFull`` is false, ``error`` and ``since`` null."""
    return {"data": {"diskFull": False, "error": None, "since": None}}


@command("CompactMemory")
async def compact_memory(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """A no-op that succeeds: bunq's engine frees finished jobs' side tables when the jobs
    leave (removal, retention, clean), so there is nothing to compact on demand."""
    return {}


@command("TrimEvents")
async def trim_events(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, maxLength}`` -> ``{data: {removed: 0}}``: bunq's events are pushed to
    subscribers and not kept (there is no per-queue event stream to trim)."""
    queue_of(msg)
    if msg.get("maxLength") is not None:
        as_int(msg.get("maxLength"), "maxLength", 0, 2**53)
    return {"data": {"removed": 0}}


def _overview(ctx: ServerContext) -> dict[str, Any]:
    t = totals(ctx.backend)
    return {"waiting": t["waiting"] + t["paused"], "active": t["active"],
            "delayed": t["delayed"], "completed": t["completed"], "dlq": t["failed"]}  # fmt: skip


@command("DashboardOverview")
async def dashboard_overview(
    ctx: ServerContext, msg: Mapping[str, Any], s: Session
) -> dict[str, Any]:
    """bunqueue's overview: ``{data: {stats, workers, crons, storage, timestamp}}`` (bunq has
    no latency or heap figures there: ``throughput``, ``latency``, ``memory`` and
    ``collections`` are empty maps; the Prometheus endpoint has bunq's figures)."""
    stats = await ctx.run(_overview, ctx)
    m = ctx.metrics.totals()
    stats.update(totalPushed=m["pushed"], totalPulled=m["pulled"],
                 totalCompleted=m["completed"], totalFailed=m["failed"],
                 uptime=time.time() - ctx.started)  # fmt: skip
    now = time.time() * 1000
    workers = list(ctx.workers.values())[:1000]
    crons = []
    if ctx.scheduler is not None:
        keys = ("name", "queue", "schedule", "repeatEvery", "nextRun", "executions")
        for c in await ctx.run(ctx.scheduler.list):
            wire = cron_to_wire(c)
            crons.append({k: wire[k] for k in keys})
    return {
        "data": {
            "stats": stats,
            "throughput": {},
            "latency": {},
            "memory": {},
            "collections": {},
            "workers": {
                "total": len(workers),
                "active": sum(1 for w in workers if now - w.get("lastSeen", 0) < 30_000),
                "list": workers,
            },
            "crons": crons,
            "storage": {"diskFull": False, "error": None, "since": None},
            "timestamp": now,
        }
    }


def _queue_rows(backend: Backend) -> list[dict[str, Any]]:
    rows = []
    for name, counts in per_queue(backend, MAX_QUEUES_IN_STATS).items():
        rows.append({
            "name": name,
            "waiting": counts.get("waiting", 0) + counts.get("paused", 0),
            "prioritized": 0,
            "delayed": counts.get("delayed", 0),
            "active": counts.get("active", 0),
            "dlq": counts.get("failed", 0),
            "paused": backend.is_paused(name),
        })  # fmt: skip
    return rows


@command("DashboardQueues")
async def dashboard_queues(
    ctx: ServerContext, msg: Mapping[str, Any], s: Session
) -> dict[str, Any]:
    """``{data: {queues: [{name, waiting, prioritized, delayed, active, dlq, paused}],
    timestamp}}`` (bunq keeps prioritized jobs among the waiting: ``prioritized`` is 0)."""
    rows = await ctx.run(_queue_rows, ctx.backend)
    return {"data": {"queues": rows, "timestamp": time.time() * 1000}}


def _summary(job: Any) -> dict[str, Any]:
    return {"id": job.id, "priority": job.opts.priority, "createdAt": job.created_at,
            "runAt": job.run_at, "attempts": job.attempts, "progress": job.progress}  # fmt: skip


def _queue_view(backend: Backend, queue: str, jobs_limit: int | None) -> dict[str, Any]:
    counts = {st.value: int(n) for st, n in backend.counts(queue).items()}
    paused = backend.is_paused(queue)
    dlq = backend.dlq_list(queue, 10, 0)
    ops: Any = backend
    prio = ops.counts_per_priority(queue) if hasattr(ops, "counts_per_priority") else {}
    out: dict[str, Any] = {
        "name": queue,
        "counts": counts,
        "paused": paused,
        "priorityCounts": {str(p): n for p, n in prio.items()},
        "dlqPreview": [
            {
                "id": e.job.id,
                "data": e.job.data,
                "attempts": e.job.attempts,
                "createdAt": e.job.created_at,
            }
            for e in dlq
        ],  # fmt: skip
        "timestamp": time.time() * 1000,
    }
    if jobs_limit is not None:
        states = {"waiting": JobState.WAITING, "active": JobState.ACTIVE,
                  "delayed": JobState.DELAYED, "paused": JobState.PAUSED}  # fmt: skip
        out["jobs"] = {name: [_summary(j) for j in backend.get_jobs(queue, st, 0, jobs_limit)]
                       for name, st in states.items()}  # fmt: skip
    return out


@command("DashboardQueue")
async def dashboard_queue(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, includeJobs?, jobsLimit?}`` -> ``{data: {name, counts, paused,
    priorityCounts, dlqPreview, timestamp, jobs?}}``."""
    queue = queue_of(msg)
    limit = None
    if as_bool(msg.get("includeJobs"), "includeJobs"):
        limit = opt_int(msg, "jobsLimit", 10, 1, 10_000)
        limit = min(limit, JOBS_IN_DASHBOARD)
    return {"data": await ctx.run(_queue_view, ctx.backend, queue, limit)}
