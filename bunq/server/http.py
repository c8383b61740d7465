"""A tiny HTTP/1.1 endpoint beside the TCP port: health, readiness, metrics, stats.

| path | answer |
| --- | --- |
| ``GET /health`` | 200 ``{"ok": true}`` while the process runs |
| ``GET /ready`` | 200 when the backend answers within 2 s (and not stopping), else 503 |
| ``GET /metrics`` | Prometheus text (``bunq_*``) |
| ``GET /stats`` | JSON: jobs per state, totals, connections, uptime |

One request per connection (``Connection: close``); headers are capped at 8 KiB
and must arrive within 10 s; at most ``MAX_CONNECTIONS`` are open at once.
``/metrics`` and ``/stats`` are rendered at most once per ``scrape_cache``
seconds (:mod:`.scrape`) and, with tokens configured (and ``http_auth``),
need ``Authorization: Bearer <token>``; ``/health`` and ``/ready`` stay open.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sized
from typing import Any, Protocol

from .commands.monitor import metrics_text, totals
from .context import ServerConfig, ServerContext
from .metrics import OPENMETRICS, TEXT

log = logging.getLogger("bunq.server")


class Host(Protocol):
    """What the HTTP side reads of the server it serves (:class:`.app.Server`)."""

    @property
    def ctx(self) -> ServerContext: ...
    @property
    def config(self) -> ServerConfig: ...
    @property
    def conns(self) -> Sized: ...
    @property
    def stopping(self) -> bool: ...


MAX_HEAD = 8192
MAX_CONNECTIONS = 256  # HTTP requests served at once; more are closed on accept
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


def _response(status: int, body: bytes, ctype: str) -> bytes:
    challenge = "WWW-Authenticate: Bearer\r\n" if status == 401 else ""
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n"
        f"{challenge}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def _json(status: int, value: Any) -> bytes:
    return _response(status, json.dumps(value, default=str).encode(), "application/json")


def _header(head: bytes, name: bytes) -> bytes:
    """The value of header ``name`` (lower case) in the request head (b"" if absent)."""
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().lower()
    return b""


def _bearer(head: bytes) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, if any."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                return token.strip().decode("latin-1")
    return None


async def _stats(server: Host) -> bytes:
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

    return await ctx.scrapes.get("stats", render)


async def _route(server: Host, method: str, path: str, head: bytes) -> bytes:
    ctx = server.ctx
    if method == "HEAD":  # the answer GET would give, without its body
        full = await _route(server, "GET", path, head)
        status_line, _, rest = full.partition(b"\r\n")
        headers = rest.split(b"\r\n\r\n", 1)[0]
        return status_line + b"\r\n" + headers + b"\r\n\r\n"
    if method != "GET":
        return _json(405, {"error": "only GET and HEAD"})
    path = path.split("?", 1)[0]
    if path in ("/health", "/healthz", "/live"):
        return _json(200, {"ok": True, "uptime": time.time() - ctx.started})
    if path == "/ready":
        if server.stopping:
            return _json(503, {"ready": False, "reason": "stopping"})
        try:
            await asyncio.wait_for(ctx.run(ctx.backend.queues), 2.0)
        except Exception as exc:  # any failure means not ready
            return _json(503, {"ready": False, "reason": f"{type(exc).__name__}: {exc}"})
        return _json(200, {"ready": True})
    if path not in ("/metrics", "/prometheus", "/stats"):
        return _json(404, {"error": f"no route {path}"})
    cfg = server.config
    if cfg.tokens and cfg.http_auth and not cfg.accepts(_bearer(head)):
        return _json(401, {"error": "a token is needed: Authorization: Bearer <token>"})
    if path == "/stats":
        return _response(200, await _stats(server), "application/json")
    om = b"application/openmetrics-text" in _header(head, b"accept")
    return _response(200, await metrics_text(ctx, om), OPENMETRICS if om else TEXT)


async def _handle(server: Host, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3:
            writer.write(_json(400, {"error": "bad request line"}))
        else:
            writer.write(await _route(server, parts[0], parts[1], head))
        await writer.drain()
    except (
        asyncio.IncompleteReadError,
        asyncio.LimitOverrunError,
        asyncio.TimeoutError,
        ConnectionError,
    ):  # asyncio.TimeoutError: the builtin one only from 3.11
        pass
    except Exception:  # the HTTP side must never take the server down
        log.exception("http request failed")
    finally:
        writer.close()


async def start_http(server: Host, host: str, port: int) -> asyncio.Server:
    """Listen for HTTP on (host, port); return the asyncio server."""

    open_ = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_
        if open_ >= MAX_CONNECTIONS:
            writer.transport.abort()
            return
        open_ += 1
        try:
            await _handle(server, reader, writer)
        finally:
            open_ -= 1

    return await asyncio.start_server(handle, host, port, limit=MAX_HEAD)
