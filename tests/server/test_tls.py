"""TLS on both listeners, the bunqs:// client, and client-certificate verification."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server.httpapi import Api
from server.remote_factory import QUIET

from bunq import Queue
from bunq.backends import connect
from bunq.errors import BackendUnavailable, ConfigError
from bunq.job import JobState
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig
from bunq.tls import server_context

trustme = pytest.importorskip("trustme")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A throwaway CA, a server certificate for 127.0.0.1, and a client certificate."""
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(d / "server.pem")
    )
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("worker-1@example.com").private_key_and_cert_chain_pem.write_to_path(
        str(d / "client.pem")
    )
    other = trustme.CA()
    other.cert_pem.write_to_path(str(d / "other-ca.pem"))
    return {k: str(d / f"{k}.pem") for k in ("server", "ca", "client", "other-ca")}


def _serve(served: Any, tls: ssl.SSLContext) -> BackgroundServer:
    return BackgroundServer(served, ServerConfig(port=0, http_port=0, tls=tls, **QUIET))


@pytest.fixture
def tls_server(served: Any, pki: dict[str, str]) -> Iterator[BackgroundServer]:
    with _serve(served, server_context(pki["server"])) as srv:
        yield srv


def test_bunqs_client_adds_and_reads_over_tls(
    tls_server: BackgroundServer, pki: dict[str, str]
) -> None:
    remote = connect(f"bunqs://127.0.0.1:{tls_server.port}?ca={pki['ca']}&timeout=5")
    try:
        job = Queue("tls", remote).add("x", {"secret": 1})
        assert remote.get_job(job.id) is not None and remote.counts("tls")
    finally:
        remote.close()
    also = connect(f"bunq://127.0.0.1:{tls_server.port}?tls=1&ca={pki['ca']}")
    try:
        assert "tls" in also.queues()
    finally:
        also.close()


def test_https_api_and_plain_clients_are_refused(
    tls_server: BackgroundServer, pki: dict[str, str]
) -> None:
    https = Api(tls_server.server.http_port or 0, tls=ssl.create_default_context(cafile=pki["ca"]))
    assert https.ok("GET", "/health")["uptime"] >= 0
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        https_wrong = Api(tls_server.server.http_port or 0,
                          tls=ssl.create_default_context(cafile=pki["other-ca"]))  # fmt: skip
        https_wrong.raw("GET", "/health")
    plain = connect(f"bunq://127.0.0.1:{tls_server.port}?timeout=2")
    try:
        with pytest.raises(BackendUnavailable):
            plain.queues()
    finally:
        plain.close()


def test_an_unknown_server_certificate_is_refused(
    tls_server: BackgroundServer, pki: dict[str, str]
) -> None:
    remote = connect(f"bunqs://127.0.0.1:{tls_server.port}?ca={pki['other-ca']}&timeout=2")
    try:
        with pytest.raises(BackendUnavailable):
            remote.queues()
    finally:
        remote.close()


def test_client_certificates_are_required_when_configured(served: Any, pki: dict[str, str]) -> None:
    with _serve(served, server_context(pki["server"], client_ca=pki["ca"])) as srv:
        anon = connect(f"bunqs://127.0.0.1:{srv.port}?ca={pki['ca']}&timeout=2")
        try:
            with pytest.raises(BackendUnavailable):
                anon.queues()
        finally:
            anon.close()
        known = connect(f"bunqs://127.0.0.1:{srv.port}?ca={pki['ca']}&cert={pki['client']}")
        try:
            assert known.queues() == []
        finally:
            known.close()


def test_bad_tls_settings_are_config_errors(pki: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        connect(f"bunq://127.0.0.1:1?ca={pki['ca']}")  # ca without TLS
    with pytest.raises(ConfigError):
        connect(f"bunqs://127.0.0.1:1?cert={tmp_path / 'missing.pem'}")
    with pytest.raises(ConfigError):
        server_context(str(tmp_path / "missing.pem"))


def test_many_threads_share_one_tls_link(tls_server: BackgroundServer, pki: dict[str, str]) -> None:
    """The link's reader thread and eight writers use one TLS connection at once."""
    import threading

    remote = connect(f"bunqs://127.0.0.1:{tls_server.port}?ca={pki['ca']}&timeout=10")
    errors: list[BaseException] = []

    def add() -> None:
        try:
            q = Queue("busy", remote)
            for i in range(100):
                q.add("x", {"i": i, "pad": "x" * 4000})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=add) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == [] and remote.counts("busy")[JobState.WAITING] == 800
    finally:
        remote.close()


def test_serve_refuses_bad_tls_flags(tmp_path: Path) -> None:
    import subprocess
    import sys

    for flags in (["--tls-key", "k.pem"], ["--tls-cert", str(tmp_path / "missing.pem")]):
        done = subprocess.run([sys.executable, "-m", "bunq.server", "--port", "0", *flags],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 78 and "error" in done.stderr, (flags, done.stderr)
