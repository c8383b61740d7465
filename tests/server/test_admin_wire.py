"""bunqueue's config, group, flow-children and dashboard commands, over real sockets."""

from __future__ import annotations

import time
from typing import Any

from server.raw import Raw

from bunq import FlowJob, FlowProducer
from bunq.backends.base import QueueLimits


def ok(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["ok"] is True, reply
    return reply


def test_dlq_config_round_trips_in_bunqueue_names(server: Any) -> None:
    c = Raw(server.port)
    before = ok(c.call({"cmd": "GetDlqConfig", "queue": "q"}))["config"]
    assert before["autoRetry"] is False and before["maxEntries"] == 10_000
    ok(c.call({"cmd": "SetDlqConfig", "queue": "q",
               "config": {"autoRetry": True, "maxAutoRetries": 5}}))  # fmt: skip
    after = ok(c.call({"cmd": "GetDlqConfig", "queue": "q"}))["config"]
    assert after == {**before, "autoRetry": True, "maxAutoRetries": 5}
    bad = c.call({"cmd": "SetDlqConfig", "queue": "q", "config": {"maxEntries": -1}})
    assert bad["ok"] is False and bad["code"] == "config"
    unknown = c.call({"cmd": "SetDlqConfig", "queue": "q", "config": {"nope": 1}})
    assert unknown["ok"] is False and unknown["code"] == "validation"
    c.close()


def test_stall_interval_is_the_lease_of_a_pull_without_lock_ttl(server: Any) -> None:
    c = Raw(server.port)
    cfg = ok(c.call({"cmd": "GetStallConfig", "queue": "q"}))["config"]
    assert cfg["enabled"] is True and cfg["stallInterval"] == 30_000
    ok(c.call({"cmd": "SetStallConfig", "queue": "q", "config": {"stallInterval": 150}}))
    assert ok(c.call({"cmd": "GetStallConfig", "queue": "q"}))["config"]["stallInterval"] == 150
    job = ok(c.call({"cmd": "PUSH", "queue": "q", "name": "j", "data": 1}))["id"]
    assert ok(c.call({"cmd": "PULL", "queue": "q"}))["job"]["id"] == job
    time.sleep(0.4)
    ok(c.call({"cmd": "BqSweep"}))
    assert c.call({"cmd": "GetState", "id": job})["state"] == "waiting"  # the lease ran out
    other = ok(c.call({"cmd": "PULL", "queue": "q", "lockTtl": 60_000}))  # explicit lock wins
    time.sleep(0.3)
    ok(c.call({"cmd": "BqSweep"}))
    assert c.call({"cmd": "GetState", "id": other["job"]["id"]})["state"] == "active"
    refused = c.call({"cmd": "SetStallConfig", "queue": "q", "config": {"maxStalls": 99}})
    assert refused["ok"] is False and refused["code"] == "config"
    c.close()


def test_group_commands_answer_the_queue_wide_group_limits(server: Any, served: Any) -> None:
    served.set_limits("q", QueueLimits(group_concurrency=2, group_rate_max=5))
    c = Raw(server.port)
    g = {"queue": "q", "groupId": "tenant-1"}
    assert ok(c.call({"cmd": "GetGroupConcurrency", **g}))["data"]["concurrency"] == 2
    limit = ok(c.call({"cmd": "GetGroupRateLimit", **g}))["data"]["limit"]
    assert limit == {"max": 5, "duration": 1000}
    assert ok(c.call({"cmd": "IsGroupPaused", **g}))["data"]["paused"] is False
    for cmd in ("SetGroupConcurrency", "PauseGroup", "GetGroupJobsCount"):
        refused = c.call({"cmd": cmd, **g, "concurrency": 1})
        assert refused["ok"] is False and refused["code"] == "unsupported", refused
        assert "bunq" in refused["error"] and "not supported" in refused["error"]
    missing = c.call({"cmd": "GetGroupConcurrency", "queue": "q"})
    assert missing["ok"] is False and missing["code"] == "validation"
    c.close()


def test_children_values_failures_and_dependency_removal(server: Any, served: Any) -> None:
    kids = [FlowJob("kid", "kids", i, opts={"attempts": 1, **o}) for i, o in
            enumerate([{}, {"ignore_dependency_on_failure": True}, {}])]  # fmt: skip
    parent = FlowProducer(served).add(FlowJob("p", "q", None, children=kids)).job
    c = Raw(server.port)
    pulled = ok(c.call({"cmd": "PULLB", "queue": "kids", "count": 3}))
    pairs = zip(pulled["jobs"], pulled["tokens"], strict=True)
    by_data = {j["data"]: (j["id"], t) for j, t in pairs}
    ok(c.call({"cmd": "ACK", "id": by_data[0][0], "token": by_data[0][1], "result": 42}))
    for n in (1, 2):
        ok(c.call({"cmd": "FAIL", "id": by_data[n][0], "token": by_data[n][1],
                   "error": f"broke {n}"}))  # fmt: skip
    p = parent.id
    values = ok(c.call({"cmd": "GetChildrenValues", "id": p}))["data"]["values"]
    assert values == {f"kids:{by_data[0][0]}": 42}
    failed = ok(c.call({"cmd": "GetFailedChildrenValues", "id": p}))["values"]
    assert failed == {f"kids:{by_data[2][0]}": "broke 2"}
    ignored = ok(c.call({"cmd": "GetIgnoredChildrenFailures", "id": p}))["values"]
    assert ignored == {f"kids:{by_data[1][0]}": "broke 1"}
    assert c.call({"cmd": "GetState", "id": p})["state"] == "waiting-children"
    removed = ok(c.call({"cmd": "RemoveChildDependency", "id": by_data[2][0]}))
    assert removed["removed"] is True and removed["queue"] == "q"
    assert c.call({"cmd": "GetState", "id": p})["state"] == "waiting"
    assert ok(c.call({"cmd": "RemoveChildDependency", "id": by_data[2][0]}))["removed"] is False
    c.close()


def test_remove_unprocessed_children_keeps_started_ones(server: Any, served: Any) -> None:
    kids = [FlowJob("kid", "kids", i) for i in range(3)]
    parent = FlowProducer(served).add(FlowJob("p", "q", None, children=kids)).job
    c = Raw(server.port)
    active = ok(c.call({"cmd": "PULL", "queue": "kids"}))["job"]["id"]
    ok(c.call({"cmd": "RemoveUnprocessedChildren", "id": parent.id}))
    counts = ok(c.call({"cmd": "BqCounts", "queue": "kids"}))["counts"]
    assert counts["waiting"] == 0 and counts["active"] == 1
    assert c.call({"cmd": "GetState", "id": active})["state"] == "active"
    gone = c.call({"cmd": "RemoveUnprocessedChildren", "id": "nope"})
    assert gone["ok"] is False and gone["code"] == "job_not_found"
    c.close()


def test_dashboard_storage_and_no_op_admin_commands(server: Any) -> None:
    c = Raw(server.port)
    ok(c.call({"cmd": "PUSH", "queue": "q", "name": "j", "data": 1, "priority": 3}))
    queues = ok(c.call({"cmd": "DashboardQueues"}))["data"]["queues"]
    assert [(q["name"], q["waiting"], q["paused"]) for q in queues] == [("q", 1, False)]
    view = ok(c.call({"cmd": "DashboardQueue", "queue": "q", "includeJobs": True}))["data"]
    assert view["counts"]["waiting"] == 1 and view["priorityCounts"] == {"3": 1}
    assert [j["priority"] for j in view["jobs"]["waiting"]] == [3]
    overview = ok(c.call({"cmd": "DashboardOverview"}))["data"]
    assert overview["stats"]["waiting"] == 1 and overview["storage"]["diskFull"] is False
    assert ok(c.call({"cmd": "StorageStatus"}))["data"] == {
        "diskFull": False, "error": None, "since": None}  # fmt: skip
    ok(c.call({"cmd": "CompactMemory"}))
    assert ok(c.call({"cmd": "TrimEvents", "queue": "q", "maxLength": 10}))["data"] == {
        "removed": 0}  # fmt: skip
    c.close()


def test_push_with_repeat_makes_a_repeatable_job(server: Any) -> None:
    c = Raw(server.port)
    every = {"cmd": "PUSH", "queue": "q", "name": "beat", "data": {"n": 1},
             "repeat": {"every": 60_000, "immediately": True, "count": 0}}  # fmt: skip
    first = ok(c.call(every))["id"]
    assert first.startswith("cron:repeat-") and c.call({"cmd": "GetState", "id": first})[
        "state"] == "waiting"  # fmt: skip
    assert ok(c.call(every))["id"] == first  # the same repeatable job
    nightly = ok(c.call({**every, "repeat": {"pattern": "0 3 * * *"}}))["id"]
    assert c.call({"cmd": "GetState", "id": nightly})["state"] == "delayed"
    bad = c.call({**every, "repeat": {"every": 1000, "pattern": "* * * * *"}})
    assert bad["ok"] is False and bad["code"] == "validation"
    c.close()


def test_push_with_group_max_size_is_refused_past_the_bound(server: Any) -> None:
    c = Raw(server.port)
    capped = {"cmd": "PUSH", "queue": "q", "name": "j", "data": 1, "groupId": "g",
              "groupMaxSize": 1}  # fmt: skip
    ok(c.call(capped))
    full = c.call(capped)
    assert full["ok"] is False and full["code"] == "group_full"
    assert full["error"] == "Group g has reached its maximum size of 1"
    c.close()
