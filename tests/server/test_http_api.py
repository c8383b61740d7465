"""The HTTP API against a real server (SQLite behind it): behaviour, errors, auth, limits."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from server.httpapi import Api
from server.remote_factory import QUIET

from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig
from bunq.tick import tick

TOKEN = "s3cret-token"


@pytest.fixture(params=[None, TOKEN], ids=["open", "token"])
def api(request: pytest.FixtureRequest, served: Any) -> Iterator[Api]:
    tokens = () if request.param is None else (request.param,)
    cfg = ServerConfig(port=0, http_port=0, tokens=tokens, http_max_body=4096, **QUIET)
    with BackgroundServer(served, cfg) as srv:
        assert srv.server.http_port is not None
        yield Api(srv.server.http_port, request.param)


def test_add_get_and_page_through_a_state(api: Api) -> None:
    ids = [api.ok("POST", "/queues/mail/jobs", {"name": "send", "data": {"n": i}})["id"]
           for i in range(5)]  # fmt: skip
    seen, cursor, pages = [], "", 0
    while True:
        q = f"/queues/mail/jobs/list?state=waiting&limit=2{'&cursor=' + cursor if cursor else ''}"
        page = api.ok("GET", q)
        seen += [j["id"] for j in page["jobs"]]
        pages += 1
        if page["next"] is None:
            break
        cursor = page["next"]
    assert sorted(seen) == sorted(ids) and pages == 3
    job = api.ok("GET", f"/jobs/{ids[0]}")["job"]
    assert job["data"] == {"n": 0} and job["state"] == "waiting"
    assert api.ok("GET", f"/jobs/search?q={ids[1]}")["jobs"][0]["id"] == ids[1]
    assert api.ok("GET", "/jobs/search?q=nope")["jobs"] == []
    counts = api.ok("GET", "/queues")["queues"][0]
    assert counts["name"] == "mail" and counts["counts"]["waiting"] == 5


def test_custom_id_bulk_and_lookup(api: Api) -> None:
    first = api.ok("POST", "/queues/q/jobs", {"name": "a", "jobId": "order-7"})["id"]
    again = api.ok("POST", "/queues/q/jobs", {"name": "a", "jobId": "order-7"})["id"]
    assert first == again == "order-7"
    assert api.ok("GET", "/jobs/custom/order-7")["job"]["customId"] == "order-7"
    ids = api.ok("POST", "/queues/q/jobs/bulk", {"jobs": [{"name": "b"}, {"name": "c"}]})["ids"]
    assert len(ids) == 2
    assert api.ok("GET", "/queues/q/counts")["counts"]["waiting"] == 3


def test_errors_have_status_and_stable_code(api: Api) -> None:
    cases = [
        ("GET", "/jobs/missing", None, 404, "job_not_found"),
        ("GET", "/queues/q/jobs/list?limit=0", None, 400, "validation"),
        ("GET", "/queues/q/jobs/list?state=bogus", None, 400, "validation"),
        ("GET", "/queues/q/jobs/list?cursor=zzzz", None, 400, "validation"),
        ("POST", "/queues/q/jobs", {"name": "x", "priority": "high"}, 400, "validation"),
        ("GET", "/no/such/route", None, 404, "not_found"),
        ("DELETE", "/queues", None, 405, "protocol"),
        ("DELETE", "/crons/none", None, 400, "config"),
    ]
    for method, path, body, status, code in cases:
        got, out = api.call(method, path, body)
        assert (got, out["code"], out["ok"]) == (status, code, False), (method, path, out)
    status, _, raw = api.raw("POST", "/queues/q/jobs", b"{not json")
    assert status == 400 and json.loads(raw)["code"] == "validation"
    status, _, raw = api.raw("POST", "/queues/q/jobs", b"[1]")
    assert status == 400 and json.loads(raw)["code"] == "validation"


def test_body_over_the_limit_is_refused(api: Api) -> None:
    status, _, raw = api.raw("POST", "/queues/q/jobs", b'{"data": "' + b"x" * 5000 + b'"}')
    assert status == 413 and json.loads(raw)["code"] == "payload_too_large"
    assert api.ok("GET", "/queues/q/counts")["counts"]["waiting"] == 0


def test_tokens_guard_everything_but_health_and_ready(api: Api) -> None:
    anon = Api(api.port)
    assert anon.call("GET", "/health")[0] == 200
    assert anon.call("GET", "/ready")[0] == 200
    status, out = anon.call("GET", "/queues")
    if api.token is None:
        assert status == 200
        return
    assert (status, out["code"]) == (401, "auth")
    for path in ("/openapi.json", "/events", "/jobs/x", "/crons", "/workers", "/stats", "/metrics"):
        assert anon.call("GET", path)[0] == 401, path
    assert Api(api.port, "wrong").call("POST", "/queues/q/jobs", {"name": "x"})[0] == 401
    assert anon.raw("GET", "/")[0] == 200  # the dashboard's page has no data: it asks for one


def test_queue_control_and_limits(api: Api) -> None:
    for _ in range(3):
        api.ok("POST", "/queues/q/jobs", {"name": "x"})
    api.ok("POST", "/queues/q/pause")
    assert api.ok("GET", "/queues/q/paused")["paused"] is True
    assert api.ok("GET", "/queues/q")["queue"]["paused"] is True
    api.ok("POST", "/queues/q/resume")
    assert api.ok("GET", "/queues/q/paused")["paused"] is False
    limits = api.ok("PUT", "/queues/q/concurrency", {"concurrency": 4})["limits"]
    assert limits["concurrency"] == 4
    limits = api.ok("PUT", "/queues/q/rate-limit", {"limit": 10, "duration": 2000})["limits"]
    assert (limits["rateLimit"], limits["rateDuration"]) == (10, 2000)
    assert api.ok("DELETE", "/queues/q/rate-limit")["limits"]["rateLimit"] is None
    assert api.ok("DELETE", "/queues/q/concurrency")["limits"]["concurrency"] is None
    assert api.ok("POST", "/queues/q/drain")["count"] == 3
    assert api.ok("POST", "/queues/q/clean", {"grace": 0, "state": "completed"})["count"] == 0
    api.ok("POST", "/queues/q/obliterate", {})
    assert all(q["name"] != "q" for q in api.ok("GET", "/queues")["queues"])


def _fail_all(served: Any, queue: str) -> None:
    def boom(job: Any) -> None:
        raise RuntimeError("boom")

    tick(queue, boom, served, max=100)


def test_dlq_list_retry_one_and_purge(api: Api, served: Any) -> None:
    ids = [
        api.ok("POST", "/queues/d/jobs", {"name": "x", "maxAttempts": 1})["id"] for _ in range(3)
    ]
    _fail_all(served, "d")
    listed = api.ok("GET", "/queues/d/dlq")
    assert listed["total"] == 3 and {e["job"]["id"] for e in listed["entries"]} == set(ids)
    assert "boom" in (listed["entries"][0]["error"] or "")
    assert api.ok("GET", "/queues/d/dlq/stats")["total"] == 3
    assert api.ok("POST", "/queues/d/dlq/retry", {"jobId": ids[0]})["count"] == 1
    assert api.ok("GET", f"/jobs/{ids[0]}/state")["state"] == "waiting"
    assert api.ok("DELETE", f"/queues/d/dlq/{ids[1]}")["removed"] is True
    assert api.ok("POST", "/queues/d/dlq/purge")["count"] == 1
    assert api.ok("GET", "/queues/d/dlq")["total"] == 0


def test_progress_logs_and_result(api: Api, served: Any) -> None:
    job_id = api.ok("POST", "/queues/p/jobs", {"name": "x", "data": 6})["id"]
    api.ok("POST", f"/jobs/{job_id}/progress", {"progress": 40, "message": "half"})
    api.ok("POST", f"/jobs/{job_id}/logs", {"message": "step one"})
    assert api.ok("GET", f"/jobs/{job_id}/progress")["progress"] == 40
    assert [ln["message"] for ln in api.ok("GET", f"/jobs/{job_id}/logs")["logs"]] == ["step one"]
    assert api.call("POST", f"/jobs/{job_id}/progress", {"progress": 101})[0] == 400
    tick("p", lambda job: job.data * 7, served, max=10)
    assert api.ok("GET", f"/jobs/{job_id}/result")["result"] == 42
    assert api.ok("GET", f"/jobs/{job_id}")["job"]["returnvalue"] == 42
    assert api.ok("GET", f"/jobs/{job_id}/children")["children"] == []


def test_cron_add_list_get_delete(api: Api) -> None:
    body = {"name": "nightly", "queue": "reports", "schedule": "0 3 * * *", "data": {"k": 1}}
    assert api.ok("POST", "/crons", body)["cron"]["schedule"] == "0 3 * * *"
    assert [c["name"] for c in api.ok("GET", "/crons")["crons"]] == ["nightly"]
    assert api.ok("GET", "/crons/nightly")["cron"]["queue"] == "reports"
    api.ok("DELETE", "/crons/nightly")
    assert api.ok("GET", "/crons")["crons"] == []
    assert api.call("POST", "/crons", {"name": "x", "queue": "q"})[1]["code"] == "config"


def test_per_job_operations_change_the_job(api: Api) -> None:
    def state(job_id: str) -> str:
        return str(api.ok("GET", f"/jobs/{job_id}")["job"]["state"])

    delayed = api.ok("POST", "/queues/ops/jobs", {"name": "x", "delay": 600_000})["id"]
    assert state(delayed) == "delayed"
    api.ok("PUT", f"/jobs/{delayed}/priority", {"priority": 7})
    assert api.ok("GET", f"/jobs/{delayed}")["job"]["priority"] == 7
    api.ok("POST", f"/jobs/{delayed}/promote")
    assert state(delayed) == "waiting"
    api.ok("PUT", f"/jobs/{delayed}/delay", {"delay": 600_000})
    assert state(delayed) == "delayed"
    api.ok("POST", f"/jobs/{delayed}/discard")
    assert state(delayed) == "failed"
    api.ok("POST", f"/jobs/{delayed}/retry")
    assert state(delayed) == "waiting"
    status, out = api.call("POST", f"/jobs/{delayed}/promote")  # waiting, not delayed
    assert (status, out["code"]) == (409, "job_state"), out
    assert api.ok("DELETE", f"/jobs/{delayed}")["result"] is True
    status, out = api.call("GET", f"/jobs/{delayed}")
    assert (status, out["code"]) == (404, "job_not_found"), out
    status, out = api.call("PUT", f"/jobs/{delayed}/priority", {"priority": "high"})
    assert (status, out["code"]) == (400, "validation"), out


def test_sse_streams_job_events_and_totals(api: Api) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    headers = {} if api.token is None else {"Authorization": f"Bearer {api.token}"}
    conn.request("GET", "/events?interval=0.2", headers=headers)
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    kinds: dict[str, list[Any]] = {"job": [], "stats": []}
    added = None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not kinds["job"]:
        line = resp.fp.readline().decode()
        if line.startswith("event: "):
            kind = line[7:].strip()
            data = json.loads(resp.fp.readline().decode()[6:])
            kinds[kind].append(data)
            if kind == "stats" and added is None:
                added = api.ok("POST", "/queues/live/jobs", {"name": "x"})["id"]
    conn.close()
    assert kinds["stats"] and {"pushed", "completed", "failed"} <= set(kinds["stats"][0])
    assert kinds["job"][0]["eventType"] == "pushed" and kinds["job"][0]["jobId"] == added


def test_cors_is_off_by_default_and_opt_in(served: Any) -> None:
    with BackgroundServer(served, ServerConfig(port=0, http_port=0, **QUIET)) as srv:
        api = Api(srv.server.http_port or 0)
        _, headers, _ = api.raw("GET", "/queues", headers={"Origin": "https://ops.example"})
        assert "access-control-allow-origin" not in headers
        assert api.raw("OPTIONS", "/queues", headers={"Origin": "https://ops.example"})[0] == 403
    cfg = ServerConfig(port=0, http_port=0, cors_origins=("https://ops.example",), **QUIET)
    with BackgroundServer(served, cfg) as srv:
        api = Api(srv.server.http_port or 0)
        _, headers, _ = api.raw("GET", "/queues", headers={"Origin": "https://ops.example"})
        assert headers["access-control-allow-origin"] == "https://ops.example"
        status, headers, _ = api.raw(
            "OPTIONS", "/queues", headers={"Origin": "https://ops.example"}
        )
        assert status == 204 and "Authorization" in headers["access-control-allow-headers"]
        _, headers, _ = api.raw("GET", "/queues", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in headers


def test_ready_is_503_with_a_code_when_the_backend_does_not_answer(tmp_path: Any) -> None:
    from server.remote_factory import behind

    backend = behind(tmp_path, "sqlite")
    with BackgroundServer(backend, ServerConfig(port=0, http_port=0, **QUIET)) as srv:
        api = Api(srv.server.http_port or 0)
        assert api.ok("GET", "/ready")["ready"] is True
        backend.close()  # a backend that no longer answers
        status, out = api.call("GET", "/ready")
        assert (status, out["ready"], out["code"]) == (503, False, "backend_unavailable")
        assert api.call("GET", "/health")[0] == 200


def test_consume_over_http_pull_ack_fail_heartbeat(api: Api) -> None:
    assert api.ok("GET", "/queues/work/jobs")["job"] is None  # nothing yet: null, no wait
    jobs = [{"name": "a", "maxAttempts": 1}, {"name": "b", "maxAttempts": 1}]
    ids = api.ok("POST", "/queues/work/jobs/bulk", {"jobs": jobs})["ids"]
    one = api.ok("GET", "/queues/work/jobs?timeout=1000")
    assert one["job"]["id"] == ids[0] and one["token"]
    status, out = api.call("POST", f"/jobs/{ids[0]}/ack", {"token": "not-it", "result": 1})
    assert (status, out["code"]) == (409, "lease_lost")
    api.ok("POST", f"/jobs/{ids[0]}/heartbeat", {"token": one["token"], "duration": 60_000})
    api.ok("POST", f"/jobs/{ids[0]}/ack", {"token": one["token"], "result": {"sum": 3}})
    assert api.ok("GET", f"/jobs/{ids[0]}/result")["result"] == {"sum": 3}
    batch = api.ok("POST", "/queues/work/jobs/pull-batch", {"count": 5, "timeout": 0})
    assert [j["id"] for j in batch["jobs"]] == [ids[1]]
    api.ok("POST", f"/jobs/{ids[1]}/fail", {"token": batch["tokens"][0], "error": "nope"})
    assert api.ok("GET", f"/jobs/{ids[1]}/state")["state"] == "failed"
    assert api.ok("GET", "/queues/work/dlq")["entries"][0]["error"] == "nope"


def test_webhooks_add_list_disable_remove_and_errors(api: Api) -> None:
    body = {"url": "http://10.1.2.3/hook", "events": ["job.completed", "failed"], "queue": "mail"}
    added = api.ok("POST", "/webhooks", body)
    hid, secret = added["webhookId"], added["secret"]  # the server made the secret: shown once
    assert added["events"] == ["job.completed", "job.failed"] and len(secret) == 64
    assert "secret" not in api.ok("POST", "/webhooks", {**body, "secret": "mine"})
    listed = api.ok("GET", "/webhooks")
    assert listed["stats"]["total"] == 2 and listed["stats"]["enabled"] == 2
    assert secret not in json.dumps(listed) and "mine" not in json.dumps(listed)
    assert all("secret" not in h for h in listed["webhooks"])
    assert api.ok("PUT", f"/webhooks/{hid}/enabled", {"enabled": False}) == {
        "ok": True, "id": hid, "enabled": False}  # fmt: skip
    hooks = {h["id"]: h for h in api.ok("GET", "/webhooks")["webhooks"]}
    assert hooks[hid]["enabled"] is False and api.ok("GET", "/webhooks")["stats"]["enabled"] == 1
    assert api.ok("GET", f"/webhooks/{hid}/deliveries")["deliveries"] == []
    assert api.ok("DELETE", f"/webhooks/{hid}")["removed"] is True
    assert hid not in {h["id"] for h in api.ok("GET", "/webhooks")["webhooks"]}
    cases = [
        ("DELETE", f"/webhooks/{hid}", None, 404, "webhook_not_found"),
        ("PUT", f"/webhooks/{hid}/enabled", {"enabled": True}, 404, "webhook_not_found"),
        ("GET", f"/webhooks/{hid}/deliveries", None, 404, "webhook_not_found"),
        ("PUT", "/webhooks/x/enabled", {"enabled": "yes"}, 400, "validation"),
        ("POST", "/webhooks", {"url": "http://127.0.0.1:9/h", "events": ["job.failed"]},
         400, "webhook_target_refused"),
        ("POST", "/webhooks", {"url": "http://169.254.169.254/latest", "events": ["job.failed"]},
         400, "webhook_target_refused"),
        ("POST", "/webhooks", {"url": "http://10.1.2.3/h", "events": ["nope"]}, 400, "validation"),
        ("POST", "/webhooks", {"url": "ftp://x/h", "events": ["job.failed"]}, 400, "validation"),
    ]  # fmt: skip
    for method, path, b, status, code in cases:
        got, out = api.call(method, path, b)
        assert (got, out["ok"], out["code"]) == (status, False, code), (method, path, out)
    if api.token is not None:
        assert Api(api.port).call("GET", "/webhooks")[0] == 401


def test_webhook_deliveries_of_jobs_added_over_http(served: Any) -> None:
    from webhooks.receiver import receiver

    from bunq.webhooks import verify

    cfg = ServerConfig(port=0, http_port=0, webhook_allow=("127.0.0.1/32",), **QUIET)
    with BackgroundServer(served, cfg) as srv, receiver() as r:
        api = Api(srv.server.http_port or 0)
        new = {"url": r.url, "events": ["job.pushed"], "queue": "mail", "secret": "k"}
        hid = api.ok("POST", "/webhooks", new)["webhookId"]
        jid = api.ok("POST", "/queues/mail/jobs", {"name": "send", "data": {"to": "a"}})["id"]
        req = r.wait_for(1)[0]
        verify("k", req.headers, req.body)
        assert json.loads(req.body)["jobId"] == jid
        deadline = time.monotonic() + 5
        while not (log := api.ok("GET", f"/webhooks/{hid}/deliveries")["deliveries"]):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert log[0]["outcome"] == "delivered" and log[0]["job_id"] == jid
        assert api.ok("GET", "/webhooks/deliveries?limit=10")["deliveries"] == log
        assert api.ok("GET", "/webhooks")["webhooks"][0]["successCount"] == 1
