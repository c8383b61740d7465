"""WaitJob: a held reply that answers when the job completes, dead-letters or times out."""

from __future__ import annotations

import time
from typing import Any

from server.raw import Raw

ONCE = {"cmd": "PUSH", "queue": "wj", "name": "t", "data": {}, "maxAttempts": 1}


def pending(server: Any) -> int:
    return len(server.server.ctx.job_waiters)


def until(cond: Any, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def pulled(c: Raw, job_id: str) -> str:
    got = c.call({"cmd": "PULL", "queue": "wj", "owner": "w"})
    assert got["job"]["id"] == job_id
    return got["token"]


def test_wait_then_ack_replies_with_the_result(server: Any) -> None:
    c, w = Raw(server.port), Raw(server.port)
    job_id = c.call(ONCE)["id"]
    rid = w.send({"cmd": "WaitJob", "id": job_id, "timeout": 5000})
    assert until(lambda: pending(server) == 1)
    token = pulled(c, job_id)
    assert c.call({"cmd": "ACK", "id": job_id, "token": token, "result": {"v": [1, "x"]}})["ok"]
    t0 = time.monotonic()
    assert w.recv() == {"ok": True, "completed": True, "result": {"v": [1, "x"]}, "reqId": rid}
    assert time.monotonic() - t0 < 0.5  # woken by the ACK, not by the periodic re-read
    assert pending(server) == 0


def test_wait_then_fail_to_dlq_replies_with_the_failure(server: Any) -> None:
    c, w = Raw(server.port), Raw(server.port)
    job_id = c.call(ONCE)["id"]
    rid = w.send({"cmd": "WaitJob", "id": job_id, "timeout": 5000})
    assert until(lambda: pending(server) == 1)
    token = pulled(c, job_id)
    assert c.call({"cmd": "FAIL", "id": job_id, "token": token, "error": "boom"})["ok"]
    reply = w.recv(timeout=0.5)
    assert reply == {
        "ok": True,
        "completed": False,
        "failed": True,
        "failedReason": "boom",
        "reqId": rid,
    }
    assert pending(server) == 0


def test_retried_failure_keeps_waiting(server: Any) -> None:
    c, w = Raw(server.port), Raw(server.port)
    job_id = c.call({**ONCE, "maxAttempts": 2, "backoff": 0})["id"]
    rid = w.send({"cmd": "WaitJob", "id": job_id, "timeout": 5000})
    assert until(lambda: pending(server) == 1)
    assert c.call({"cmd": "FAIL", "id": job_id, "token": pulled(c, job_id), "error": "x"})["ok"]
    time.sleep(0.1)
    assert pending(server) == 1  # one more attempt to go
    got = c.call({"cmd": "PULL", "queue": "wj", "owner": "w", "timeout": 3000})
    assert c.call({"cmd": "ACK", "id": job_id, "token": got["token"], "result": 7})["ok"]
    assert w.recv() == {"ok": True, "completed": True, "result": 7, "reqId": rid}


def test_finished_job_answers_at_once(server: Any) -> None:
    c = Raw(server.port)
    job_id = c.call(ONCE)["id"]
    assert c.call({"cmd": "ACK", "id": job_id, "token": pulled(c, job_id), "result": "r"})["ok"]
    t0 = time.monotonic()
    reply = c.call({"cmd": "WaitJob", "id": job_id, "timeout": 10_000})
    assert reply == {"ok": True, "completed": True, "result": "r", "reqId": "r4"}
    dead = c.call(ONCE)["id"]
    assert c.call({"cmd": "FAIL", "id": dead, "token": pulled(c, dead), "error": "e"})["ok"]
    reply = c.call({"cmd": "WaitJob", "id": dead, "timeout": 10_000})
    assert reply["completed"] is False and reply["failed"] is True
    assert reply["failedReason"] == "e"
    assert time.monotonic() - t0 < 1.0
    assert pending(server) == 0


def test_timeout_and_bounds(server: Any) -> None:
    c = Raw(server.port)
    job_id = c.call(ONCE)["id"]
    t0 = time.monotonic()
    assert c.call({"cmd": "WaitJob", "id": job_id, "timeout": 300}) == {
        "ok": True,
        "completed": False,
        "reqId": "r2",
    }
    assert 0.25 <= time.monotonic() - t0 < 1.5
    assert c.call({"cmd": "WaitJob", "id": job_id, "timeout": 0})["completed"] is False
    too_long = c.call({"cmd": "WaitJob", "id": job_id, "timeout": 600_001})
    assert too_long["ok"] is False and "timeout" in too_long["error"]
    assert pending(server) == 0


def test_unknown_id_is_an_error_at_once(server: Any) -> None:
    c = Raw(server.port)
    reply = c.call({"cmd": "WaitJob", "id": "nope", "timeout": 10_000}, timeout=1.0)
    assert reply["ok"] is False and "Job not found" in reply["error"]
    assert pending(server) == 0


def test_disconnect_while_waiting_leaves_no_waiter(server: Any) -> None:
    c, w = Raw(server.port), Raw(server.port)
    job_id = c.call(ONCE)["id"]
    for _ in range(3):
        w.send({"cmd": "WaitJob", "id": job_id, "timeout": 60_000})
    assert until(lambda: pending(server) == 3)
    w.close()
    assert until(lambda: pending(server) == 0, timeout=0.5)
    assert c.call({"cmd": "Ping"})["ok"]


def test_pipelined_requests_are_served_while_a_wait_is_pending(server: Any) -> None:
    c = Raw(server.port)
    job_id = c.call(ONCE)["id"]
    wait_rid = c.send({"cmd": "WaitJob", "id": job_id, "timeout": 5000})
    ping_rid = c.send({"cmd": "Ping"})
    assert c.recv(timeout=1.0)["reqId"] == ping_rid
    token = pulled(c, job_id)  # on the same connection, the wait still pending
    assert c.call({"cmd": "ACK", "id": job_id, "token": token, "result": 1})["ok"]
    assert c.recv() == {"ok": True, "completed": True, "result": 1, "reqId": wait_rid}


def test_job_settled_behind_the_servers_back_is_found_by_the_re_read(
    server: Any, served: Any
) -> None:
    c = Raw(server.port)
    job_id = c.call(ONCE)["id"]
    rid = c.send({"cmd": "WaitJob", "id": job_id, "timeout": 5000})
    assert until(lambda: pending(server) == 1)
    (lease,) = served.lease("wj", 1, 30_000, "elsewhere")
    served.complete_many([(lease, "direct")])  # another broker on the same database
    assert c.recv(timeout=3.0) == {"ok": True, "completed": True, "result": "direct", "reqId": rid}
