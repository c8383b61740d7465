"""Attacks on a live ``bunq serve`` (issue 12, items 2-4): nobody stalls the server.

Each test starts a real server process (memory engine with write-behind, a
token configured) on 127.0.0.1, attacks it with a bounded number of
connections for a bounded time, and checks that a legitimate client is still
served, within the issue's bounds plus a margin for a loaded CI machine:

- a 4 MiB frame before Auth delays another client by at most 50 ms (asserted: 150 ms);
- 1,000 unauthenticated connections parking partial frames grow RSS by at most 64 MiB;
- 8 clients that never read their replies leave another client's p99 under 50 ms
  (asserted: 150 ms).

The scenarios are the ones ``bench/attacks.py`` measures (docs/performance.md
has its figures); the hostile frame corpus, slowloris, the connection flood and
token guessing are here only. Every test failed against the server before the fix.
"""

from __future__ import annotations

import importlib.util
import random
import socket
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from server.test_fuzz import COMMANDS, KEYS, WEIRD

from bunq.protocol import encode

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_attacks", ROOT / "bench" / "attacks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_attacks"] = mod
    spec.loader.exec_module(mod)
    return mod


attacks = _bench()


@pytest.fixture(autouse=True, scope="module")
def _enough_sockets() -> None:
    """The floods open ~1,000 sockets from this process: lift a 1024 soft limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(8192, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


MARGIN_MS = 150.0  # the 50 ms bound, x3 for a shared, loaded CI machine


def _closed(sock: socket.socket, timeout: float = 3.0) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` (replies are read and dropped)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(1 << 16):
                return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return False


def _served(srv: Any) -> None:
    """A legitimate client authenticates, pushes, pulls and acknowledges."""
    c = attacks.Client(srv.port)
    try:
        assert c.call({"cmd": "PUSH", "queue": "legit", "data": 1})["ok"]
        got = c.call({"cmd": "PULL", "queue": "legit", "owner": "w", "timeout": 1000})
        assert got["ok"] and got["job"] is not None
        assert c.call({"cmd": "ACK", "id": got["job"]["id"], "token": got["token"]})["ok"]
    finally:
        c.close()
    assert srv.alive()


# ------------------------------------------------------------------- the done-when


def test_a_4mib_frame_before_auth_does_not_delay_others() -> None:
    with attacks.serve() as srv:
        got = attacks.pre_auth_frame(srv, attackers=4)
        _served(srv)
    assert got["during"]["errors"] == 0 and got["during"]["requests"] > 10
    assert got["delay_ms"] < MARGIN_MS, got


def test_a_4mib_frame_after_auth_is_decoded_without_stalling_others() -> None:
    with attacks.serve() as srv:
        got = attacks.authed_big_frame(srv)
        _served(srv)
    assert got["during"]["errors"] == 0
    assert got["during"]["p99_ms"] < MARGIN_MS, got


def test_1000_connections_parking_partial_frames_grow_rss_by_at_most_64mib() -> None:
    with attacks.serve() as srv:
        got = attacks.partial_frames(srv, conns=1000)
        _served(srv)
    assert got["rss_growth_mb"] <= 64, got
    assert got["legit_while_parked"]["errors"] == 0


def test_8_clients_that_never_read_leave_others_p99_under_the_bound() -> None:
    with attacks.serve() as srv:
        got = attacks.non_readers(srv, clients=8, seconds=4.0)
        _served(srv)
    assert got["during"]["errors"] == 0 and got["during"]["requests"] > 50
    assert got["during"]["p99_ms"] < MARGIN_MS, got
    assert got["rss_peak_mb"] < 512, got
    assert got["after"]["p50_ms"] < 20, got  # nothing left running once they are gone


# ------------------------------------------------------------------------- other attacks


def test_hostile_frame_corpus_before_and_after_auth() -> None:
    rng = random.Random(12)
    frames, cmds = [], []
    for cmd in COMMANDS:  # wrong-typed fields for every command (Auth: see the last test)
        for _ in range(3 if cmd != "Auth" else 0):
            msg: dict[str, Any] = {key: rng.choice(WEIRD) for key in rng.sample(KEYS, 4)}
            msg.update(cmd=cmd, reqId=len(frames))
            frames.append(encode(msg))
            cmds.append(cmd)
    deep = b"\x91" * 5000 + b"\xc0"  # 5,000 nested arrays
    hostile = [
        (0xFFFFFFFF).to_bytes(4, "big"),  # a 4 GiB declared length
        (16 << 20).to_bytes(4, "big") + b"\x90" * 1000,  # 16 MiB declared, a few bytes sent
        len(deep).to_bytes(4, "big") + deep,
        attacks.empty_arrays_frame(4 << 20),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        bytes(rng.randrange(256) for _ in range(3000)),
    ]
    with attacks.serve() as srv:
        # before Auth: each well-formed frame is refused, each hostile one closes the socket
        pre = socket.create_connection(("127.0.0.1", srv.port), 5)
        pre.sendall(b"".join(frames))
        replies = attacks.FrameDecoder(1 << 30)
        got: list[Any] = []
        pre.settimeout(5)
        while len(got) < len(frames):
            chunk = pre.recv(1 << 16)
            assert chunk, f"closed after {len(got)} of {len(frames)} replies"
            got += list(replies.feed(chunk))
        refused = [r for r in got if cmds[r["reqId"]] != "Hello"]
        assert refused and all(r["error"] == "Not authenticated" for r in refused)
        pre.close()
        for blob in hostile:
            s = socket.create_connection(("127.0.0.1", srv.port), 5)
            attacks._send_quietly(s, blob)
            assert _closed(s), blob[:16]
            s.close()
        # after Auth: every wrong-typed frame gets an answer, hostile bytes close the socket
        c = attacks.Client(srv.port)
        c.sock.sendall(b"".join(frames))
        answered = 0
        c.sock.settimeout(10)
        while answered < len(frames):
            chunk = c.sock.recv(1 << 16)
            assert chunk, f"closed after {answered} of {len(frames)} replies"
            answered += len(list(c.dec.feed(chunk)))
        c.close()
        for blob in hostile[:3] + hostile[4:]:
            a = attacks.Client(srv.port)
            attacks._send_quietly(a.sock, blob)
            assert _closed(a.sock), blob[:16]
            a.close()
        _served(srv)


def test_slowloris_connections_are_closed_and_others_served() -> None:
    flags = ("--auth-timeout", "1.5", "--idle-timeout", "1.5")
    with attacks.serve(*flags) as srv:
        slow = [socket.create_connection(("127.0.0.1", srv.port), 5) for _ in range(200)]
        hello = encode({"cmd": "Hello", "protocolVersion": 3})
        with attacks.probing(srv.port) as probe:
            t0 = time.monotonic()
            open_ = list(slow)
            i = 0
            while open_ and time.monotonic() - t0 < 8:  # one byte per connection per turn
                for s in list(open_):
                    try:
                        s.send(hello[i % len(hello) : i % len(hello) + 1])
                    except OSError:
                        open_.remove(s)
                i += 1
                time.sleep(0.1)
            elapsed = time.monotonic() - t0
        for s in slow:
            s.close()
        _served(srv)
    assert not open_, f"{len(open_)} dribbling connections still open after {elapsed:.1f} s"
    assert probe.figures()["errors"] == 0 and probe.figures()["p99_ms"] < MARGIN_MS


def test_a_connection_flood_above_the_cap_leaves_a_legitimate_client_served() -> None:
    flags = ("--max-connections", "400", "--max-unauthenticated", "100")
    with attacks.serve(*flags) as srv:
        with attacks.probing(srv.port) as probe:
            flood = []
            for _ in range(1000):
                try:
                    flood.append(socket.create_connection(("127.0.0.1", srv.port), 2))
                except OSError:
                    pass
            # A client connecting amid the burst can be evicted before its Auth is read
            # (the oldest unauthenticated connection makes room for each new one): it
            # reconnects, as bunq's and bunqueue's clients do, and gets in.
            for _ in range(5):
                newcomer = _connect_retrying(srv.port)
                assert newcomer.call({"cmd": "PUSH", "queue": "legit", "data": 1})["ok"]
                newcomer.close()
        stats = _stats(srv)
        for s in flood:
            s.close()
    assert probe.figures()["errors"] == 0
    assert stats["connections"] <= 400


def _connect_retrying(port: int, attempts: int = 5) -> Any:
    for attempt in range(attempts):
        try:
            return attacks.Client(port)
        except OSError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


def _stats(srv: Any) -> dict[str, Any]:
    import json
    import urllib.request

    req = urllib.request.Request(
        f"http://127.0.0.1:{srv.http_port}/stats",
        headers={"Authorization": f"Bearer {attacks.TOKEN}"},
    )
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


def test_guessing_tokens_closes_the_connection() -> None:
    with attacks.serve() as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), 5)
        guesses = b"".join(
            encode({"cmd": "Auth", "token": f"guess-{i}", "reqId": i}) for i in range(20_000)
        )
        t0 = time.monotonic()
        attacks._send_quietly(s, guesses)
        assert _closed(s, 10)
        elapsed = time.monotonic() - t0
        s.close()
        _served(srv)
    assert elapsed >= 0.8  # 5 guesses, each answered after 0.2 s; then closed


def test_unauthenticated_floods_of_small_frames_hold_little_memory() -> None:
    """1,000 unauthenticated connections each send 256 KiB of small pipelined frames:
    the server reads at most a pre-auth frame's worth of each at a time."""
    ping = encode({"cmd": "Ping", "reqId": 1})
    blob = ping * ((256 << 10) // len(ping))
    with attacks.serve() as srv:
        time.sleep(0.5)
        before = srv.rss_mb()
        socks = []
        for _ in range(1000):
            s = socket.create_connection(("127.0.0.1", srv.port), 5)
            s.setblocking(False)
            try:
                s.send(blob)  # as much as the kernel takes; the rest is dropped
            except BlockingIOError:
                pass
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            socks.append(s)
        time.sleep(1.0)
        growth = srv.rss_mb() - before
        _served(srv)
        for s in socks:
            s.close()
    assert growth <= 64, growth
