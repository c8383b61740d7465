"""The server over real sockets: framing edge cases, errors, pipelining, leases."""

from __future__ import annotations

import threading
import time
from typing import Any

import msgpack
import pytest
from server.raw import Raw

from bunq.protocol import encode


def test_unknown_commands_and_bad_fields_keep_the_connection(server: Any) -> None:
    c = Raw(server.port)
    assert c.call({"cmd": "Nope"})["error"] == "Unknown command: Nope"
    bad = [
        {"cmd": "PUSH", "queue": 5, "data": 1},
        {"cmd": "PUSH", "queue": ["q"], "data": 1},
        {"cmd": "PUSH", "queue": "q", "maxAttempts": "3"},
        {"cmd": "PUSH", "queue": "q", "tags": ["a"]},
        {"cmd": "PULLB", "queue": "q", "count": 5000},
        {"cmd": "PULL", "queue": 7, "timeout": 100},
        {"cmd": "PULL", "queue": "q", "lockTtl": 2**64 - 1},
        {"cmd": "ACK", "id": 12, "token": "x"},
        {"cmd": "ACKB", "ids": ["a"], "tokens": []},
        {"cmd": "GetJobs", "queue": "q", "state": {"x": 1}},
    ]
    for msg in bad:
        reply = c.call(msg)
        assert reply["ok"] is False and reply["error"] and reply["code"], (msg, reply)
    reply = c.call({"cmd": "PUSH", "queue": "q", "name": "j", "data": {"x": 1}})
    assert reply["ok"] is True and reply["id"]
    c.close()


def test_non_map_frame_gets_an_error_and_the_connection_lives(server: Any) -> None:
    c = Raw(server.port)
    body = msgpack.packb([1, 2, 3])
    c.send(len(body).to_bytes(4, "big") + body)
    assert c.recv()["ok"] is False
    assert c.call({"cmd": "Ping"})["data"]["pong"] is True
    c.close()


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff\xff\xff\xff",  # length over the cap
        (3).to_bytes(4, "big") + b"\xc1\xc1\xc1",  # not msgpack
        (9).to_bytes(4, "big") + msgpack.packb({"reqId": msgpack.ExtType(7, b"abc")}),
    ],
)
def test_garbage_closes_that_connection_only(server: Any, garbage: bytes) -> None:
    other = Raw(server.port)
    c = Raw(server.port)
    c.send(garbage)
    assert c.closed_by_server()
    assert other.call({"cmd": "Ping"})["ok"] is True
    other.close()


def test_req_ids_are_echoed_and_replies_pipelined(server: Any) -> None:
    c = Raw(server.port)
    ids: list[Any] = ["a", 7, 2.5, None, True, "x" * 300]
    for rid in ids:
        c.send({"cmd": "Ping", "reqId": rid})
    assert sorted(map(repr, (c.recv()["reqId"] for _ in ids))) == sorted(map(repr, ids))
    c.send({"cmd": "Ping", "reqId": {"not": "plain"}})
    assert c.recv()["reqId"] is None
    frames = b"".join(
        encode({"cmd": "PUSH", "queue": "pipe", "name": "j", "data": i, "reqId": f"p{i}"})
        for i in range(300)
    )
    c.send(frames)  # 300 requests in one write: more than max_inflight
    got = {c.recv()["reqId"] for _ in range(300)}
    assert got == {f"p{i}" for i in range(300)}
    assert c.call({"cmd": "Count", "queue": "pipe"})["count"] == 300
    c.close()


def test_ack_needs_the_right_token_and_a_late_ack_is_reported(server: Any) -> None:
    c = Raw(server.port)
    c.call({"cmd": "PUSH", "queue": "q", "name": "j", "data": 1})
    pulled = c.call({"cmd": "PULL", "queue": "q", "owner": "w1"})
    job, token = pulled["job"], pulled["token"]
    assert job["name"] == "j" and job["data"] == 1 and token
    forged = c.call({"cmd": "ACK", "id": job["id"], "token": "forged"})
    assert forged["ok"] is False and forged["code"] == "lease_lost"
    missing = c.call({"cmd": "ACK", "id": job["id"]})  # locked (owner): the token is required
    assert missing["ok"] is False
    assert c.call({"cmd": "ACK", "id": job["id"], "token": token, "result": {"r": 1}}) == {
        "ok": True,
        "reqId": "r5",
    }
    late = c.call({"cmd": "ACK", "id": job["id"], "token": token})
    assert late["ok"] is True and late["data"] == {"applied": False, "reason": "already-finalized"}
    assert c.call({"cmd": "GetResult", "id": job["id"]})["result"] == {"r": 1}
    c.close()


def test_ackb_reports_ignored_positions(server: Any) -> None:
    c = Raw(server.port)
    c.call({"cmd": "PUSHB", "queue": "q", "jobs": [{"data": i} for i in range(3)]})
    pulled = c.call({"cmd": "PULLB", "queue": "q", "count": 3, "owner": "w"})
    ids, tokens = [j["id"] for j in pulled["jobs"]], pulled["tokens"]
    assert c.call({"cmd": "ACK", "id": ids[1], "token": tokens[1]})["ok"]
    reply = c.call({"cmd": "ACKB", "ids": ids, "tokens": tokens, "results": [None] * 3})
    assert reply["data"] == {"ignoredIds": [ids[1]], "ignoredIndices": [1]}
    assert c.call({"cmd": "GetJobCounts", "queue": "q"})["counts"]["completed"] == 3
    c.close()


