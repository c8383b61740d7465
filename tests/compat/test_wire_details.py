"""Wire details bunqueue's clients rely on (issue 21), against ``bunq serve``.

bunqueue 2.9.5's behaviour is the contract: its JS client (``tests/compat/js/wire.mjs``),
its Python client, and raw frames shaped as they send them.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from compat.conftest import TOKEN, missing
from compat.test_js_client import run_js
from server.raw import Raw

from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig
from bunq.validate import DEFAULT_MAX_PAYLOAD

MIB = 1 << 20


@contextmanager
def serving(backend: Any, **cfg: Any) -> Iterator[BackgroundServer]:
    with BackgroundServer(backend, ServerConfig(port=0, http_port=None, **cfg)) as srv:
        yield srv


def bunqueue_client() -> Any:
    if importlib.util.find_spec("bunqueue") is None:
        missing("bunqueue-client (pip install bunqueue-client)")
    import bunqueue

    return bunqueue


# ------------------------------------------------------------------ the JS client


def test_js_client_stacks_rate_limit_ttl_obliterate_and_big_payloads(compat_server: Any) -> None:
    out = run_js(compat_server.port, script="wire.mjs")
    # a FAIL's stack is kept (throw site first), bounded by the job's stackTraceLimit
    assert out["short"]["failedReason"] == "boom"
    assert out["short"]["stacktrace"][0] == "Error: boom" and len(out["short"]["stacktrace"]) == 2
    assert out["short"]["stacktrace"][1].startswith("at inner ")
    full = out["full"]["stacktrace"]
    assert len(full) == 10 and full[:2] == out["short"]["stacktrace"]  # default limit: 10
    assert full[2].startswith("at outer ")
    # queue.rateLimit(700): 1 job a second, lapsing by itself
    assert out["limitSet"] == {"max": 1, "duration": 1000} and out["limitAfterTtl"] is None
    # obliterate with an active job: the queue is gone; the late ACK changes nothing
    assert set(out["countsAfterObliterate"].values()) == {0}
    assert set(out["countsAtEnd"].values()) == {0}
    assert out["bigLength"] == 3 * MIB


# ------------------------------------------------------ payload limits, every backend


@pytest.mark.parametrize("kind", ["sqlite", "memory", "postgres", "redis"])
def test_payload_limits_are_bunqueues_on_every_backend(make_backend: Callable[..., Any],
                                                       kind: str) -> None:  # fmt: skip
    with serving(make_backend(kind)) as srv:
        c = Raw(srv.port, timeout=30)
        blob = "x" * (9 * MIB)  # bunqueue takes up to 10 MB of job data
        jid = c.call({"cmd": "PUSH", "queue": "big", "name": "n", "data": {"b": blob}}, 30)["id"]
        pulled = c.call({"cmd": "PULL", "queue": "big", "timeout": 1000}, 30)
        assert pulled["job"]["id"] == jid and pulled["job"]["data"] == {"b": blob}
        too_big = {"b": "x" * DEFAULT_MAX_PAYLOAD}
        reply = c.call({"cmd": "PUSH", "queue": "big", "name": "n", "data": too_big}, 30)
        assert reply["ok"] is False and reply["code"] == "payload_too_large"
        assert reply["errorData"]["limit"] == DEFAULT_MAX_PAYLOAD == 10 * MIB
        # a batch's total is bounded by the frame (64 MiB), not by one job's limit
        jobs = [{"name": "n", "data": "y" * (4 * MIB)} for _ in range(4)]
        assert len(c.call({"cmd": "PUSHB", "queue": "big", "jobs": jobs}, 30)["ids"]) == 4
        c.close()


def test_sqs_refuses_past_its_message_size_with_the_same_code(
    make_backend: Callable[..., Any],
) -> None:
    with serving(make_backend("sqs")) as srv:
        c = Raw(srv.port)
        assert c.call({"cmd": "PUSH", "queue": "q", "name": "n", "data": "x" * 1000})["ok"]
        # the queue's MaximumMessageSize (at most 1 MiB on SQS), not bunqueue's 10 MB
        reply = c.call({"cmd": "PUSH", "queue": "q", "name": "n", "data": "x" * (2 * MIB)})
        assert reply["ok"] is False and reply["code"] == "payload_too_large"
        assert reply["errorData"]["limit"] <= MIB
        c.close()


def test_the_big_frame_is_for_authenticated_connections_only(make_backend: Any) -> None:
    push = {"cmd": "PUSH", "queue": "q", "name": "n", "data": "x" * (2 * MIB)}
    with serving(make_backend("sqlite"), tokens=(TOKEN,)) as srv:
        anon = Raw(srv.port)
        anon.send(push)
        assert anon.closed_by_server()  # over the 4 KiB pre-auth frame
        c = Raw(srv.port)
        assert c.call({"cmd": "Auth", "token": TOKEN})["ok"]
        assert c.call(push, 30)["ok"]
        c.close()


# ------------------------------------------------------------------ stacks on FAIL


def test_python_client_fail_stack_and_limit(compat_server: Any) -> None:
    bunqueue = bunqueue_client()
    q = bunqueue.Queue("wire-py-stack", port=compat_server.port)
    job = q.add("bad", {"n": 1}, attempts=1, stack_trace_limit=3)

    def process(j: Any) -> Any:
        raise ValueError("boom")

    w = bunqueue.Worker("wire-py-stack", process, port=compat_server.port, poll_timeout_ms=200)
    try:
        deadline = time.monotonic() + 10
        while q.get_state(job.id) != "failed" and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        w.close()
    got = q.get_job(job.id)
    assert got.raw["failedReason"] == "boom" and got.raw["stackTraceLimit"] == 3
    assert got.stacktrace is not None and len(got.stacktrace) == 3  # the first 3 sent
    q.close()


def test_raw_fail_keeps_stack_lines_as_sent(compat_server: Any) -> None:
    c = Raw(compat_server.port)
    jid = c.call({"cmd": "PUSH", "queue": "st", "name": "n", "data": 1, "maxAttempts": 2,
                  "stackTraceLimit": 2})["id"]  # fmt: skip
    token = c.call({"cmd": "PULL", "queue": "st", "owner": "w"})["token"]
    stack = ["Error: first", "  at a (x.js:1:1)  ", "", 7, "at b (x.js:2:2)", "at c (x.js:3:3)"]
    fail = {"cmd": "FAIL", "id": jid, "token": token, "error": "first", "stack": stack}
    assert c.call(fail)["ok"]
    job = c.call({"cmd": "GetJob", "id": jid})["job"]
    assert job["stacktrace"] == ["Error: first", "at a (x.js:1:1)"]  # trimmed, strings, limit
    assert job["failedReason"] == "first" and job["timeline"][0]["error"] == "first"
    c.close()


# ------------------------------------------------------------------ RateLimit {ttl}


def test_rate_limit_ttl_lapses_broker_side(compat_server: Any) -> None:
    c = Raw(compat_server.port)
    c.call({"cmd": "PUSHB", "queue": "rl", "jobs": [{"name": "n", "data": i} for i in range(6)]})
    # one job a minute, for 300 ms
    assert c.call({"cmd": "RateLimit", "queue": "rl", "limit": 1, "duration": 60_000,
                   "ttl": 300})["ok"]  # fmt: skip
    limits = c.call({"cmd": "GetQueueLimits", "queue": "rl"})["data"]["limits"]
    assert limits["rateLimit"] == {"max": 1, "duration": 60_000}
    assert 0 < limits["rateLimitTtl"] <= 300
    assert len(c.call({"cmd": "PULLB", "queue": "rl", "count": 5})["jobs"]) == 1  # throttled
    time.sleep(0.5)
    assert len(c.call({"cmd": "PULLB", "queue": "rl", "count": 5})["jobs"]) == 5  # lapsed
    limits = c.call({"cmd": "GetQueueLimits", "queue": "rl"})["data"]["limits"]
    assert limits["rateLimit"] is None and limits["rateLimitTtl"] == -2
    # a limit set again without a ttl stays (the earlier expiry no longer applies)
    assert c.call({"cmd": "RateLimit", "queue": "rl", "limit": 2, "ttl": 200})["ok"]
    assert c.call({"cmd": "RateLimit", "queue": "rl", "limit": 3})["ok"]
    time.sleep(0.4)
    limits = c.call({"cmd": "GetQueueLimits", "queue": "rl"})["data"]["limits"]
    assert limits["rateLimit"] == {"max": 3, "duration": 1000} and limits["rateLimitTtl"] == 0
    c.close()


# ------------------------------------------------------------------ Obliterate


def test_obliterate_removes_active_jobs_and_their_outcomes_are_stale(compat_server: Any) -> None:
    c = Raw(compat_server.port)
    ids = c.call({"cmd": "PUSHB", "queue": "ob", "jobs": [{"name": "n", "data": 1}] * 2})["ids"]
    p = c.call({"cmd": "PULL", "queue": "ob", "owner": "w"})
    assert p["job"]["id"] in ids
    refused = c.call({"cmd": "Obliterate", "queue": "ob", "force": False})  # bunq's own client
    assert refused["ok"] is False and refused["code"] == "config"
    assert c.call({"cmd": "Obliterate", "queue": "ob"})["ok"]  # as bunqueue's clients send it
    assert "ob" not in c.call({"cmd": "ListQueues"})["queues"]
    ack = c.call({"cmd": "ACK", "id": p["job"]["id"], "token": p["token"], "result": 1})
    assert ack["data"] == {"applied": False, "reason": "already-finalized"}  # stale
    fail = c.call({"cmd": "FAIL", "id": p["job"]["id"], "token": p["token"], "error": "x"})
    assert fail["data"] == {"applied": False, "reason": "already-finalized"}
    assert c.call({"cmd": "GetJob", "id": p["job"]["id"]})["ok"] is False  # nothing came back
    assert c.call({"cmd": "GetJobCounts", "queue": "ob"})["counts"]["completed"] == 0
    c.close()


def test_python_client_obliterate_with_an_active_job(compat_server: Any) -> None:
    bunqueue = bunqueue_client()
    q = bunqueue.Queue("wire-py-obl", port=compat_server.port)
    q.add("a", {"n": 1})
    c = Raw(compat_server.port)
    assert c.call({"cmd": "PULL", "queue": "wire-py-obl", "owner": "w"})["job"] is not None
    q.obliterate()
    assert q.get_job_counts()["active"] == 0 and q.count() == 0
    c.close()
    q.close()


# ------------------------------------------------------------------ PUSHF, raw


def _node(jid: str, queue: str = "fq", **inp: Any) -> dict[str, Any]:
    return {"id": jid, "queue": queue, "input": {"name": jid, "data": {}, **inp}}


def test_pushf_orders_dependencies_and_refuses_what_bunqueue_refuses(compat_server: Any) -> None:
    c = Raw(compat_server.port)
    # parent first in the request: still admitted after its children
    jobs = [
        _node("p", dependsOn=["k1", "k2"], childrenIds=["k1", "k2"]),
        _node("k1", parentId="p"),
        _node("k2", "fq2", parentId="p"),
    ]
    reply = c.call({"cmd": "PUSHF", "jobs": jobs})
    assert [j["id"] for j in reply["data"]["jobs"]] == ["p", "k1", "k2"]
    assert [j["state"] for j in reply["data"]["jobs"]] == ["waiting-children", "waiting", "waiting"]
    cycle = [_node("x", dependsOn=["y"]), _node("y", dependsOn=["x"])]
    bad = c.call({"cmd": "PUSHF", "jobs": cycle})
    assert bad["ok"] is False and bad["code"] == "dependency"
    dup = c.call({"cmd": "PUSHF", "jobs": [_node("d"), _node("d")]})
    assert dup["ok"] is False and dup["code"] == "validation"
    uniq = c.call({"cmd": "PUSHF", "jobs": [_node("u", uniqueKey="k")]})
    assert uniq["ok"] is False and "atomic flow" in uniq["error"]
    stray = c.call({"cmd": "PUSHF", "jobs": [_node("s", childrenIds=["k1"])]})
    assert stray["ok"] is False and stray["code"] == "unsupported"
    for jid in ("x", "y", "d", "u", "s"):  # nothing of a refused graph is stored
        assert c.call({"cmd": "GetState", "id": jid})["state"] == "unknown"
    c.close()


# ------------------------------------------------------------ GetJobCounts.completed


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres", "redis"])
def test_completed_count_goes_past_the_retention_bound(make_backend: Any, kind: str) -> None:
    """A client waiting for ``completed == N`` gets there when N is over the bound."""
    bunqueue = bunqueue_client()
    with serving(make_backend(kind, completed_max_count=5), sweep_interval=0.1) as srv:
        q = bunqueue.Queue("wire-counts", port=srv.port)
        q.add_bulk([{"name": "n", "data": {"i": i}} for i in range(12)])
        w = bunqueue.Worker("wire-counts", lambda job: job.data["i"], port=srv.port,
                            concurrency=4, poll_timeout_ms=200)  # fmt: skip
        try:
            deadline = time.monotonic() + 10
            while q.get_job_counts()["completed"] < 12 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            w.close()
        assert q.get_job_counts()["completed"] == 12
        c = Raw(srv.port)
        listing = {"cmd": "GetJobs", "queue": "wire-counts", "state": "completed"}
        deadline = time.monotonic() + 10  # SQL and Redis apply the bound in their sweep
        while len(c.call(listing)["jobs"]) > 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(c.call(listing)["jobs"]) == 5  # what is kept can be listed
        assert q.get_job_counts()["completed"] == 12  # 5 kept + 7 retired by the bound
        c.call({"cmd": "Clean", "queue": "wire-counts", "grace": 0, "limit": 100,
                "state": "completed"})  # fmt: skip
        assert q.get_job_counts()["completed"] == 0
        c.close()
        q.close()


def test_push_with_children_ids_as_bunqueues_python_flow_producer_sends_it(
    compat_server: Any,
) -> None:
    """``PUSH {parentId, childrenIds, dependsOn}``: the parent waits for its children."""
    c = Raw(compat_server.port)
    kid = c.call({"cmd": "PUSH", "queue": "pf", "name": "kid",
                  "data": {"__parentId": "pending", "__parentQueue": "pf"}})["id"]  # fmt: skip
    parent = c.call({"cmd": "PUSH", "queue": "pf", "name": "parent",
                     "data": {"__childrenIds": [kid]}, "childrenIds": [kid],
                     "dependsOn": [kid]})["id"]  # fmt: skip
    job = c.call({"cmd": "GetJob", "id": parent})["job"]
    assert job["childrenIds"] == [kid] and job["state"] == "waiting-children"
    stray = c.call({"cmd": "PUSH", "queue": "pf", "name": "p2", "childrenIds": [kid]})
    assert stray["ok"] is False and stray["code"] == "unsupported"
    c.close()


def test_python_flow_producer_add_chain(compat_server: Any) -> None:
    bunqueue = bunqueue_client()
    flow = bunqueue.FlowProducer(port=compat_server.port)
    ids = flow.add_chain([{"name": f"s{i}", "queueName": "py-chain", "data": {"i": i}}
                          for i in range(3)])  # fmt: skip
    q = bunqueue.Queue("py-chain", port=compat_server.port)
    assert [q.get_state(i) for i in ids] == ["waiting", "waiting-children", "waiting-children"]
    order: list[int] = []
    w = bunqueue.Worker("py-chain", lambda job: order.append(job.data["i"]),
                        port=compat_server.port, poll_timeout_ms=200)  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while len(order) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        w.close()
    assert order == [0, 1, 2]
    flow.close()
    q.close()


def test_python_flow_producer_add_get_flow_and_bulk_then(compat_server: Any) -> None:
    """PUSH children (placeholder parent) -> PUSH parent -> UpdateParent per child."""
    bunqueue = bunqueue_client()
    port = compat_server.port
    flow = bunqueue.FlowProducer(port=port)
    node = flow.add({"name": "root", "queueName": "py-flow", "data": {"r": 1}, "children": [
        {"name": "c1", "queueName": "py-flow", "data": {"c": 1}},
        {"name": "c2", "queueName": "py-flow-b", "data": {"c": 2}},
    ]})  # fmt: skip
    root = node.job.id
    kids = [n.job.id for n in node.children]
    read = flow.get_flow(root)
    assert read is not None and sorted(n.job.id for n in read.children) == sorted(kids)
    c = Raw(port)
    for kid in kids:  # linked to the real parent, not the client's placeholder
        assert c.call({"cmd": "GetJob", "id": kid})["job"]["parentId"] == root
    assert c.call({"cmd": "GetState", "id": root})["state"] == "waiting-children"
    fan = flow.add_bulk_then([{"name": "p", "queueName": "py-flow-b", "data": {"i": i}}
                              for i in range(2)],
                             {"name": "final", "queueName": "py-flow", "data": {}})  # fmt: skip
    assert c.call({"cmd": "GetState", "id": fan["final_id"]})["state"] == "waiting-children"
    missing = c.call({"cmd": "UpdateParent", "childId": "nope", "parentId": root})
    assert missing["ok"] is False and missing["code"] == "job_not_found"
    done: list[str] = []
    workers = [bunqueue.Worker(q, lambda job: done.append(job.raw["name"]), port=port,
                               poll_timeout_ms=200) for q in ("py-flow", "py-flow-b")]  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while len(done) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for w in workers:
            w.close()
    assert done.index("root") > max(done.index("c1"), done.index("c2"))
    assert done.index("final") > max(i for i, n in enumerate(done) if n == "p")
    flow.close()
    c.close()
