"""Per-job commands with bunqueue's names and shapes, over real sockets."""

from __future__ import annotations

from typing import Any

from server.raw import Raw

from bunq.execution.context import cancel_ns


def push(c: Raw, **fields: Any) -> str:
    reply = c.call({"cmd": "PUSH", "queue": "q", "name": "j", "data": {"n": 1}, **fields})
    assert reply["ok"] is True, reply
    return str(reply["id"])


def state(c: Raw, job_id: str) -> str:
    return str(c.call({"cmd": "GetState", "id": job_id})["state"])


def test_cancel_removes_waiting_jobs_and_asks_active_ones_to_stop(server: Any, served: Any) -> None:
    c = Raw(server.port)
    waiting = push(c)
    assert c.call({"cmd": "Cancel", "id": waiting})["ok"] is True
    assert state(c, waiting) == "unknown"
    missing = c.call({"cmd": "Cancel", "id": waiting})
    assert missing["ok"] is False and missing["code"] == "job_not_found"
    active = push(c)
    assert c.call({"cmd": "PULL", "queue": "q"})["job"]["id"] == active
    refused = c.call({"cmd": "Cancel", "id": active, "removeOnly": True})  # bunq's remove
    assert refused["ok"] is False and refused["code"] == "job_state"
    assert c.call({"cmd": "Cancel", "id": active})["ok"] is True  # a request to its worker
    assert state(c, active) == "active"
    assert list(served.kv_list(cancel_ns("q"))) == [active]
    c.close()


def test_move_to_delayed_and_move_to_wait(server: Any) -> None:
    c = Raw(server.port)
    job_id = push(c)
    pulled = c.call({"cmd": "PULL", "queue": "q", "owner": "w1"})
    token = pulled["token"]
    reply = c.call({"cmd": "MoveToDelayed", "id": job_id, "delay": 60_000, "token": token})
    assert reply["ok"] is True, reply
    assert state(c, job_id) == "delayed"
    again = c.call({"cmd": "MoveToDelayed", "id": job_id, "delay": 10})
    assert again["ok"] is False and "not active" in again["error"]
    assert c.call({"cmd": "MoveToWait", "id": job_id})["ok"] is True  # delayed: promoted
    assert state(c, job_id) == "waiting"
    pulled = c.call({"cmd": "PULL", "queue": "q", "owner": "w1"})
    assert pulled["job"]["attempts"] == 0  # moves give the attempt back
    reply = c.call({"cmd": "MoveToWait", "id": job_id, "token": pulled["token"]})
    assert reply["ok"] is True and state(c, job_id) == "waiting"
    c.close()


def test_move_to_waiting_children_answers_not_moved(server: Any) -> None:
    c = Raw(server.port)
    job_id = push(c)
    waiting = c.call({"cmd": "MoveToWaitingChildren", "id": job_id})
    assert waiting["ok"] is False and waiting["error"] == "Job is not active"
    pulled = c.call({"cmd": "PULL", "queue": "q", "owner": "w"})
    wrong = c.call({"cmd": "MoveToWaitingChildren", "id": job_id, "token": "garbage"})
    assert wrong["code"] == "lease_lost"
    active = c.call({"cmd": "MoveToWaitingChildren", "id": job_id, "token": pulled["token"]})
    assert active["code"] == "job_state" and "no pending dependencies" in active["error"]
    assert state(c, job_id) == "active"
    c.close()


def test_retry_completed_by_id_count_and_queue(server: Any) -> None:
    c = Raw(server.port)
    ids = [push(c) for _ in range(3)]
    for _ in ids:
        pulled = c.call({"cmd": "PULL", "queue": "q"})
        assert c.call({"cmd": "ACK", "id": pulled["job"]["id"], "token": pulled["token"]})["ok"]
    one = c.call({"cmd": "RetryCompleted", "queue": "q", "id": ids[0]})
    assert one == {"ok": True, "count": 1, "reqId": one["reqId"]}
    assert state(c, ids[0]) == "waiting"
    assert c.call({"cmd": "RetryCompleted", "queue": "q", "id": ids[0]})["count"] == 0
    assert c.call({"cmd": "RetryCompleted", "queue": "other", "id": ids[1]})["count"] == 0
    assert c.call({"cmd": "RetryCompleted", "queue": "q", "count": 1})["count"] == 1
    assert c.call({"cmd": "RetryCompleted", "queue": "q"})["count"] == 1
    counts = c.call({"cmd": "GetJobCounts", "queue": "q"})["counts"]
    assert counts["completed"] == 0 and counts["waiting"] == 3
    c.close()


def test_custom_id_and_dedup_commands(server: Any) -> None:
    c = Raw(server.port)
    job_id = push(c, jobId="order-1", uniqueKey="k1")
    got = c.call({"cmd": "GetJobByCustomId", "customId": "order-1"})
    assert got["ok"] is True and got["job"]["id"] == job_id and got["job"]["state"] == "waiting"
    assert c.call({"cmd": "GetJobByCustomId", "customId": "nope"})["ok"] is False
    dedup = {"queue": "q", "deduplicationId": "k1"}
    assert c.call({"cmd": "GetDeduplicationJobId", **dedup})["data"] == {"jobId": job_id}
    removed = c.call({"cmd": "RemoveJobDeduplicationKey", "id": job_id})
    assert removed["data"] == {"removed": True}
    assert c.call({"cmd": "GetDeduplicationJobId", **dedup})["data"] == {"jobId": None}
    assert c.call({"cmd": "RemoveDeduplicationKey", **dedup})["data"] == {"count": 0}
    second = push(c, uniqueKey="k1")
    assert c.call({"cmd": "RemoveDeduplicationKey", **dedup})["data"] == {"count": 1}
    assert c.call({"cmd": "RemoveJobDeduplicationKey", "id": second})["data"] == {"removed": False}
    c.close()


def test_bad_fields_are_typed_errors(server: Any) -> None:
    c = Raw(server.port)
    job_id = push(c)
    for msg in (
        {"cmd": "ChangePriority", "id": job_id, "priority": 2**40},
        {"cmd": "ChangeDelay", "id": job_id, "delay": -1},
        {"cmd": "PromoteJobs", "queue": "q", "count": "many"},
        {"cmd": "Promote", "id": 5},
        {"cmd": "ClearLogs", "id": job_id, "keepLogs": -1},
        {"cmd": "GetDeduplicationJobId", "queue": "q", "deduplicationId": None},
    ):
        reply = c.call(msg)
        assert reply["ok"] is False and reply["code"] == "validation", (msg, reply)
    refused = c.call({"cmd": "Promote", "id": job_id})
    assert refused["code"] == "job_state" and "waiting" in refused["error"]
    c.close()


def test_cancel_publishes_removed(server: Any) -> None:
    from server.test_events import events_until_reply, subscriber

    sub = subscriber(server.port, "q")
    c = Raw(server.port)
    job_id = push(c, delay=60_000)
    assert c.call({"cmd": "Cancel", "id": job_id})["ok"] is True
    events = events_until_reply(sub)
    assert [(e["eventType"], e["jobId"]) for e in events] == [
        ("pushed", job_id), ("delayed", job_id), ("removed", job_id)
    ]  # fmt: skip
    assert events[2]["prev"] == "delayed"
    c.close()
    sub.close()
