"""A tiny HTTP client for the API tests (stdlib http.client: one request per connection)."""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any


class Api:
    """Calls ``bunq serve``'s HTTP API on ``port``, with ``token`` when given."""

    def __init__(self, port: int, token: str | None = None, tls: ssl.SSLContext | None = None):
        self.port, self.token, self.tls = port, token, tls

    def raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        if self.tls is None:
            conn: http.client.HTTPConnection = http.client.HTTPConnection(
                "127.0.0.1", self.port, timeout=10
            )
        else:
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=10, context=self.tls)
        h = dict(headers or {})
        if self.token is not None:
            h.setdefault("Authorization", f"Bearer {self.token}")
        if body is not None:
            h.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def call(self, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
        """(status, decoded JSON body)."""
        data = None if body is None else json.dumps(body).encode()
        status, _, raw = self.raw(method, path, data, headers)
        return status, json.loads(raw) if raw else None

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON reply of a call that must succeed."""
        status, out = self.call(method, path, body)
        assert status == 200 and out["ok"] is True, (status, out)
        return out
