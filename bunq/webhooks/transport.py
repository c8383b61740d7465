"""The one HTTP POST of a delivery, to the address the target guard checked.

``http.client`` over a socket opened to the checked address (TLS verifies the
certificate against the URL's host name); redirects are not followed.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from urllib.parse import urlsplit

from .guard import TargetGuard


def post(guard: TargetGuard, url: str, headers: dict[str, str], body: bytes, timeout: float,
         tls: ssl.SSLContext) -> int:  # fmt: skip
    """POST ``body`` to ``url``; return the status. Raises WebhookTargetRefused (the
    guard), OSError (connection, timeout), http.client.HTTPException (a bad answer)."""
    scheme, host, port = guard.check_url(url)
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    last: OSError | None = None
    for _family, addr in guard.resolve(host, port):
        conn: http.client.HTTPConnection = (
            _PinnedHTTPS(host, port, addr, timeout, tls)
            if scheme == "https"
            else _PinnedHTTP(host, port, addr, timeout)
        )
        try:
            conn.connect()
        except OSError as exc:
            last = exc
            conn.close()
            continue
        try:
            conn.request("POST", path, body, headers)
            resp = conn.getresponse()
            resp.read(65536)
            return resp.status
        finally:
            conn.close()
    raise last or OSError(f"no address for {host}")


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to ``addr`` (checked by the guard), naming ``host``."""

    def __init__(self, host: str, port: int, addr: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._addr = addr

    def connect(self) -> None:
        if self.sock is None:
            self.sock = socket.create_connection((self._addr, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """An HTTPS connection to ``addr``; the certificate is checked against ``host``."""

    def __init__(self, host: str, port: int, addr: str, timeout: float,
                 context: ssl.SSLContext) -> None:  # fmt: skip
        super().__init__(host, port, timeout=timeout, context=context)
        self._addr, self._ctx = addr, context

    def connect(self) -> None:
        if self.sock is None:
            raw = socket.create_connection((self._addr, self.port), self.timeout)
            self.sock = self._ctx.wrap_socket(raw, server_hostname=self.host)
