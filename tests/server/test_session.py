"""Auth, idle and slow clients, HTTP endpoints, cron firing, RemoteBackend recovery."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from server.raw import Raw

from bunq import Queue
from bunq.backends.remote import RemoteBackend
from bunq.errors import AuthError, BackendUnavailable
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig


@pytest.fixture
def auth_server(served: Any) -> Iterator[BackgroundServer]:
    cfg = ServerConfig(
        port=0,
        http_port=0,
        tokens=("s3cret", "other"),
        idle_timeout=0.5,
        sweep_interval=0.2,
        cron_interval=0.1,
    )
    with BackgroundServer(served, cfg) as srv:
        yield srv


def test_nothing_but_auth_and_hello_before_auth(auth_server: Any) -> None:
    c = Raw(auth_server.port)
    assert c.call({"cmd": "Hello", "protocolVersion": 3})["protocolVersion"] == 3
    for cmd in ("Ping", "PUSH", "BqKv", "Stats"):
        reply = c.call({"cmd": cmd, "queue": "q"})
        assert reply["ok"] is False and reply["error"] == "Not authenticated", cmd
    assert c.call({"cmd": "Auth", "token": "wrong"})["code"] == "auth"
    assert c.call({"cmd": "Auth", "token": 123})["ok"] is False
    assert c.call({"cmd": "Auth", "token": "other"})["ok"] is True
    assert c.call({"cmd": "Ping"})["ok"] is True
    c.close()


def test_remote_backend_with_and_without_token(auth_server: Any) -> None:
    url = f"bunq://127.0.0.1:{auth_server.port}"
    with pytest.raises(AuthError):
        RemoteBackend.from_url(url + "?token=bad").queues()
    anon = RemoteBackend.from_url(url)
    with pytest.raises(AuthError):
        anon.queues()
    anon.close()
    ok = RemoteBackend.from_url(url + "?token=s3cret")
    q = Queue("tok", ok)
    assert q.add("j", 1).state.value == "waiting" and q.counts()["waiting"] == 1
    ok.close()


def test_idle_and_slow_clients_are_disconnected(auth_server: Any) -> None:
    idle = Raw(auth_server.port)
    slow = Raw(auth_server.port)
    slow.send(b"\x00\x00")  # half a header, then nothing
    busy = Raw(auth_server.port)
    assert busy.call({"cmd": "Auth", "token": "s3cret"})["ok"]
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.2:  # stays active: not idle
        busy.call({"cmd": "Ping"})
        time.sleep(0.1)
    assert idle.closed_by_server(2) and slow.closed_by_server(2)
    assert busy.call({"cmd": "Ping"})["ok"]
    busy.close()


def _get(port: int, path: str, token: str | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_http_health_ready_metrics_stats(auth_server: Any) -> None:
    port = auth_server.server.http_port
    c = Raw(auth_server.port)
    c.call({"cmd": "Auth", "token": "s3cret"})
    c.call({"cmd": "PUSHB", "queue": "web", "jobs": [{"data": 1}, {"data": 2}]})
    assert _get(port, "/health")[0] == 200
    assert json.loads(_get(port, "/ready")[1]) == {"ok": True, "ready": True}
    assert _get(port, "/metrics")[0] == 401  # tokens configured: scrapes need one
    assert _get(port, "/stats", "wrong")[0] == 401
    status, text = _get(port, "/metrics", "other")
    assert status == 200
    body = text.decode()
    assert 'bunq_queue_jobs{queue="web",state="waiting"} 2.0' in body
    assert "bunq_jobs_pushed_total 2.0" in body and 'cmd="PUSHB"' in body
    stats = json.loads(_get(port, "/stats", "s3cret")[1])
    assert stats["jobs"]["waiting"] == 2 and stats["totals"]["pushed"] == 2
    assert _get(port, "/nope", "s3cret")[0] == 404
    raw = socket.create_connection(("127.0.0.1", port))
    raw.sendall(b"garbage\r\n\r\n")
    assert raw.recv(100).startswith(b"HTTP/1.1 400")
    raw.close()
    c.close()


def test_cron_fires_on_the_server_timer(auth_server: Any) -> None:
    c = Raw(auth_server.port)
    c.call({"cmd": "Auth", "token": "s3cret"})
    cron = c.call(
        {
            "cmd": "Cron",
            "name": "tick",
            "queue": "cq",
            "data": {"k": 1},
            "repeatEvery": 100,
            "maxLimit": 2,
            "preventOverlap": False,
        }
    )["cron"]
    assert cron["name"] == "tick" and cron["repeatEvery"] == 100 and cron["maxLimit"] == 2
    assert [x["name"] for x in c.call({"cmd": "CronList"})["crons"]] == ["tick"]
    deadline = time.monotonic() + 5
    while c.call({"cmd": "Count", "queue": "cq"})["count"] < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)
    assert c.call({"cmd": "Count", "queue": "cq"})["count"] == 2  # maxLimit
    assert c.call({"cmd": "CronGet", "name": "tick"})["cron"]["executions"] == 2
    assert c.call({"cmd": "CronDelete", "name": "tick"})["ok"]
    assert c.call({"cmd": "CronDelete", "name": "tick"})["error"] == "Cron job not found"
    bad = c.call({"cmd": "Cron", "name": "x", "queue": "cq", "schedule": "not cron"})
    assert bad["ok"] is False
    c.close()


def test_remote_backend_recovers_after_the_server_drops_it(served: Any) -> None:
    cfg = ServerConfig(port=0, http_port=None)
    with BackgroundServer(served, cfg) as srv:
        remote = RemoteBackend("127.0.0.1", srv.port, timeout=2.0, ping_interval=0.3)
        q = Queue("rq", remote)
        q.add("a")
        gen = remote.link.generation
        for conn in list(srv.server.conns):  # the server drops every connection
            srv._loop.call_soon_threadsafe(conn.close, "test")
        time.sleep(0.2)
        q.add("b")  # reconnects by itself
        assert q.counts()["waiting"] == 2 and remote.link.generation == gen + 1
        remote.close()
    with pytest.raises(BackendUnavailable):
        remote.queues()


def test_scrapes_are_served_from_a_cached_render(served: Any) -> None:
    cfg = ServerConfig(port=0, http_port=0, tokens=("t",), http_auth=False, scrape_cache=60)
    with BackgroundServer(served, cfg) as srv:
        port = srv.server.http_port
        first = [_get(port, "/metrics")[1] for _ in range(20)]
        stats = [_get(port, "/stats")[0] for _ in range(20)]
        assert stats == [200] * 20 and len(set(first)) == 1
        assert srv.server.ctx.scrapes.renders == 2  # one /metrics, one /stats, in 60 s
        assert _get(port, "/health")[0] == 200
