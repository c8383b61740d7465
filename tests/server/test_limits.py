"""Connection limits of bunq serve (issue 12, items 2-4): each failed before the fix."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from server.raw import Raw

from bunq.protocol import encode
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig


def _server(served: Any, **kw: Any) -> BackgroundServer:
    cfg: dict[str, Any] = {"port": 0, "http_port": None, "tokens": ("s3cret",), **kw}
    return BackgroundServer(served, ServerConfig(**cfg)).start()


@pytest.fixture
def limited(served: Any, request: pytest.FixtureRequest) -> Iterator[BackgroundServer]:
    srv = _server(served, **getattr(request, "param", {}))
    yield srv
    srv.stop()


def _authed(port: int) -> Raw:
    c = Raw(port)
    assert c.call({"cmd": "Auth", "token": "s3cret"})["ok"]
    return c


def test_a_frame_over_the_pre_auth_cap_closes_the_connection(limited: BackgroundServer) -> None:
    c = Raw(limited.port)
    c.send(encode({"cmd": "Hello", "pad": "x" * 5000}))  # > 4 KiB before Auth
    assert c.closed_by_server()
    ok = _authed(limited.port)  # after Auth the full --max-frame applies
    assert ok.call({"cmd": "PUSH", "queue": "big", "data": "x" * 100_000})["ok"]
    ok.close()


def test_before_auth_frames_are_served_one_at_a_time_after_the_auth(
    limited: BackgroundServer,
) -> None:
    c = Raw(limited.port)
    # Auth and a big PUSH in one write: the PUSH is read with the post-auth cap
    c.send(
        encode({"cmd": "Auth", "token": "s3cret", "reqId": "a"})
        + encode({"cmd": "PUSH", "queue": "q", "data": "x" * 50_000, "reqId": "p"})
    )
    replies = {r["reqId"]: r for r in (c.recv(), c.recv())}
    assert replies["a"]["ok"] and replies["p"]["ok"]
    c.close()


@pytest.mark.parametrize("limited", [{"idle_timeout": 0.6}], indirect=True)
def test_refused_requests_do_not_keep_a_connection_open(limited: BackgroundServer) -> None:
    c = Raw(limited.port)
    t0 = time.monotonic()
    with pytest.raises(ConnectionError):
        while time.monotonic() - t0 < 5:
            assert c.call({"cmd": "Ping"})["error"] == "Not authenticated"
            time.sleep(0.1)
    assert time.monotonic() - t0 < 3.5  # the idle timeout (0.6 s) + the timer's period


@pytest.mark.parametrize("limited", [{"auth_timeout": 0.6}], indirect=True)
def test_a_connection_must_authenticate_in_time(limited: BackgroundServer) -> None:
    slow = Raw(limited.port)
    ok = _authed(limited.port)
    t0 = time.monotonic()
    with pytest.raises(ConnectionError):
        while time.monotonic() - t0 < 5:
            slow.call({"cmd": "Hello", "protocolVersion": 3})  # answered, but no Auth
            time.sleep(0.1)
    assert time.monotonic() - t0 < 3.5
    assert ok.call({"cmd": "Ping"})["ok"]  # authenticated: no deadline
    ok.close()


@pytest.mark.parametrize(
    "limited", [{"max_auth_failures": 3, "auth_fail_delay": 0.1}], indirect=True
)
def test_guessing_tokens_is_slow_and_closes_the_connection(limited: BackgroundServer) -> None:
    c = Raw(limited.port)
    t0 = time.monotonic()
    c.send(b"".join(encode({"cmd": "Auth", "token": f"guess{i}", "reqId": i}) for i in range(50)))
    answered = []
    with pytest.raises(ConnectionError):
        while True:
            answered.append(c.recv(5))
    assert [r["code"] for r in answered] == ["auth"] * 3  # 3 guesses, then closed
    assert time.monotonic() - t0 >= 0.3  # each wrong token answered after 0.1 s
    assert limited.server.ctx.metrics.auth_failures._value.get() == 3
    ok = _authed(limited.port)  # the right token still works on a new connection
    ok.close()


@pytest.mark.parametrize("limited", [{"max_connections": 6}], indirect=True)
def test_connections_past_the_cap_are_closed_and_others_still_served(
    limited: BackgroundServer,
) -> None:
    first = _authed(limited.port)
    flood = [Raw(limited.port) for _ in range(10)]
    time.sleep(0.3)
    assert len(limited.server.conns) == 6
    closed = sum(f.closed_by_server(0.5) for f in flood)
    assert closed >= 5
    assert first.call({"cmd": "PUSH", "queue": "q", "data": 1})["ok"]
    for f in [first, *flood]:
        f.close()


@pytest.mark.parametrize("limited", [{"max_unauthenticated": 3}], indirect=True)
def test_unauthenticated_flood_evicts_the_oldest_so_a_new_client_gets_in(
    limited: BackgroundServer,
) -> None:
    flood = [Raw(limited.port) for _ in range(3)]
    time.sleep(0.2)
    newcomer = _authed(limited.port)  # evicts flood[0] to get in, then authenticates
    assert newcomer.call({"cmd": "Ping"})["ok"]
    assert flood[0].closed_by_server(2)
    assert len(limited.server.unauthed) <= 3
    for f in [newcomer, *flood]:
        f.close()


def test_long_polls_are_parked_without_polling_the_backend(limited: BackgroundServer) -> None:
    backend = limited.server.ctx.backend
    calls = [0]
    lease = backend.lease

    def counted(*args: Any, **kw: Any) -> Any:
        calls[0] += 1
        return lease(*args, **kw)

    backend.lease = counted  # type: ignore[method-assign]
    try:
        pollers = [_authed(limited.port) for _ in range(4)]
        for i, p in enumerate(pollers):  # 200 long polls on one empty queue
            p.send(
                b"".join(
                    encode({"cmd": "PULL", "queue": "idle", "timeout": 20_000, "reqId": f"{i}.{j}"})
                    for j in range(50)
                )
            )
        time.sleep(0.5)
        calls[0] = 0
        time.sleep(1.0)
        assert calls[0] <= 30  # ~10 probes/s for the queue, not 200 waiters x 10/s
        pusher = _authed(limited.port)
        jobs = [{"data": i} for i in range(5)]
        assert pusher.call({"cmd": "PUSHB", "queue": "idle", "jobs": jobs})["ok"]
        found, deadline = 0, time.monotonic() + 10
        while found < 5 and time.monotonic() < deadline:
            for p in pollers:
                try:
                    found += bool(p.recv(0.05).get("job"))
                except TimeoutError:
                    pass
        assert found == 5  # each added job woke a parked poll
        for c in [pusher, *pollers]:
            c.close()
    finally:
        backend.lease = lease  # type: ignore[method-assign]


@pytest.mark.parametrize("limited", [{"max_unsent": 64 << 10, "tokens": ()}], indirect=True)
def test_a_client_that_does_not_read_gets_no_more_work_done(limited: BackgroundServer) -> None:
    c = Raw(limited.port)
    for _ in range(3):
        jobs = [{"data": {"pad": "x" * 100}} for _ in range(100)]
        assert c.call({"cmd": "PUSHB", "queue": "big", "jobs": jobs})["ok"]
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    frame = encode({"cmd": "GetJobs", "queue": "big", "state": "waiting", "limit": 300})
    c.sock.settimeout(0.2)
    sent = 0
    t0 = time.monotonic()
    while sent < 5000 and time.monotonic() - t0 < 3:
        try:
            c.sock.sendall(frame * 50)
            sent += 50
        except TimeoutError:
            break
    metrics = limited.server.ctx.metrics
    served, deadline = -1, time.monotonic() + 20
    while metrics.commands != served and time.monotonic() < deadline:
        served = metrics.commands
        time.sleep(0.7)
    assert metrics.commands == served  # it stopped being served...
    assert served - 4 < max(sent // 4, 20), (served, sent)  # ...long before its requests ran out
    other = Raw(limited.port)
    t1 = time.perf_counter()
    assert other.call({"cmd": "Ping"})["ok"]
    assert time.perf_counter() - t1 < 1.0
    other.close()
    c.close()


def test_every_limit_has_a_flag_a_setting_and_a_default() -> None:
    from bunq.errors import ConfigError
    from bunq.server.cli import LIMITS, config_from, parser
    from bunq.settings import Settings

    defaults = ServerConfig()
    settings = Settings.from_env({})
    cfg = config_from(parser(settings).parse_args([]), settings)
    for flag, name, _, _ in LIMITS:
        assert getattr(cfg, name) == getattr(defaults, name) == getattr(settings, name), flag
    env = Settings.from_env({"BUNQ_MAX_CONNECTIONS": "7", "BUNQ_HTTP_AUTH": "off"})
    cfg = config_from(parser(env).parse_args(["--auth-fail-delay", "0.5"]), env)
    assert cfg.max_connections == 7 and cfg.auth_fail_delay == 0.5 and cfg.http_auth is False
    with pytest.raises(ConfigError):
        config_from(parser(settings).parse_args(["--max-unsent", "-1"]), settings)


def test_max_payload_flag_reaches_the_backends_that_hold_payloads(tmp_path: Any) -> None:
    from bunq.backends import connect
    from bunq.errors import ConfigError
    from bunq.server.cli import parser, payload_option
    from bunq.settings import Settings
    from bunq.validate import DEFAULT_MAX_PAYLOAD

    settings = Settings.from_env({"BUNQ_MAX_PAYLOAD": "2048"})
    assert parser(settings).parse_args([]).max_payload == 2048
    n = parser(settings).parse_args(["--max-payload", "4096"]).max_payload
    url = f"sqlite:///{tmp_path / 'p.db'}"
    for u in (url, "memory://"):
        backend = connect(u, **payload_option(u, n))
        assert backend.max_payload == 4096  # type: ignore[attr-defined]
        backend.close()
    assert payload_option("sqs://x", DEFAULT_MAX_PAYLOAD) == {}  # bounded by its queue
    with pytest.raises(ConfigError):
        payload_option("sqs://x", n)
