"""A tiny HTTP/1.1 endpoint beside the TCP port: health, readiness, metrics, stats.

| path | answer |
| --- | --- |
| ``GET /health`` | 200 ``{"ok": true}`` while the process runs |
| ``GET /ready`` | 200 when the backend answers within 2 s (and not stopping), else 503 |
| ``GET /metrics`` | Prometheus text (``bunq_*``) |
| ``GET /stats`` | JSON: jobs per state, totals, connections, uptime |

One request per connection (``Connection: close``); headers are capped at 8 KiB.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from .commands.monitor import refresh_queue_gauges, totals

if TYPE_CHECKING:
    from .app import Server

log = logging.getLogger("bunq.server")

MAX_HEAD = 8192
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


def _response(status: int, body: bytes, ctype: str) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def _json(status: int, value: Any) -> bytes:
    return _response(status, json.dumps(value, default=str).encode(), "application/json")


async def _route(server: Server, method: str, path: str) -> bytes:
    ctx = server.ctx
    if method != "GET":
        return _json(405, {"error": "only GET"})
    path = path.split("?", 1)[0]
    if path in ("/health", "/healthz", "/live"):
        return _json(200, {"ok": True, "uptime": time.time() - ctx.started})
    if path == "/ready":
        if server.stopping:
            return _json(503, {"ready": False, "reason": "stopping"})
        try:
            await asyncio.wait_for(ctx.run(ctx.backend.queues), 2.0)
        except Exception as exc:  # noqa: BLE001 - any failure means not ready
            return _json(503, {"ready": False, "reason": f"{type(exc).__name__}: {exc}"})
        return _json(200, {"ready": True})
    if path in ("/metrics", "/prometheus"):
        await refresh_queue_gauges(ctx)
        return _response(200, ctx.metrics.text(), "text/plain; version=0.0.4; charset=utf-8")
    if path == "/stats":
        return _json(
            200,
            {
                "jobs": await ctx.run(totals, ctx.backend),
                "totals": ctx.metrics.totals(),
                "connections": len(server.conns),
                "leases": len(ctx.leases),
                "commands": ctx.metrics.commands,
                "backend": ctx.backend.kind,
                "uptime": time.time() - ctx.started,
            },
        )
    return _json(404, {"error": f"no route {path}"})


async def _handle(
    server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3:
            writer.write(_json(400, {"error": "bad request line"}))
        else:
            writer.write(await _route(server, parts[0], parts[1]))
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
        pass
    except Exception:  # noqa: BLE001 - the HTTP side must never take the server down
        log.exception("http request failed")
    finally:
        writer.close()


async def start_http(server: Server, host: str, port: int) -> asyncio.Server:
    """Listen for HTTP on (host, port); return the asyncio server."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _handle(server, reader, writer)

    return await asyncio.start_server(handle, host, port, limit=MAX_HEAD)
