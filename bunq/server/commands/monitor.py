"""Session and monitoring: Auth, Hello, Ping, Stats, Metrics, Prometheus, worker registry."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from ... import __version__
from ...backends.base import Backend
from ...errors import AuthError, UnsupportedError
from ...job import JobState
from ...policy import DEFAULT_MAX_STALLS
from ...protocol import CAPABILITIES, PROTOCOL_VERSION
from ..context import ServerContext, Session
from ..fields import as_str
from ..wire import queue_of
from . import command

MAX_WORKERS = 10_000
MAX_QUEUES_IN_STATS = 1000


@command("Auth")
async def auth(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{token}``: constant-time compare against every configured token.

    A wrong token is answered after ``auth_fail_delay``; the connection (served
    one request at a time until it authenticates) is closed after
    ``max_auth_failures`` of them, so guessing costs time and connections.
    """
    if not ctx.config.tokens:
        raise AuthError("Invalid token")  # nothing to authenticate against, nothing to guess
    if not ctx.config.accepts(msg.get("token")):
        s.auth_failures += 1
        ctx.metrics.auth_failures.inc()
        if s.auth_failures >= ctx.config.max_auth_failures:
            s.close_after_reply = "too many failed Auth attempts"
        await asyncio.sleep(ctx.config.auth_fail_delay)
        raise AuthError("Invalid token")
    s.authed = True
    return {}


@command("Hello")
async def hello(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """Protocol discovery; a client declaring capability ``bunq`` gets exact 64-bit integers."""
    caps = msg.get("capabilities")
    if isinstance(caps, list) and "bunq" in caps:
        s.exact_ints = True
    b = ctx.backend
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": [*CAPABILITIES, "bunq"],
        "server": "bunq",
        "version": __version__,
        "bunq": {
            "kind": b.kind,
            "capabilities": sorted(c.value for c in b.capabilities),
            "maxStalls": getattr(b, "max_stalls", DEFAULT_MAX_STALLS),
            "time": b.clock(),
            "maxFrame": ctx.config.max_frame,
        },
    }


@command("Ping")
async def ping(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    return {"data": {"pong": True, "time": float(time.time() * 1000)}}


def totals(backend: Backend) -> dict[str, int]:
    """Jobs per state over every queue (at most MAX_QUEUES_IN_STATS queues)."""
    out = dict.fromkeys((s.value for s in JobState), 0)
    for q in backend.queues()[:MAX_QUEUES_IN_STATS]:
        for state, n in backend.counts(q).items():
            out[state.value] += n
    return out


def per_queue(backend: Backend, limit: int = 100) -> dict[str, dict[str, int]]:
    """Counts per queue and state name (``failed`` = in the dead-letter queue)."""
    return {q: {s.value: int(n) for s, n in backend.counts(q).items()}
            for q in backend.queues()[:limit]}  # fmt: skip


@command("Stats")
async def stats(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    t = await ctx.run(totals, ctx.backend)
    m = ctx.metrics.totals()
    return {
        "stats": {
            "waiting": t["waiting"] + t["paused"],
            "active": t["active"],
            "delayed": t["delayed"],
            "dlq": t["failed"],
            "completed": t["completed"],
            "failed": m["failed"],
            "uptime": time.time() - ctx.started,
            "pushed": m["pushed"],
            "pulled": m["pulled"],
        }
    }


@command("Metrics")
async def metrics(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    m = ctx.metrics.totals()
    return {
        "metrics": {
            "totalPushed": m["pushed"],
            "totalPulled": m["pulled"],
            "totalCompleted": m["completed"],
            "totalFailed": m["failed"],
            "activeConnections": ctx.metrics.connections._value.get(),
        }
    }


async def metrics_text(ctx: ServerContext, openmetrics: bool = False) -> bytes:
    """The Prometheus text (or OpenMetrics): per-queue counts read and rendered at most
    once per ``scrape_cache`` seconds, the rendering on a thread, off the event loop."""

    async def render() -> bytes:
        ctx.metrics.queues.snapshot = await ctx.run(per_queue, ctx.backend)
        ctx.metrics.leases.set(len(ctx.leases))
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, ctx.metrics.text, openmetrics)

    return await ctx.scrapes.get("openmetrics" if openmetrics else "metrics", render)


@command("Prometheus")
async def prometheus(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    return {"data": {"metrics": (await metrics_text(ctx)).decode()}}


def _remember(ctx: ServerContext, s: Session, worker_id: str, info: dict[str, Any]) -> None:
    if worker_id not in ctx.workers and len(ctx.workers) >= MAX_WORKERS:
        ctx.workers.pop(next(iter(ctx.workers)))
    entry = ctx.workers.setdefault(worker_id, {"id": worker_id, "registeredAt": time.time() * 1000})
    entry.update(info, lastSeen=time.time() * 1000)
    s.workers[worker_id] = entry


def _small(msg: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: msg[k] for k in keys if isinstance(msg.get(k), (str, int, float, bool))}


@command("RegisterWorker")
async def register(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    worker_id = as_str(msg.get("workerId") or msg.get("name"), "workerId", 512)
    info = _small(msg, ("name", "concurrency", "hostname", "pid", "startedAt"))
    queues = msg.get("queues")
    if isinstance(queues, list):
        info["queues"] = [q for q in queues[:100] if isinstance(q, str)]
    _remember(ctx, s, worker_id, info)
    return {"data": dict(ctx.workers[worker_id])}


@command("Heartbeat")
async def worker_heartbeat(
    ctx: ServerContext, msg: Mapping[str, Any], s: Session
) -> dict[str, Any]:
    worker_id = as_str(msg.get("id") or msg.get("workerId"), "id", 512)
    _remember(ctx, s, worker_id, _small(msg, ("activeJobs", "processed", "failed")))
    return {"data": {"ok": True}}


@command("UnregisterWorker")
async def unregister(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    worker_id = as_str(msg.get("workerId"), "workerId", 512)
    s.workers.pop(worker_id, None)
    return {"data": {"removed": ctx.workers.pop(worker_id, None) is not None}}


@command("ListWorkers")
async def list_workers(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    return {"data": {"workers": list(ctx.workers.values())[:1000]}}


@command("SubscribeEvents", "UnsubscribeEvents")
async def subscribe(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``SubscribeEvents {queue}``: push ``{type: "event", event}`` frames of ``queue``'s jobs
    to this connection (one queue per connection: a new subscription replaces the old);
    ``UnsubscribeEvents`` stops them. See :mod:`bunq.server.events`."""
    if s.subscriber is None:
        raise UnsupportedError("server", "events", "events are pushed over TCP connections only")
    if msg.get("cmd") == "UnsubscribeEvents":
        ctx.events.unsubscribe(s.subscriber)
    else:
        ctx.events.subscribe(s.subscriber, queue_of(msg))
    return {}
