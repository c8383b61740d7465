"""bunq's extensions (``Bq*``): the Backend contract over the wire, without loss.

bunqueue's commands cannot carry everything the contract needs (the job
snapshot an add returns, the retry decision a driver made, small shared
records for cron), so :class:`bunq.backends.remote.RemoteBackend` uses these.
Jobs travel as :func:`bunq.protocol.job_to_bq` lists; fences as ``(id, token,
attempt)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any

from ...backends.base import Backend, DlqConfig, QueueLimits
from ...errors import BunqError, ValidationError
from ...job import FailureReason, JobState, Lease, NewJob, Settle
from ...policy import FailDecision
from ...protocol import error_reply, wire_token
from ...wire_shapes import dlq_to_bq, job_to_bq, options_from_wire
from ..context import BIG_LIST, ServerContext, Session
from ..fields import as_int, as_str, opt_int
from ..jobwait import failed
from ..wire import MAX_BATCH, queue_of, state_of
from . import command
from .consume import lease_with_poll, pull_args


def _new_job(row: object) -> NewJob:
    if not isinstance(row, list) or len(row) != 5:
        raise ValidationError("BqAdd jobs are [id, queue, name, data, opts]", field="jobs")
    jid, queue, name, data, opts = row
    if not isinstance(opts, Mapping):
        raise ValidationError("job options must be a map", field="opts")
    return NewJob(queue, name, data, options_from_wire(opts), as_str(jid, "id", 1024))


@command("BqAdd")
async def bq_add(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{groups: [[[id, queue, name, data, opts], ...], ...]}`` -> ``{results}``.

    Each group is one client ``add`` call: atomic on its own, answered on its
    own (``{ok: true, jobs}`` or an error reply), admitted together when they can be.
    """
    groups = msg.get("groups")
    if (
        not isinstance(groups, list)
        or not groups
        or sum(len(g) if isinstance(g, list) else MAX_BATCH + 1 for g in groups) > MAX_BATCH
    ):
        raise ValidationError(f"groups must hold at most {MAX_BATCH} jobs", field="groups")
    if len(groups) == 1:  # the common case: no task per group
        return {"results": [await _add_group(ctx, groups[0])]}
    return {"results": await asyncio.gather(*(_add_group(ctx, g) for g in groups))}


async def _add_group(ctx: ServerContext, rows: list[Any]) -> dict[str, Any]:
    try:
        jobs = [_new_job(r) for r in rows]
        stored = await ctx.add(jobs) if jobs else []
    except BunqError as exc:
        return dict(error_reply(None, exc))
    return {"ok": True, "jobs": [job_to_bq(j) for j in stored]}


@command("BqLease")
async def bq_lease(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, count, lockTtl, owner, timeout}`` -> ``{leases: [[job, token, attempt, exp]]}``."""
    queue, n, timeout, lease_ms, owner = await pull_args(ctx, msg, 1)
    leases = await lease_with_poll(ctx, s, queue, n, lease_ms, owner or "", timeout)
    ctx.leases.add(leases, lease_ms, locked=True)
    ctx.metrics.pulled.inc(len(leases))
    return {"leases": [[job_to_bq(x.job), x.token, x.attempt, x.expires_at] for x in leases]}


@command("BqWait")
async def bq_wait(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, timeout}``: return when the queue may have work (a hint) or at the timeout."""
    queue = queue_of(msg)
    await ctx.waiters.wait(queue, opt_int(msg, "timeout", 0, 0, 60_000) / 1000)
    return {}


async def _fence(ctx: ServerContext, item: object) -> Lease:
    if not isinstance(item, list) or len(item) < 3:
        raise ValidationError("a fence is [id, token, attempt, ...]", field="items")
    job_id = as_str(item[0], "id", 1024)
    return await ctx.resolve(job_id, wire_token(str(item[1]), as_int(item[2], "attempt")))


