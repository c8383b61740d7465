"""Operations: health, readiness, Prometheus metrics, stats, the OpenAPI document."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from ...commands.monitor import metrics_text, totals
from ...metrics import OPENMETRICS, TEXT
from ..router import route
from ..schemas import BOOL, COUNTS, INT, NUM, STR, obj
from ..transport import Request, Response, error_response, json_response


async def health(req: Request) -> dict[str, Any]:
    return {"uptime": time.time() - req.server.ctx.started}


for _path in ("/health", "/healthz", "/live"):  # bunqueue's names for the same probe
    route("GET", _path, "Liveness: 200 while the process runs", "ops",
          reply=obj(("uptime",), uptime=NUM), auth=False)(health)  # fmt: skip


@route("GET", "/ready", "Readiness: 200 when the backend answers within 2 s", "ops",
       reply=obj(("ready",), ready=BOOL), auth=False)  # fmt: skip
async def ready(req: Request) -> dict[str, Any] | Response:
    ctx = req.server.ctx
    if req.server.stopping:
        return _not_ready("stopping")
    try:
        await asyncio.wait_for(ctx.run(ctx.backend.queues), 2.0)
    except Exception as exc:  # any failure means not ready
        return _not_ready(f"{type(exc).__name__}: {exc}")
    return {"ready": True}


def _not_ready(reason: str) -> Response:
    body = {"ok": False, "ready": False, "error": reason, "code": "backend_unavailable"}
    return json_response(503, body)


@route("GET", "/ping", "Is the API there (with a valid token)", "ops",
       reply=obj(("pong",), pong=NUM))  # fmt: skip
async def ping(req: Request) -> dict[str, Any]:
    return {"pong": time.time() * 1000}


def _scrape_allowed(req: Request) -> bool:
    """/metrics and /stats: open when ``http_auth`` is off (the rest of the API is not)."""
    cfg = req.server.config
    if not cfg.tokens or not cfg.http_auth:
        return True
    scheme, _, token = req.header("authorization").partition(" ")
    return scheme.lower() == "bearer" and cfg.accepts(token.strip())


async def metrics(req: Request) -> Response:
    if not _scrape_allowed(req):
        return error_response(401, "auth", "a token is needed: Authorization: Bearer <token>")
    om = "application/openmetrics-text" in req.header("accept").lower()
    body = await metrics_text(req.server.ctx, om)
    return Response(200, body, OPENMETRICS if om else TEXT)


for _path in ("/metrics", "/prometheus"):
    route("GET", _path, "Prometheus text (bunq_*); OpenMetrics on Accept", "ops",
          auth=False, raw=TEXT)(metrics)  # fmt: skip


STATS = obj(
    ("jobs", "totals", "uptime"),
    jobs=COUNTS,
    totals=COUNTS,
    connections=INT,
    leases=INT,
    commands=INT,
    backend=STR,
    uptime=NUM,
)


@route("GET", "/stats", "Jobs per state, throughput totals, connections, uptime", "ops",
       reply=STATS, auth=False)  # fmt: skip
async def stats(req: Request) -> dict[str, Any] | Response:
    if not _scrape_allowed(req):
        return error_response(401, "auth", "a token is needed: Authorization: Bearer <token>")
    server = req.server
    ctx = server.ctx

    async def render() -> bytes:
        body = {
            "jobs": await ctx.run(totals, ctx.backend),
            "totals": ctx.metrics.totals(),
            "connections": len(server.conns),
            "leases": len(ctx.leases),
            "commands": ctx.metrics.commands,
            "backend": ctx.backend.kind,
            "uptime": time.time() - ctx.started,
        }
        return json.dumps(body, default=str).encode()

    value: dict[str, Any] = json.loads(await ctx.scrapes.get("stats", render))
    return value


@route("GET", "/openapi.json", "This API described as OpenAPI 3.1", "ops",
       raw="application/json")  # fmt: skip
async def openapi(req: Request) -> Response:
    from ..openapi import document

    return json_response(200, document())
