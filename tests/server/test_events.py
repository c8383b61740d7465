"""Server-pushed job events: SubscribeEvents / UnsubscribeEvents and the frames they bring."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from server.raw import Raw
from server.remote_factory import QUIET, behind

from bunq.backends.remote import RemoteBackend
from bunq.job import FailureReason, JobOptions, NewJob, Settle
from bunq.policy import FailDecision
from bunq.protocol import FrameDecoder
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig


def events_until_reply(sub: Raw) -> list[dict[str, Any]]:
    """Events already sent to ``sub``: a Ping's reply comes after every one of them."""
    rid = sub.send({"cmd": "Ping"})
    out = []
    while True:
        frame = sub.recv()
        if frame.get("reqId") == rid:
            return out
        assert frame.get("type") == "event" and "reqId" not in frame, frame
        out.append(frame["event"])


def brief(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["eventType"], e["jobId"]) for e in events]


def subscriber(port: int, queue: str) -> Raw:
    sub = Raw(port)
    assert sub.call({"cmd": "SubscribeEvents", "queue": queue}) == {"ok": True, "reqId": "r1"}
    return sub


def test_lifecycle_frames_in_order(server: Any) -> None:
    sub = subscriber(server.port, "ev")
    c = Raw(server.port)
    once = {"cmd": "PUSH", "queue": "ev", "maxAttempts": 1}
    a = c.call({**once, "name": "a", "data": {"n": 1}})["id"]
    b, d = c.call(
        {
            "cmd": "PUSHB",
            "queue": "ev",
            "jobs": [{"name": "b", "data": {"n": 2}}, {"name": "d", "data": {}, "delay": 60_000}],
        }
    )["ids"]
    pulled = c.call({"cmd": "PULLB", "queue": "ev", "count": 5, "owner": "w"})
    assert [j["id"] for j in pulled["jobs"]] == [a, b]
    ta, tb = pulled["tokens"]
    assert c.call({"cmd": "Progress", "id": a, "progress": 50, "message": "half"})["ok"]
    assert c.call({"cmd": "ACK", "id": a, "token": ta, "result": {"x": 1}})["ok"]
    assert c.call({"cmd": "FAIL", "id": b, "token": tb, "error": "boom", "stack": ["at f"]})["ok"]
    e = c.call({**once, "name": "e", "data": None})["id"]
    got = c.call({"cmd": "PULL", "queue": "ev", "owner": "w"})
    assert c.call({"cmd": "FAIL", "id": e, "token": got["token"], "error": "bad"})["ok"]

    events = events_until_reply(sub)
    assert brief(events) == [
        ("pushed", a),
        ("pushed", b),
        ("pushed", d),
        ("delayed", d),
        ("pulled", a),
        ("pulled", b),
        ("progress", a),
        ("completed", a),
        ("failed", b),
        ("retried", b),
        ("pushed", e),
        ("pulled", e),
        ("failed", e),
    ]
    for ev in events:
        assert ev["queue"] == "ev" and isinstance(ev["timestamp"], float)
        assert abs(ev["timestamp"] - time.time() * 1000) < 60_000
    by = {(ev["eventType"], ev["jobId"]): ev for ev in events}
    assert 59_000 < by["delayed", d]["delay"] <= 60_000
    assert by["progress", a]["progress"] == 50
    assert by["progress", a]["data"] == {"progress": 50, "message": "half"}
    assert by["completed", a]["data"] == {"x": 1}
    assert by["failed", b]["error"] == "boom" and by["failed", b]["data"] == {"n": 2}
    assert by["failed", b]["terminal"] is False and by["retried", b]["prev"] == "failed"
    assert by["failed", e]["terminal"] is True and by["failed", e]["error"] == "bad"
    assert c.inbox == []  # the producer, not subscribed, got no event frame
    c.close()
    sub.close()


