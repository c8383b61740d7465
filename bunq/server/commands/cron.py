"""Cron, CronGet, CronList, CronDelete over :class:`bunq.cron.Scheduler`.

The server fires due schedules on a timer (see :mod:`bunq.server.app`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError, UnsupportedError, ValidationError
from ..context import ServerContext, Session
from ..fields import as_bool, as_int, as_str
from ..wire import DEFAULT_JOB_NAME, name_and_data, parse_backoff, queue_of
from . import command

_JOB_OPTIONS = {
    "maxAttempts": "attempts",
    "timeout": "timeout",
    "delay": "delay",
    "removeOnComplete": "remove_on_complete",
    "removeOnFail": "remove_on_fail",
}


def _scheduler(ctx: ServerContext) -> Any:
    if ctx.scheduler is None:
        raise UnsupportedError("bunq serve", "cron (bunq.cron is not available)")
    return ctx.scheduler


def _job_opts(msg: Mapping[str, Any]) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if msg.get("priority") is not None:
        opts["priority"] = as_int(msg.get("priority"), "priority", -(2**31), 2**31)
    if msg.get("uniqueKey") is not None:
        opts["unique_key"] = as_str(msg.get("uniqueKey"), "uniqueKey", 1024)
        dedup = msg.get("dedup")
        if isinstance(dedup, Mapping) and as_bool(dedup.get("replace"), "dedup.replace"):
            opts["unique_strategy"] = "replace"
        elif isinstance(dedup, Mapping) and as_bool(dedup.get("extend"), "dedup.extend"):
            opts["unique_strategy"] = "extend"
    jo = msg.get("jobOptions")
    if jo is not None:
        if not isinstance(jo, Mapping):
            raise ValidationError("jobOptions must be a map", field="jobOptions")
        for wire, ours in _JOB_OPTIONS.items():
            if jo.get(wire) is not None:
                opts[ours] = jo[wire] if isinstance(jo[wire], bool) else as_int(jo[wire], wire)
        if jo.get("backoff") is not None:
            b = parse_backoff(jo["backoff"])
            opts["backoff"] = {"type": b.type, "delay": b.delay, "cap": b.cap}
    return opts


def schedule_from_wire(msg: Mapping[str, Any], now: int) -> Any:
    """Build a :class:`bunq.cron.Schedule` from a ``Cron`` request."""
    from ...cron import Schedule

    if as_bool(msg.get("skipIfNoWorker"), "skipIfNoWorker"):
        raise UnsupportedError("bunq serve", "cron skipIfNoWorker")
    name = as_str(msg.get("name"), "name", 128)
    job_name, data = name_and_data({"name": msg.get("jobName"), "data": msg.get("data")})
    if msg.get("jobName") is None and job_name == DEFAULT_JOB_NAME:
        job_name = name
    pattern, every = msg.get("schedule"), msg.get("repeatEvery")
    if pattern is None and every is None:
        raise ConfigError("Cron needs schedule (a cron pattern) or repeatEvery (ms)")
    every_ms = None if pattern is not None else as_int(every, "repeatEvery", 1)
    start_at = None
    if as_bool(msg.get("immediately"), "immediately"):
        if every_ms is None:
            raise UnsupportedError("bunq serve", "cron immediately with a cron pattern")
        start_at = now
    limit = msg.get("maxLimit")
    skip = msg.get("skipMissedOnRestart")
    return Schedule(
        name=name,
        queue=queue_of(msg),
        job_name=job_name,
        cron=None if pattern is None else as_str(pattern, "schedule"),
        every_ms=every_ms,
        data=data,
        opts=_job_opts(msg),
        tz=as_str(msg.get("timezone") or "UTC", "timezone"),
        start_at=start_at,
        limit=None if limit is None or as_int(limit, "maxLimit", -(2**31)) <= 0 else int(limit),
        catch_up=False if skip is None else not as_bool(skip, "skipMissedOnRestart"),
        prevent_overlap=as_bool(msg.get("preventOverlap"), "preventOverlap", True),
    )


def cron_to_wire(s: Any) -> dict[str, Any]:
    """bunqueue's cron shape."""
    return {
        "name": s.name,
        "jobName": s.job_name,
        "queue": s.queue,
        "schedule": s.cron,
        "repeatEvery": s.every_ms,
        "nextRun": None if s.next_run is None else float(s.next_run),
        "executions": s.runs,
        "maxLimit": s.limit,
        "timezone": s.tz,
        "priority": dict(s.opts).get("priority", 0),
    }


@command("Cron")
async def cron(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """Create or update a schedule -> ``{cron}``."""
    sched = _scheduler(ctx)
    spec = schedule_from_wire(msg, ctx.backend.clock())
    return {"cron": cron_to_wire(await ctx.run(sched.upsert, spec))}


def _name(msg: Mapping[str, Any]) -> str:
    return as_str(msg.get("name"), "name", 128)


@command("CronGet")
async def cron_get(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    found = await ctx.run(_scheduler(ctx).get, _name(msg))
    if found is None:
        raise ConfigError("Cron job not found", name=msg.get("name"))
    return {"cron": cron_to_wire(found)}


@command("CronList")
async def cron_list(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    return {"crons": [cron_to_wire(c) for c in await ctx.run(_scheduler(ctx).list)]}


@command("CronDelete")
async def cron_delete(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    if not await ctx.run(_scheduler(ctx).remove, _name(msg)):
        raise ConfigError("Cron job not found", name=msg.get("name"))
    return {}
