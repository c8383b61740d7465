"""HTTP/1.1 on the wire: read one request, write one response, close.

One request per connection (``Connection: close``). The head is capped at
``MAX_HEAD`` bytes and must arrive within ``HEAD_TIMEOUT`` seconds; a body
needs ``Content-Length`` (no chunked uploads) and may not exceed the server's
``http_max_body`` (413 ``payload_too_large`` otherwise). At most
``MAX_CONNECTIONS`` requests are served at once; more are closed on accept.
TLS, when configured, wraps the listener (:func:`start_http`'s ``ssl``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Sized
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote

from ..context import ServerConfig, ServerContext

log = logging.getLogger("bunq.server")

MAX_HEAD = 8192
HEAD_TIMEOUT = 10.0
BODY_TIMEOUT = 30.0
MAX_CONNECTIONS = 256
REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    429: "Too Many Requests",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


class Host(Protocol):
    """What the HTTP side reads of the server it serves (:class:`bunq.server.app.Server`)."""

    @property
    def ctx(self) -> ServerContext: ...
    @property
    def config(self) -> ServerConfig: ...
    @property
    def conns(self) -> Sized: ...
    @property
    def stopping(self) -> bool: ...


@dataclass(slots=True)
class Request:
    """One parsed request. Header names are lower case; ``params`` come from the route."""

    server: Host
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""
    params: dict[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str:
        return self.headers.get(name, "")


@dataclass(slots=True)
class Response:
    """A complete answer; ``stream`` (SSE) writes the body itself after the head."""

    status: int
    body: bytes = b""
    ctype: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    stream: Callable[[asyncio.StreamWriter], Awaitable[None]] | None = None

    def head(self) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'OK')}"]
        lines.append(f"Content-Type: {self.ctype}")
        if self.stream is None:
            lines.append(f"Content-Length: {len(self.body)}")
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def json_response(status: int, value: Any, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(value, default=str, separators=(",", ":")).encode()
    return Response(status, body, "application/json", headers or {})


def error_response(status: int, code: str, message: str) -> Response:
    """bunq's error shape over HTTP: ``{ok: false, error, code}`` (the TCP reply's)."""
    extra = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    return json_response(status, {"ok": False, "error": message, "code": code}, extra)


def parse_head(head: bytes) -> tuple[str, str, dict[str, str], dict[str, str]] | None:
    """``(method, path, query, headers)`` of a request head, or None when malformed."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) != 3 or not parts[1].startswith("/"):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            return None
        headers[name.strip().lower()] = value.strip()
    target, _, qs = parts[1].partition("?")
    query = dict(parse_qsl(qs, keep_blank_values=True))
    return parts[0].upper(), unquote(target), query, headers


Dispatch = Callable[[Request], Awaitable[Response]]


async def _serve_one(
    server: Host, dispatch: Dispatch, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
    parsed = parse_head(head)
    if parsed is None:
        writer.write(error_response(400, "protocol", "bad request").head())
        return
    method, path, query, headers = parsed
    req = Request(server, method, path, query, headers)
    length = headers.get("content-length", "0") or "0"
    if "chunked" in headers.get("transfer-encoding", "").lower() or not length.isdigit():
        resp = error_response(400, "protocol", "send a body with Content-Length")
    elif int(length) > server.config.http_max_body:
        limit = server.config.http_max_body
        resp = error_response(413, "payload_too_large", f"body over {limit} bytes")
    else:
        if int(length):
            req.body = await asyncio.wait_for(reader.readexactly(int(length)), BODY_TIMEOUT)
        resp = await dispatch(req)
    writer.write(resp.head())
    if method != "HEAD":
        if resp.stream is not None:
            await writer.drain()
            await resp.stream(writer)
        else:
            writer.write(resp.body)
    await writer.drain()


async def start_http(
    server: Host, dispatch: Dispatch, host: str, port: int, tls: ssl.SSLContext | None
) -> asyncio.Server:
    """Listen for HTTP (HTTPS with ``tls``) on (host, port); return the asyncio server."""
    open_ = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_
        if open_ >= MAX_CONNECTIONS:
            writer.transport.abort()
            return
        open_ += 1
        try:
            await _serve_one(server, dispatch, reader, writer)
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            asyncio.TimeoutError,
            ConnectionError,
            ssl.SSLError,
        ):  # asyncio.TimeoutError: the builtin one only from 3.11
            pass
        except asyncio.CancelledError:  # the server stops (an SSE stream was open): just close
            writer.transport.abort()
        except Exception:  # the HTTP side must never take the server down
            log.exception("http request failed")
        finally:
            open_ -= 1
            writer.close()

    return await asyncio.start_server(handle, host, port, limit=MAX_HEAD, ssl=tls)
