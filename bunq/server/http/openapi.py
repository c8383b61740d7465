"""/openapi.json: OpenAPI 3.1, built from the route table (the one source of the API)."""

from __future__ import annotations

import functools
import re
from typing import Any

from ... import __version__
from .router import ROUTES, Route
from .schemas import ERROR

_ERRORS = {
    "400": "Bad input (code validation, config, protocol, webhook_target_refused)",
    "401": "No valid token (code auth)",
    "404": "No such job, webhook or route (code job_not_found, webhook_not_found, not_found)",
    "409": "Another state, a duplicate or a lost lease (code job_state, duplicate_job, lease_lost)",
    "413": "Body too large (code payload_too_large)",
    "501": "Not supported by this backend (code unsupported)",
    "503": "The backend does not answer, or the server is stopping (code backend_unavailable)",
}


def _operation(r: Route) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": f"{r.method.lower()}_{re.sub(r'[^a-z0-9]+', '_', r.path.lower()).strip('_')}"
        or "index",
        "summary": r.summary,
        "tags": [r.tag],
    }
    params = [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
        for n in re.findall(r"{(\w+)}", r.path)
    ]
    params += [{"name": n, "in": "query", "schema": s} for n, s in r.query.items()]
    if params:
        op["parameters"] = params
    if r.body is not None:
        op["requestBody"] = {"content": {"application/json": {"schema": r.body}}}
    if r.raw is not None and r.raw != "application/json":
        ok: dict[str, Any] = {
            "description": "OK",
            "content": {r.raw: {"schema": {"type": "string"}}},
        }
    else:
        reply = dict(r.reply)
        if r.raw is None:  # {ok: true, ...fields}
            props = {"ok": {"const": True}, **reply.get("properties", {})}
            reply = {**reply, "properties": props, "required": ["ok", *reply.get("required", [])]}
        ok = {"description": "OK", "content": {"application/json": {"schema": reply}}}
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    op["responses"] = {"200": ok, **{c: {"description": d, **error} for c, d in _ERRORS.items()}}
    if r.auth:
        op["security"] = [{"bearer": []}]
    return op


@functools.cache
def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route."""
    paths: dict[str, dict[str, Any]] = {}
    for r in ROUTES:
        paths.setdefault(r.path, {})[r.method.lower()] = _operation(r)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "bunq serve HTTP API",
            "version": __version__,
            "description": "JSON in and out; errors are {ok: false, error, code} with bunq's "
            "stable codes. With tokens configured, send Authorization: Bearer <token>.",
        },
        "paths": paths,
        "components": {
            "schemas": {"Error": ERROR},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
