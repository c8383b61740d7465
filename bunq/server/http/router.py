"""The route table: one list of :class:`Route` that serves requests and writes /openapi.json.

A resource module registers its handlers with :func:`route`, giving the
method, the path template (``/queues/{queue}/pause``), and JSON schemas for
the query parameters, the body and the reply. :func:`dispatch` matches a
request against the table, checks the token, decodes the body, calls the
handler and turns its answer (a dict of reply fields) into ``{ok: true, ...}``
or a raised :class:`~bunq.errors.BunqError` into ``{ok: false, error, code}``
with the status of :data:`STATUS`. The OpenAPI document (:mod:`.openapi`) is
built from the same table, so the two cannot disagree.

Most handlers translate the request into a TCP command message and call the
command's handler (:func:`call`): one implementation of each operation,
validated the same way whichever port it came through.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ...codec import unpack
from ...errors import BunqError, ValidationError
from ...protocol import Packed
from ..commands import COMMANDS
from ..context import Session
from .transport import Request, Response, error_response, json_response

log = logging.getLogger("bunq.server")

Handler = Callable[[Request], Awaitable["dict[str, Any] | Response"]]
H = TypeVar("H", bound=Handler)

# bunq's stable error codes -> HTTP status (anything else: 500)
STATUS = {
    "validation": 400,
    "config": 400,
    "dependency": 400,
    "protocol": 400,
    "payload_too_large": 413,
    "auth": 401,
    "job_not_found": 404,
    "not_found": 404,
    "webhook_not_found": 404,
    "webhook_target_refused": 400,
    "duplicate_job": 409,
    "group_full": 409,
    "lease_lost": 409,
    "job_state": 409,
    "rate_limited": 429,
    "unsupported": 501,
    "backend_unavailable": 503,
    "data_file_locked": 503,
}


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint. ``reply`` is the JSON schema of the fields beside ``ok``."""

    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    query: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    reply: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    auth: bool = True  # with tokens configured, a Bearer token is needed
    raw: str | None = None  # media type of a non-JSON answer (text, HTML, SSE)
    segments: tuple[str, ...] = ()

    def match(self, parts: list[str]) -> dict[str, str] | None:
        if len(parts) != len(self.segments):
            return None
        params = {}
        for want, got in zip(self.segments, parts, strict=True):
            if want.startswith("{"):
                if not got:
                    return None
                params[want[1:-1]] = got
            elif want != got:
                return None
        return params


ROUTES: list[Route] = []


def route(
    method: str,
    path: str,
    summary: str,
    tag: str,
    *,
    query: Mapping[str, dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    reply: dict[str, Any] | None = None,
    auth: bool = True,
    raw: str | None = None,
) -> Callable[[H], H]:
    """Register the decorated handler for ``method path``."""

    def register(fn: H) -> H:
        if any(r.method == method and r.path == path for r in ROUTES):
            raise RuntimeError(f"route {method} {path} registered twice")
        ROUTES.append(
            Route(
                method,
                path,
                fn,
                summary,
                tag,
                query or {},
                body,
                reply or {"type": "object"},
                auth,
                raw,
                _split(path),
            )  # fmt: skip
        )
        return fn

    return register


def _split(path: str) -> tuple[str, ...]:
    return tuple(path.strip("/").split("/")) if path != "/" else ("",)


def find(method: str, path: str) -> tuple[Route, dict[str, str]] | None | str:
    """The route and its path parameters; "" when the path exists for other methods."""
    parts = list(_split(path))
    allowed = ""
    for r in ROUTES:
        params = r.match(parts)
        if params is None:
            continue
        if r.method == method or (method == "HEAD" and r.method == "GET"):
            return r, params
        allowed = f"{allowed}, {r.method}" if allowed else r.method
    return allowed or None


def _bearer(req: Request) -> str | None:
    scheme, _, token = req.header("authorization").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def _cors(req: Request) -> dict[str, str]:
    origins = req.server.config.cors_origins
    origin = req.header("origin")
    if not origins or not origin or ("*" not in origins and origin not in origins):
        return {}
    return {
        "Access-Control-Allow-Origin": "*" if "*" in origins else origin,
        "Access-Control-Allow-Headers": "Authorization, Content-Type",
        "Access-Control-Allow-Methods": "GET, POST, PUT, DELETE, OPTIONS",
        "Access-Control-Max-Age": "600",
        "Vary": "Origin",
    }


async def dispatch(req: Request) -> Response:
    """Serve ``req`` from the route table (never raises)."""
    cors = _cors(req)
    resp = await _dispatch(req, cors)
    resp.headers.update(cors)
    return resp


async def _dispatch(req: Request, cors: dict[str, str]) -> Response:
    if req.method == "OPTIONS":
        return Response(204 if cors else 403, ctype="text/plain")
    found = find(req.method, req.path)
    if found is None:
        return error_response(404, "not_found", f"no route {req.path}")
    if isinstance(found, str):
        resp = error_response(405, "protocol", f"{req.method} not allowed here")
        resp.headers["Allow"] = found
        return resp
    r, req.params = found
    cfg = req.server.config
    if r.auth and cfg.tokens and not cfg.accepts(_bearer(req)):
        return error_response(401, "auth", "a token is needed: Authorization: Bearer <token>")
    try:
        out = await r.handler(req)
    except BunqError as exc:
        return error_response(STATUS.get(exc.code, 500), exc.code, str(exc))
    except Exception:  # one bad request must not take the listener down
        log.exception("http handler failed", extra={"route": r.path})
        return error_response(500, "bunq_error", "internal error")
    if isinstance(out, Response):
        return out
    return json_response(200, {"ok": True, **out})


def body_of(req: Request) -> dict[str, Any]:
    """The request's JSON object body ({} when empty)."""
    if not req.body:
        return {}
    try:
        value = json.loads(req.body)
    except ValueError as exc:
        raise ValidationError(f"the body is not JSON: {exc}", field="body") from None
    if not isinstance(value, dict):
        raise ValidationError("the body must be a JSON object", field="body")
    return value


async def call(req: Request, cmd: str, msg: Mapping[str, Any]) -> dict[str, Any]:
    """Run TCP command ``cmd`` with ``msg`` (its fields) and return its reply fields."""
    session = Session(peer="http", authed=True, exact_ints=True)
    out = await COMMANDS[cmd](req.server.ctx, {**msg, "cmd": cmd}, session)
    return {k: _plain(v) for k, v in out.items()}


def _plain(value: Any) -> Any:
    if type(value) is Packed:
        return unpack(value)
    return value


def query_int(req: Request, name: str, default: int, lo: int, hi: int) -> int:
    """Integer query parameter ``name`` in [lo, hi] (``default`` when absent)."""
    raw = req.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError(f"{name} must be an integer", field=name) from None
    if not lo <= value <= hi:
        raise ValidationError(f"{name} must be an integer in [{lo}, {hi}]", field=name)
    return value
