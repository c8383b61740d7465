"""Hostile input: the server never crashes, stays within bounded memory, keeps serving.

A real ``python -m bunq.server`` process is fuzzed over TCP with well over
100,000 frames: requests of every command with fields swapped for values of
the wrong type and size (the classes that stopped bunqueue's server, see
shared reference section 10), flipped and truncated bytes, lying lengths and
garbage, plus a Hypothesis search over field combinations. Between rounds a
well-formed client must still push, pull and acknowledge.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server.raw import Raw

from bunq.protocol import FrameDecoder, encode
from bunq.server.commands import load

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = sorted(load())
KEYS = [
    "queue",
    "name",
    "data",
    "id",
    "ids",
    "token",
    "tokens",
    "results",
    "count",
    "timeout",
    "owner",
    "lockTtl",
    "priority",
    "delay",
    "maxAttempts",
    "backoff",
    "jobId",
    "customId",
    "uniqueKey",
    "dedup",
    "dependsOn",
    "jobs",
    "groups",
    "items",
    "fence",
    "decision",
    "state",
    "offset",
    "limit",
    "grace",
    "limit",
    "force",
    "progress",
    "message",
    "error",
    "stack",
    "unrecoverable",
    "duration",
    "durations",
    "schedule",
    "repeatEvery",
    "op",
    "ns",
    "key",
    "value",
    "expected",
    "config",
    "limits",
    "capabilities",
    "reqId",
    "workerId",
    "leaseMs",
    "ttl",
    "lifo",
    "groupId",
    "result",
    "tags",
    "repeat",
]
WEIRD: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2**31,
    2**63 - 1,
    2**64 - 1,
    -(2**63),
    1.5,
    float("nan"),
    float("inf"),
    -0.0,
    "",
    "q",
    "x" * 300,
    "fz",
    "a.1",
    b"\x00\xff",
    [],
    [1, "a", None],
    ["fz"],
    {},
    {"a": {"b": [1, {}]}},
    {"type": "fixed"},
    [[1, 2, 3]] * 3,
    {"cmd": "PUSH"},
    list(range(50)),
]


def valid_corpus() -> list[dict[str, Any]]:
    q = {"queue": "fz"}
    return [
        {"cmd": "PUSH", **q, "name": "j", "data": {"n": 1}, "priority": 2, "delay": 5},
        {"cmd": "PUSHB", **q, "jobs": [{"name": "a", "data": 1}, {"data": {"name": "b"}}]},
        {"cmd": "PULLB", **q, "count": 3, "owner": "w", "lockTtl": 500, "timeout": 20},
        {"cmd": "PULL", **q, "timeout": 10},
        {"cmd": "ACK", "id": "x", "token": "t.1", "result": {"r": 1}},
        {"cmd": "ACKB", "ids": ["x", "y"], "tokens": ["t.1", "t.2"], "results": [1, 2]},
        {"cmd": "FAIL", "id": "x", "token": "t.1", "error": "e", "stack": ["a"]},
        {"cmd": "JobHeartbeatB", "ids": ["x"], "tokens": ["t.1"]},
        {"cmd": "ExtendLock", "id": "x", "token": "t.1", "duration": 1000},
        {"cmd": "GetJobs", **q, "state": ["waiting", "completed"], "limit": 5},
        {"cmd": "GetJobCounts", **q},
        {"cmd": "Clean", **q, "grace": 0, "limit": 5, "state": "completed"},
        {"cmd": "RateLimit", **q, "limit": 100},
        {"cmd": "Cron", "name": "fzc", **q, "repeatEvery": 1000, "data": {}},
        {"cmd": "BqAdd", "groups": [[["i1", "fz", "n", 1, {"priority": 1}]]]},
        {"cmd": "BqComplete", "items": [["i1", "t", 1, None]]},
        {"cmd": "BqFail", "fence": ["i1", "t", 1], "decision": ["retry", 0, "explicit_fail"]},
        {"cmd": "BqKv", "op": "put", "ns": "n", "key": "k", "value": b"v"},
        {"cmd": "BqLimits", **q, "limits": {"concurrency": 3}},
        {"cmd": "Dlq", **q, "count": 3},
        {"cmd": "Stats"},
        {"cmd": "Prometheus"},
    ] + [{"cmd": c, **q, "id": "x"} for c in COMMANDS]


def mutate(rng: random.Random, msg: dict[str, Any]) -> dict[str, Any]:
    m = dict(msg)
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.55 and m:
            m[rng.choice(list(m))] = rng.choice(WEIRD)
        elif roll < 0.75:
            m[rng.choice(KEYS)] = rng.choice(WEIRD + [rng.randint(-10, 10**6)])
        elif roll < 0.85 and m:
            m.pop(rng.choice(list(m)))
        else:
            m["cmd"] = rng.choice(COMMANDS + ["", "push", "A" * 100])
    return m


def garble(rng: random.Random, frame: bytes) -> bytes:
    roll = rng.random()
    if roll < 0.5:  # flip bytes in the body
        b = bytearray(frame)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(4, len(b)) if len(b) > 4 else 0
            b[i] = rng.randrange(256)
        return bytes(b)
    if roll < 0.7:
        return frame[: rng.randrange(len(frame))]  # truncated: the stream is now misaligned
    if roll < 0.85:
        return (len(frame) + rng.randint(1, 1 << 30)).to_bytes(4, "big") + frame[4:]  # a lie
    return os.urandom(rng.randint(1, 64))


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[str], int]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BUNQ_LOG_LEVEL": "CRITICAL"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bunq.server",
            "--port",
            "0",
            "--http-port",
            "-1",
            "--backend",
            f"sqlite:///{tmp / 'fuzz.db'}",
            "--idle-timeout",
            "2",
            "--max-frame",
            str(1 << 20),
        ],
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline().split("tcp 127.0.0.1:")[1].split(",")[0])
    yield proc, port
    proc.kill()
    proc.wait()


def well_formed_round_trip(port: int) -> None:
    c = Raw(port, timeout=5)
    try:
        r0 = c.call({"cmd": "PUSH", "queue": "healthy", "name": "h", "data": 1})
        assert r0["ok"], r0
        got = c.call({"cmd": "PULL", "queue": "healthy", "owner": "h", "timeout": 1000})
        assert got["ok"] and got["job"] is not None
        assert c.call({"cmd": "ACK", "id": got["job"]["id"], "token": got["token"]})["ok"]
    finally:
        c.close()


def fuzz_round(port: int, frames: list[bytes], tail: bytes) -> int:
    """Send frames (then an optional garbage tail); return how many replies came back."""
    s = socket.create_connection(("127.0.0.1", port), 2)
    dec, replies = FrameDecoder(1 << 30), 0
    try:
        s.settimeout(2.0)
        s.sendall(b"".join(frames) + tail)
        while replies < len(frames):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            replies += sum(1 for _ in dec.feed(chunk))
    except OSError:
        pass  # closed by the server: expected after garbage
    finally:
        s.close()
    return replies


def test_mutation_fuzz_100k_frames(fuzzed: tuple[subprocess.Popen[str], int]) -> None:
    proc, port = fuzzed
    rng = random.Random(20261129)
    corpus = valid_corpus()
    sent = answered = rounds = baseline = 0
    t0 = time.monotonic()
    while answered < 100_000:
        frames = [
            encode({**mutate(rng, rng.choice(corpus)), "reqId": sent + i}) for i in range(500)
        ]
        sent += len(frames)
        tail = garble(rng, frames[-1]) if rng.random() < 0.5 else b""
        answered += fuzz_round(port, frames, tail)
        rounds += 1
        if rounds % 20 == 0:
            assert proc.poll() is None, "the server died"
            well_formed_round_trip(port)
        if rounds == 20:
            baseline = rss_kb(proc.pid)
        assert time.monotonic() - t0 < 60, f"{answered} answered frames after 60 s"
    assert proc.poll() is None
    well_formed_round_trip(port)
    growth_mb = (rss_kb(proc.pid) - baseline) / 1024
    assert growth_mb < 96, f"RSS grew {growth_mb:.0f} MiB after warm-up"
    assert answered >= 100_000 and rounds >= 200


def test_hostile_classes_from_the_reference(fuzzed: tuple[subprocess.Popen[str], int]) -> None:
    proc, port = fuzzed
    c = Raw(port)
    for msg in (
        {"cmd": "PULL", "queue": 12345, "timeout": 500},  # numeric queue + long poll
        {"cmd": "PUSH", "queue": ["a", "b"], "data": 1},  # a list as queue name
        {"cmd": "PUSH", "queue": "fz", "data": 1, "tags": [{"x": object.__name__}]},
        {"cmd": "PULL", "queue": "fz", "lockTtl": 2**64 - 1},
        {"cmd": "ACK", "id": 42, "token": "t"},  # integer job id
        {"cmd": "Auth", "token": ["t"]},
    ):
        assert c.call(msg)["ok"] is False, msg
    big = msgpack.packb({"cmd": "PUSH", "queue": "fz", "data": "x" * (2 << 20)})
    try:  # over --max-frame: refused from the length prefix, before the body arrives
        c.send(len(big).to_bytes(4, "big") + big)
        assert c.closed_by_server()
    except (ConnectionResetError, BrokenPipeError):
        pass  # closed while the body was still being sent
    assert proc.poll() is None
    well_formed_round_trip(port)


_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**64) + 1, 2**64 - 1)
    | st.floats()
    | st.text(max_size=30)
    | st.binary(max_size=16)
)
_value = st.recursive(
    _scalar,
    lambda v: st.lists(v, max_size=5) | st.dictionaries(st.text(max_size=6), v, max_size=4),
    max_leaves=12,
)
_fields = st.dictionaries(
    st.sampled_from([k for k in KEYS if k not in ("timeout", "reqId")]), _value, max_size=6
)


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    cmd=st.sampled_from(COMMANDS), fields=_fields, timeout=st.none() | st.integers(0, 30) | _scalar
)
def test_hypothesis_any_fields_get_an_answer(
    fuzzed: tuple[subprocess.Popen[str], int], cmd: str, fields: dict[str, Any], timeout: Any
) -> None:
    proc, port = fuzzed
    conn = _conn(port)
    msg = {**fields, "cmd": cmd, "timeout": timeout}
    reply = conn.call(msg, timeout=10)
    assert isinstance(reply, dict) and reply["ok"] in (True, False)
    if reply["ok"] is False:
        assert isinstance(reply["error"], str) and reply["code"]


_CONN: dict[int, Raw] = {}


def _conn(port: int) -> Raw:
    if port not in _CONN:
        _CONN[port] = Raw(port)
    return _CONN[port]