def test_batches_queue_events_and_duplicates(server: Any) -> None:
    sub = subscriber(server.port, "qe")
    c = Raw(server.port)
    three = [{"name": "j", "data": i} for i in range(3)]
    ids = c.call({"cmd": "PUSHB", "queue": "qe", "jobs": three})["ids"]
    pulled = c.call({"cmd": "PULLB", "queue": "qe", "count": 3, "owner": "w"})
    assert c.call(
        {"cmd": "ACKB", "ids": ids, "tokens": pulled["tokens"], "results": [1, None, "three"]}
    )["ok"]
    first = c.call({"cmd": "PUSH", "queue": "qe", "name": "x", "data": 1, "jobId": "custom-1"})
    time.sleep(0.01)
    again = c.call({"cmd": "PUSH", "queue": "qe", "name": "x", "data": 1, "jobId": "custom-1"})
    assert first["id"] == again["id"]
    for cmd in ("Pause", "Resume", "Drain"):
        assert c.call({"cmd": cmd, "queue": "qe"})["ok"]
    cleaned = c.call({"cmd": "Clean", "queue": "qe", "grace": 0, "state": "completed"})
    assert sorted(cleaned["ids"]) == sorted(ids)

    events = events_until_reply(sub)
    jid = first["id"]
    assert brief(events[:9]) == [("pushed", i) for i in ids] + [("pulled", i) for i in ids] + [
        ("completed", i) for i in ids
    ]
    assert [ev["data"] for ev in events[6:9]] == [1, None, "three"]
    assert brief(events[9:14]) == [
        ("pushed", jid),
        ("duplicated", jid),
        ("paused", ""),
        ("resumed", ""),
        ("drained", ""),
    ]
    assert sorted(brief(events[14:])) == sorted(("removed", i) for i in ids)
    assert {ev["prev"] for ev in events[14:]} == {"completed"}
    c.close()
    sub.close()


def test_unsubscribe_resubscribe_and_other_queues(server: Any) -> None:
    sub = subscriber(server.port, "one")
    c = Raw(server.port)
    c.call({"cmd": "PUSH", "queue": "two", "name": "j", "data": 1})
    in_one = c.call({"cmd": "PUSH", "queue": "one", "name": "j", "data": 1})["id"]
    assert brief(events_until_reply(sub)) == [("pushed", in_one)]
    assert sub.call({"cmd": "UnsubscribeEvents"})["ok"]
    c.call({"cmd": "PUSH", "queue": "one", "name": "j", "data": 1})
    assert events_until_reply(sub) == []
    assert sub.call({"cmd": "SubscribeEvents", "queue": "one"})["ok"]
    assert sub.call({"cmd": "SubscribeEvents", "queue": "two"})["ok"]  # replaces "one"
    c.call({"cmd": "PUSH", "queue": "one", "name": "j", "data": 1})
    in_two = c.call({"cmd": "PUSH", "queue": "two", "name": "j", "data": 1})["id"]
    assert brief(events_until_reply(sub)) == [("pushed", in_two)]
    bad = sub.call({"cmd": "SubscribeEvents", "queue": 42})
    assert bad["ok"] is False
    assert len(server.server.ctx.events) == 1
    sub.close()
    deadline = time.monotonic() + 2
    while len(server.server.ctx.events) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(server.server.ctx.events) == 0  # a closed connection leaves the hub
    c.close()


def _tight(tmp_path: Any, idle_timeout: float) -> Iterator[BackgroundServer]:
    backend = behind(tmp_path, "memory")
    cfg = ServerConfig(port=0, http_port=None, event_buffer=64 << 10, idle_timeout=idle_timeout,
                       **QUIET)  # fmt: skip
    with BackgroundServer(backend, cfg) as srv:
        yield srv
    backend.close()


@pytest.fixture
def tight(tmp_path: Any) -> Iterator[BackgroundServer]:
    """A memory-engine server whose subscribers may lag 64 KiB; idle connections close at 0.5 s."""
    yield from _tight(tmp_path, 0.5)


