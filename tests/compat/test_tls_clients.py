"""bunqueue's own clients over TLS against ``bunq serve --tls-cert``: JS and Python."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat.test_js_client import BUN, JS, missing

from bunq.backends.sql.sqlite import SQLiteBackend
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig
from bunq.tls import server_context

trustme = pytest.importorskip("trustme")


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[BackgroundServer, str]]:
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "server.pem")
    )
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    tls = server_context(str(tmp_path / "server.pem"))
    cfg = ServerConfig(port=0, http_port=None, tls=tls, sweep_interval=0.2)
    backend = SQLiteBackend(str(tmp_path / "compat.db"))
    with BackgroundServer(backend, cfg, close_backend=True) as srv:
        yield srv, str(tmp_path / "ca.pem")


def test_js_client_over_tls(tls_server: tuple[BackgroundServer, str]) -> None:
    srv, ca = tls_server
    if not BUN.exists() or not (JS / "node_modules" / "bunqueue").exists():
        missing("bun + bunqueue (npm ci in tests/compat/js)")
    done = subprocess.run([str(BUN), "tls.mjs", str(srv.port), ca], cwd=JS,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"waiting": 1, "state": "completed", "result": 42}


def test_python_client_over_tls(tls_server: tuple[BackgroundServer, str]) -> None:
    """bunqueue's Python client (``tls=ssl.SSLContext``) adds and reads over TLS."""
    import importlib.util
    import ssl

    if importlib.util.find_spec("bunqueue") is None:
        missing("bunqueue-client (pip install bunqueue-client)")
    import bunqueue

    srv, ca = tls_server
    q = bunqueue.Queue("compat-tls-py", host="127.0.0.1", port=srv.port,
                       tls=ssl.create_default_context(cafile=ca))  # fmt: skip
    try:
        job = q.add("secret", {"n": 1})
        assert q.get_job_counts()["waiting"] == 1 and q.get_state(job.id) == "waiting"
    finally:
        q.close()
