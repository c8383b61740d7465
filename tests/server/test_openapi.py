"""/openapi.json describes every route, and every route answers as it says.

The document is checked as OpenAPI 3.1 (openapi-spec-validator); then each
route of the table is called with an example request whose body must match
the documented request schema, and the reply must match the documented
schema of its status. The examples must cover the route table exactly: a new
route without an example fails here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from server.httpapi import Api
from server.remote_factory import QUIET

from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig
from bunq.server.http import ROUTES
from bunq.tick import tick

jsonschema = pytest.importorskip("jsonschema")
spec_validator = pytest.importorskip("openapi_spec_validator")

TOKEN = "contract-token"

# (method, path template) -> (concrete path, body); {job}, {dead}, {w0}/{t0} (a pulled job and
# its lock token) ... are filled in by the test
EXAMPLES: dict[tuple[str, str], tuple[str, Any]] = {
    ("GET", "/health"): ("/health", None),
    ("GET", "/healthz"): ("/healthz", None),
    ("GET", "/live"): ("/live", None),
    ("GET", "/prometheus"): ("/prometheus", None),
    ("GET", "/ready"): ("/ready", None),
    ("GET", "/ping"): ("/ping", None),
    ("GET", "/metrics"): ("/metrics", None),
    ("GET", "/stats"): ("/stats", None),
    ("GET", "/openapi.json"): ("/openapi.json", None),
    ("GET", "/queues"): ("/queues?limit=10", None),
    ("GET", "/queues/{queue}"): ("/queues/c", None),
    ("GET", "/queues/{queue}/paused"): ("/queues/c/paused", None),
    ("GET", "/queues/{queue}/counts"): ("/queues/c/counts", None),
    ("POST", "/queues/{queue}/pause"): ("/queues/other/pause", None),
    ("POST", "/queues/{queue}/resume"): ("/queues/other/resume", None),
    ("POST", "/queues/{queue}/drain"): ("/queues/other/drain", None),
    ("POST", "/queues/{queue}/clean"): ("/queues/c/clean", {"grace": 0, "state": "completed"}),
    ("POST", "/queues/{queue}/obliterate"): ("/queues/other/obliterate", {"force": True}),
    ("GET", "/queues/{queue}/limits"): ("/queues/c/limits", None),
    ("PUT", "/queues/{queue}/rate-limit"): ("/queues/c/rate-limit", {"limit": 5, "duration": 1000}),
    ("DELETE", "/queues/{queue}/rate-limit"): ("/queues/c/rate-limit", None),
    ("PUT", "/queues/{queue}/concurrency"): ("/queues/c/concurrency", {"concurrency": 2}),
    ("DELETE", "/queues/{queue}/concurrency"): ("/queues/c/concurrency", None),
    ("POST", "/queues/{queue}/jobs"): ("/queues/c/jobs", {"name": "n", "data": [1], "priority": 2}),
    ("POST", "/queues/{queue}/jobs/bulk"): ("/queues/c/jobs/bulk", {"jobs": [{"name": "b"}]}),
    ("GET", "/queues/{queue}/jobs/list"): ("/queues/c/jobs/list?state=waiting&limit=1", None),
    ("GET", "/jobs/search"): ("/jobs/search?q={job}", None),
    ("GET", "/jobs/custom/{id}"): ("/jobs/custom/custom-1", None),
    ("GET", "/jobs/{id}"): ("/jobs/{job}", None),
    ("GET", "/jobs/{id}/state"): ("/jobs/{job}/state", None),
    ("GET", "/jobs/{id}/result"): ("/jobs/{job}/result", None),
    ("GET", "/jobs/{id}/progress"): ("/jobs/{job}/progress", None),
    ("POST", "/jobs/{id}/progress"): ("/jobs/{job}/progress", {"progress": 10}),
    ("GET", "/jobs/{id}/logs"): ("/jobs/{job}/logs", None),
    ("POST", "/jobs/{id}/logs"): ("/jobs/{job}/logs", {"message": "hello"}),
    ("GET", "/jobs/{id}/children"): ("/jobs/{job}/children", None),
    ("DELETE", "/jobs/{id}"): ("/jobs/{job}", None),
    ("POST", "/jobs/{id}/retry"): ("/jobs/{job}/retry", None),
    ("POST", "/jobs/{id}/promote"): ("/jobs/{job}/promote", None),
    ("POST", "/jobs/{id}/cancel"): ("/jobs/{job}/cancel", None),
    ("POST", "/jobs/{id}/discard"): ("/jobs/{job}/discard", None),
    ("PUT", "/jobs/{id}/priority"): ("/jobs/{job}/priority", {"priority": 5}),
    ("PUT", "/jobs/{id}/delay"): ("/jobs/{job}/delay", {"delay": 1000}),
    ("GET", "/queues/{queue}/jobs"): ("/queues/empty/jobs?timeout=0", None),
    ("POST", "/queues/{queue}/jobs/pull-batch"): ("/queues/empty/jobs/pull-batch", {"count": 2}),
    ("POST", "/jobs/{id}/ack"): ("/jobs/{w0}/ack", {"token": "{t0}", "result": {"r": 1}}),
    ("POST", "/jobs/{id}/fail"): ("/jobs/{w1}/fail", {"token": "{t1}", "error": "no"}),
    ("POST", "/jobs/{id}/heartbeat"): ("/jobs/{w2}/heartbeat", {"token": "{t2}"}),
    ("GET", "/queues/{queue}/dlq"): ("/queues/d/dlq?limit=5", None),
    ("GET", "/queues/{queue}/dlq/stats"): ("/queues/d/dlq/stats", None),
    ("POST", "/queues/{queue}/dlq/retry"): ("/queues/d/dlq/retry", {"jobId": "{dead}"}),
    ("POST", "/queues/{queue}/dlq/purge"): ("/queues/d/dlq/purge", None),
    ("DELETE", "/queues/{queue}/dlq/{id}"): ("/queues/d/dlq/{dead2}", None),
    ("GET", "/crons"): ("/crons", None),
    ("POST", "/crons"): ("/crons", {"name": "every", "queue": "c", "repeatEvery": 60000}),
    ("GET", "/crons/{name}"): ("/crons/every", None),
    ("DELETE", "/crons/{name}"): ("/crons/every", None),
    ("GET", "/workers"): ("/workers", None),
    ("GET", "/webhooks"): ("/webhooks", None),
    ("POST", "/webhooks"): (
        "/webhooks",
        {"url": "http://10.0.0.1/hook", "events": ["job.dead"], "queue": "nohooks"},
    ),
    ("PUT", "/webhooks/{id}/enabled"): ("/webhooks/{hook}/enabled", {"enabled": False}),
    ("GET", "/webhooks/deliveries"): ("/webhooks/deliveries?limit=5", None),
    ("GET", "/webhooks/{id}/deliveries"): ("/webhooks/{hook}/deliveries", None),
    ("DELETE", "/webhooks/{id}"): ("/webhooks/{hook}", None),
    ("GET", "/events"): ("/events", None),
    ("GET", "/events/queues/{queue}"): ("/events/queues/c", None),
    ("GET", "/"): ("/", None),
    ("GET", "/ui/{file}"): ("/ui/app.js", None),
}


@pytest.fixture
def api(served: Any) -> Iterator[Api]:
    cfg = ServerConfig(port=0, http_port=0, tokens=(TOKEN,), **QUIET)
    with BackgroundServer(served, cfg) as srv:
        yield Api(srv.server.http_port or 0, TOKEN)


def _resolve(schema: Any, doc: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if ref is not None:
            node: Any = doc
            for part in ref.lstrip("#/").split("/"):
                node = node[part]
            return _resolve(node, doc)
        return {k: _resolve(v, doc) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_resolve(v, doc) for v in schema]
    return schema


def test_the_document_is_valid_openapi_and_lists_every_route(api: Api) -> None:
    doc = json.loads(api.raw("GET", "/openapi.json")[2])
    spec_validator.validate(doc)
    listed = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert listed == {(r.method, r.path) for r in ROUTES}


def test_every_route_answers_as_documented(api: Api, served: Any) -> None:
    assert set(EXAMPLES) == {(r.method, r.path) for r in ROUTES}, "a route without an example"
    doc = json.loads(api.raw("GET", "/openapi.json")[2])
    job = api.ok("POST", "/queues/c/jobs", {"name": "x"})["id"]
    api.ok("POST", "/queues/c/jobs", {"name": "x", "jobId": "custom-1"})
    dead = [
        api.ok("POST", "/queues/d/jobs", {"name": "x", "maxAttempts": 1})["id"] for _ in range(2)
    ]

    def boom(j: Any) -> None:
        raise RuntimeError("boom")

    tick("d", boom, served, max=10)
    hook = api.ok("POST", "/webhooks", {"url": "http://10.0.0.1/h", "events": ["job.dead"],
                                        "queue": "nohooks"})["webhookId"]  # fmt: skip
    names = {"job": job, "dead": dead[0], "dead2": dead[1], "hook": hook}
    for i in range(3):
        api.ok("POST", "/queues/w/jobs", {"name": "w"})
        pulled = api.ok("GET", "/queues/w/jobs")
        names[f"w{i}"], names[f"t{i}"] = pulled["job"]["id"], pulled["token"]
    # reads first, then writes, deletions and purges last (they remove what others read)
    order = sorted(EXAMPLES, key=lambda k: (k[0] == "DELETE", "purge" in k[1]))
    for method, template in order:
        path, body = EXAMPLES[(method, template)]
        path = path.format_map(names)
        if isinstance(body, dict):
            body = {k: (v.format_map(names) if isinstance(v, str) else v) for k, v in body.items()}
        op = doc["paths"][template][method.lower()]
        if body is not None:
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            jsonschema.validate(body, _resolve(schema, doc))
        if template.startswith("/events"):
            _check_stream(api, path)
            continue
        data = None if body is None else json.dumps(body).encode()
        status, headers, raw = api.raw(method, path, data)
        answer = op["responses"].get(str(status))
        assert answer is not None, (method, path, status, raw[:200])
        media, content = next(iter(answer["content"].items()))
        assert headers["content-type"].split(";")[0] == media.split(";")[0], (method, path)
        if media == "application/json":
            jsonschema.validate(json.loads(raw), _resolve(content["schema"], doc))
        if (
            template.startswith("/jobs/{id}")
            and method not in ("GET", "POST")
            or template
            in ("/jobs/{id}/retry", "/jobs/{id}/promote", "/jobs/{id}/cancel", "/jobs/{id}/discard")
        ):  # issue 15's operations: 501 until the backend has them (or its own refusal)
            assert status in (200, 400, 404, 409, 501), (method, path, raw)
        else:
            assert status == 200, (method, path, raw[:300])


def _check_stream(api: Api, path: str) -> None:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    conn.request("GET", path + "?interval=0.2", headers={"Authorization": f"Bearer {TOKEN}"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    assert resp.fp.readline().startswith(b": bunq")
    conn.close()