def test_fail_retries_then_dead_letters(server: Any) -> None:
    c = Raw(server.port)
    jid = c.call({"cmd": "PUSH", "queue": "q", "data": 1, "maxAttempts": 2, "backoff": 0})["id"]
    for _ in range(2):
        p = c.call({"cmd": "PULL", "queue": "q", "owner": "w", "timeout": 2000})
        assert p["job"]["id"] == jid
        reply = c.call(
            {
                "cmd": "FAIL",
                "id": jid,
                "token": p["token"],
                "error": "bad",
                "stack": ["at line 1", 5],
            }
        )
        assert reply["ok"] is True
    assert c.call({"cmd": "GetState", "id": jid})["state"] == "failed"
    dlq = c.call({"cmd": "Dlq", "queue": "q"})
    assert dlq["jobs"][0]["id"] == jid and dlq["entries"][0]["error"] == "bad"
    assert dlq["jobs"][0]["stacktrace"] == ["at line 1"]  # strings only, kept apart
    assert c.call({"cmd": "RetryDlq", "queue": "q"})["count"] == 1
    c.close()


def test_long_poll_wakes_on_push_and_heartbeats_renew(server: Any) -> None:
    c, producer = Raw(server.port), Raw(server.port)
    t0 = time.monotonic()
    rid = c.send({"cmd": "PULLB", "queue": "lp", "count": 5, "timeout": 5000, "owner": "w"})
    threading.Timer(0.2, lambda: producer.call({"cmd": "PUSH", "queue": "lp", "data": 1})).start()
    reply = c.recv(6)
    assert reply["reqId"] == rid and len(reply["jobs"]) == 1
    assert 0.15 < time.monotonic() - t0 < 1.0
    job, token = reply["jobs"][0], reply["tokens"][0]
    beat = c.call({"cmd": "JobHeartbeatB", "ids": [job["id"], "nope"], "tokens": [token, "x"]})
    assert beat["data"] == {"ok": True, "count": 1}
    assert c.call({"cmd": "ExtendLock", "id": job["id"], "token": token, "duration": 5000})["ok"]
    assert c.call({"cmd": "JobHeartbeat", "id": job["id"], "token": "bad"})["ok"] is False
    empty = c.call({"cmd": "PULL", "queue": "lp", "timeout": 100})
    assert empty["job"] is None and empty["token"] is None
    c.close()
    producer.close()


def test_a_client_gone_mid_poll_loses_no_job(server: Any) -> None:
    c = Raw(server.port)
    c.send({"cmd": "PULLB", "queue": "gone", "count": 5, "timeout": 3000, "owner": "w"})
    time.sleep(0.1)
    c.close()
    p = Raw(server.port)
    p.call({"cmd": "PUSH", "queue": "gone", "data": 1})
    time.sleep(0.3)
    counts = p.call({"cmd": "GetJobCounts", "queue": "gone"})["counts"]
    assert counts["waiting"] == 1 and counts["active"] == 0
    p.close()


def test_queue_control_and_queries(server: Any) -> None:
    c = Raw(server.port)
    jid = c.call({"cmd": "PUSH", "queue": "ctl", "name": "n", "data": {"name": "kept"}})["id"]
    job = c.call({"cmd": "GetJob", "id": jid})["job"]
    assert job["name"] == "n" and job["data"] == {"name": "kept"} and job["state"] == "waiting"
    legacy = c.call({"cmd": "PUSH", "queue": "ctl", "data": {"name": "legacy", "x": 1}})["id"]
    job = c.call({"cmd": "GetJob", "id": legacy})["job"]
    assert job["name"] == "legacy" and job["data"] == {"x": 1}
    assert c.call({"cmd": "GetJob", "id": "nope"})["error"].startswith("Job not found")
    assert c.call({"cmd": "GetState", "id": "nope"})["state"] == "unknown"
    assert c.call({"cmd": "Pause", "queue": "ctl"})["ok"]
    assert c.call({"cmd": "IsPaused", "queue": "ctl"})["paused"] is True
    assert c.call({"cmd": "GetState", "id": jid})["state"] == "paused"
    assert c.call({"cmd": "Resume", "queue": "ctl"})["ok"]
    assert len(c.call({"cmd": "GetJobs", "queue": "ctl", "state": ["waiting"]})["jobs"]) == 2
    assert c.call({"cmd": "Progress", "id": jid, "progress": 40})["ok"]
    assert c.call({"cmd": "AddLog", "id": jid, "message": "hi"})["data"] == {"added": True}
    assert c.call({"cmd": "GetLogs", "id": jid})["data"]["logs"][0]["message"] == "hi"
    assert c.call({"cmd": "RateLimit", "queue": "ctl", "limit": 1})["ok"]
    assert len(c.call({"cmd": "PULLB", "queue": "ctl", "count": 5})["jobs"]) == 1
    assert c.call({"cmd": "RateLimitClear", "queue": "ctl"})["ok"]
    assert c.call({"cmd": "SetConcurrency", "queue": "ctl", "limit": 3})["ok"]
    assert "ctl" in c.call({"cmd": "ListQueues"})["queues"]
    assert c.call({"cmd": "Drain", "queue": "ctl"})["count"] == 1
    refused = c.call({"cmd": "Obliterate", "queue": "ctl", "force": False})  # one is active
    assert refused["code"] == "config"  # bunq's own client: Queue.obliterate(force=False)
    assert c.call({"cmd": "Obliterate", "queue": "ctl"})["ok"]  # bunqueue's: removes it all
    assert c.call({"cmd": "Stats"})["stats"]["pushed"] >= 2
    assert "bunq_command_duration_seconds" in c.call({"cmd": "Prometheus"})["data"]["metrics"]
    c.close()