@command("BqComplete")
async def bq_complete(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{items: [[id, token, attempt, result]]}`` -> ``{settled: [bool]}`` (false: stale)."""
    items = msg.get("items")
    if not isinstance(items, list) or not items or len(items) > MAX_BATCH:
        raise ValidationError("items must be a non-empty list", field="items")
    pairs, stale = [], []
    for i, item in enumerate(items):
        try:
            pairs.append((await _fence(ctx, item), item[3] if len(item) > 3 else None))
        except BunqError:
            stale.append(i)  # an unknown job or token is simply stale
    settled = iter(await ctx.complete(pairs) if pairs else [])
    return {
        "settled": [False if i in stale else next(settled) is Settle.OK for i in range(len(items))]
    }


def _decision(value: object) -> FailDecision:
    if not isinstance(value, list) or len(value) != 3 or value[0] not in ("retry", "delay", "dlq"):
        raise ValidationError("decision is [kind, run_at, reason]", field="decision")
    return FailDecision(value[0], as_int(value[1], "run_at", 0), FailureReason(value[2]))


@command("BqFail")
async def bq_fail(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{fence, error, decision: [kind, run_at, reason], duration}`` -> ``{settled}``."""
    decision = _decision(msg.get("decision"))
    err = msg.get("error")
    error = None if err is None else as_str(err, "error", 1 << 20)
    duration = opt_int(msg, "duration", 0)
    try:
        lease = await _fence(ctx, msg.get("fence"))
    except BunqError:
        return {"settled": False}
    settled = await ctx.run(ctx.backend.fail, lease, error, decision, duration)
    ctx.leases.forget(lease)
    if settled is Settle.OK:
        ctx.events.failed(lease.job, error, decision, ctx.backend.clock())
        ctx.metrics.failed.inc()
        ctx.waiters.notify((lease.job.queue,))
        if decision.is_dead:
            ctx.job_waiters.settle(lease.job.id, failed(error))
    return {"settled": settled is Settle.OK}


@command("BqExtend")
async def bq_extend(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{fence, leaseMs}`` -> ``{settled}``."""
    ms = as_int(msg.get("leaseMs"), "leaseMs", 1, ctx.config.max_lease_ms)
    try:
        lease = await _fence(ctx, msg.get("fence"))
    except BunqError:
        return {"settled": False}
    settled = await ctx.run(ctx.backend.extend, lease, ms)
    if settled is Settle.OK:
        ctx.leases.touch(lease.job.id, ctx.backend.clock() + ms)
    return {"settled": settled is Settle.OK}


@command("BqSweep")
async def bq_sweep(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    result = await ctx.run(ctx.backend.sweep)
    if result.requeued or result.dlq_retried:
        ctx.waiters.notify_all()
    return {"result": asdict(result)}


@command("BqGetJob")
async def bq_get_job(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    job = await ctx.run(ctx.backend.get_job, as_str(msg.get("id"), "id", 1024))
    return {"job": None if job is None else job_to_bq(job)}


@command("BqGetJobs")
async def bq_get_jobs(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    args = (
        ctx.backend,
        queue_of(msg),
        state_of(msg.get("state")),
        opt_int(msg, "offset", 0),
        opt_int(msg, "limit", 100),  # bounds: the backend's (bunq.validate.page)
    )
    if args[-1] > BIG_LIST:
        return {"jobs": await ctx.long_read(s, _bq_jobs, *args)}
    return {"jobs": await ctx.run(_bq_jobs, *args)}


def _bq_jobs(backend: Backend, queue: str, state: JobState, offset: int, limit: int) -> list[Any]:
    return [job_to_bq(j) for j in backend.get_jobs(queue, state, offset, limit)]


@command("BqCounts")
async def bq_counts(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    counts = await ctx.run(ctx.backend.counts, queue_of(msg))
    return {"counts": {st.value: n for st, n in counts.items()}}


@command("BqChildren")
async def bq_children(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    results = await ctx.run(ctx.backend.get_children_results, as_str(msg.get("id"), "id", 1024))
    return {"results": results}


def _dataclass_from(cls: Any, value: object, what: str) -> Any:
    if not isinstance(value, Mapping) or set(value) - {f.name for f in fields(cls)}:
        raise ValidationError(f"{what} must be a map of {cls.__name__} fields", field=what)
    return cls(**value)


@command("BqLimits")
async def bq_limits(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, limits?}``: set (when given) and return the queue's limits."""
    queue = queue_of(msg)
    if msg.get("limits") is not None:
        await ctx.run(
            ctx.backend.set_limits, queue, _dataclass_from(QueueLimits, msg.get("limits"), "limits")
        )
        ctx.waiters.notify((queue,))
    return {"limits": asdict(await ctx.run(ctx.backend.get_limits, queue))}


@command("BqDlq")
async def bq_dlq(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    entries = await ctx.run(
        ctx.backend.dlq_list, queue_of(msg), opt_int(msg, "limit", 100), opt_int(msg, "offset", 0)
    )
    return {"entries": [dlq_to_bq(e) for e in entries]}


@command("BqDlqSize")
async def bq_dlq_size(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    return {"size": await ctx.run(ctx.backend.dlq_size, queue_of(msg))}


@command("BqDlqConfig")
async def bq_dlq_config(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    raw = msg.get("config")
    cfg = None if raw is None else _dataclass_from(DlqConfig, raw, "config")
    return {"config": asdict(await ctx.run(ctx.backend.dlq_config, queue_of(msg), cfg))}


def _kv(backend: Backend, op: str, ns: str, key: str, msg: Mapping[str, Any]) -> Any:
    if op == "get":
        return backend.kv_get(ns, key)
    if op == "delete":
        return backend.kv_delete(ns, key)
    if op == "list":
        return backend.kv_list(ns)
    value, expected = msg.get("value"), msg.get("expected")
    if not isinstance(value, bytes) or not isinstance(expected, (bytes, type(None))):
        raise ValidationError("value (and expected) must be bytes", field="value")
    return backend.kv_put(ns, key, value, expected, create=msg.get("create") is True)


@command("BqKv")
async def bq_kv(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """Small shared records: ``{op: get|put|delete|list, ns, key, value, expected, create}``."""
    op = msg.get("op")
    if op not in ("get", "put", "delete", "list"):
        raise ValidationError("op must be get, put, delete or list", field="op")
    ns = as_str(msg.get("ns"), "ns")
    key = "" if op == "list" else as_str(msg.get("key"), "key", 1024)
    return {"value": await ctx.run(_kv, ctx.backend, op, ns, key, msg)}