@pytest.fixture
def flood(tmp_path: Any) -> Iterator[BackgroundServer]:
    """As ``tight``, but a slow PUSHB on a loaded machine never makes a bystander idle."""
    yield from _tight(tmp_path, 60.0)


def _metric(srv: BackgroundServer, name: str) -> float:
    for line in srv.server.ctx.metrics.text().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(name)


def test_a_subscriber_that_never_reads_is_dropped_not_waited_for(flood: Any) -> None:
    tight = flood
    lazy = socket.socket()
    lazy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    lazy.connect(("127.0.0.1", tight.port))
    sub = Raw.__new__(Raw)  # a Raw over the small-window socket
    sub.sock, sub.dec, sub.inbox, sub.n = lazy, FrameDecoder(1 << 30), [], 0
    assert sub.call({"cmd": "SubscribeEvents", "queue": "flood"})["ok"]
    c, other = Raw(tight.port), Raw(tight.port)
    jobs = [{"name": "j", "data": {"pad": "x" * 100}} for _ in range(1000)]
    conn = next(x for x in tight.server.conns if tight.server.ctx.events.queue_of(x) == "flood")
    peak, batches, t0 = 0, 0, time.monotonic()
    while len(tight.server.ctx.events) and batches < 300:
        assert c.call({"cmd": "PUSHB", "queue": "flood", "jobs": jobs})["ok"]
        batches += 1
        if conn.transport is not None and not conn.closed:
            peak = max(peak, conn.transport.get_write_buffer_size())
        started = time.monotonic()
        assert other.call({"cmd": "Ping"})["ok"]  # everyone else is served meanwhile
        assert time.monotonic() - started < 1.0
    assert len(tight.server.ctx.events) == 0, f"still subscribed after {batches} batches"
    # at most the bound plus one batch of ~150-byte frames was ever held for it
    assert peak <= (64 << 10) + 1000 * 200, peak
    assert _metric(tight, "bunq_event_subscribers_dropped_total") == 1
    assert _metric(tight, "bunq_event_subscribers") == 0
    assert _metric(tight, "bunq_events_sent_total") > 0
    assert sub.closed_by_server(5)
    assert c.call({"cmd": "Ping"})["ok"] and time.monotonic() - t0 < 15
    c.close()
    other.close()


def test_a_quiet_subscriber_is_not_closed_as_idle(tight: Any) -> None:
    sub = subscriber(tight.port, "calm")
    idle = Raw(tight.port)
    time.sleep(1.2)  # past idle_timeout: the idle plain connection goes, the subscriber stays
    assert idle.closed_by_server(2)
    c = Raw(tight.port)
    jid = c.call({"cmd": "PUSH", "queue": "calm", "name": "j", "data": 1})["id"]
    assert brief(events_until_reply(sub)) == [("pushed", jid)]
    c.close()
    sub.close()


def test_bunq_client_commands_emit_the_same_events(server: Any) -> None:
    """bunq's own client (Bq* commands): add, lease, complete, and a DelayedError."""
    sub = subscriber(server.port, "bq")
    remote = RemoteBackend.from_url(f"bunq://127.0.0.1:{server.port}")
    a, b = remote.add([NewJob("bq", "a", 1, JobOptions()), NewJob("bq", "b", 2, JobOptions())])
    la, lb = remote.lease("bq", 2, 30_000, "w")
    assert remote.complete(la, {"ok": True}) is Settle.OK
    later = FailDecision("delay", remote.clock() + 5_000, FailureReason.EXPLICIT_FAIL)
    assert remote.fail(lb, "not yet", later) is Settle.OK
    events = events_until_reply(sub)
    assert brief(events) == [
        ("pushed", a.id),
        ("pushed", b.id),
        ("pulled", a.id),
        ("pulled", b.id),
        ("completed", a.id),
        ("delayed", b.id),
    ]
    assert events[4]["data"] == {"ok": True} and 4_000 < events[5]["delay"] <= 5_100
    remote.close()
    sub.close()
