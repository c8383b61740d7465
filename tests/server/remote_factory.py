"""A ``remote`` backend factory for the contract suite: RemoteBackend -> in-test server.

``_remote(tmp_path, **kw)`` starts ``bunq serve`` in-process (port 0, its own
thread and event loop) on a fresh backend built with ``kw`` (the test's fake
clock), and returns a RemoteBackend connected to it whose ``close()`` also
stops the server. The backend behind the server is SQLite by default;
``BUNQ_REMOTE_BEHIND=memory`` uses the memory engine.

The server's own timers (sweep, cron) are off: contract tests call ``sweep()``
themselves and move a fake clock.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from bunq.backends.remote import RemoteBackend
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig

QUIET = dict(sweep_interval=3600.0, cron_interval=3600.0)


def behind(tmp_path: Any, kind: str | None = None, **kw: Any) -> Any:
    """The backend a test server serves."""
    kind = kind or os.environ.get("BUNQ_REMOTE_BEHIND", "sqlite")
    if kind == "memory":
        from bunq.backends import connect

        return connect("memory://", **kw)
    from bunq.backends.sql.sqlite import SQLiteBackend

    return SQLiteBackend(str(tmp_path / f"served-{uuid.uuid4().hex[:8]}.db"), **kw)


class _Remote(RemoteBackend):
    """RemoteBackend that owns its test server."""

    server: BackgroundServer

    def close(self) -> None:
        super().close()
        self.server.stop()


def _remote(tmp_path: Any, **kw: Any) -> Any:
    """Contract-suite factory: a RemoteBackend over a fresh in-test server."""
    served = behind(tmp_path, **kw)
    server = BackgroundServer(
        served, ServerConfig(port=0, http_port=None, **QUIET), close_backend=True
    ).start()
    remote = _Remote("127.0.0.1", server.port, clock=kw.get("clock"), timeout=10.0)
    remote.server = server
    return remote
