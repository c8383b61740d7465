"""``/metrics`` as Prometheus reads it: parsed with prometheus_client's own parsers."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text
from server.raw import Raw

from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig


@pytest.fixture
def srv(served: Any) -> Iterator[BackgroundServer]:
    with BackgroundServer(served, ServerConfig(port=0, http_port=0, scrape_cache=0.0)) as s:
        yield s


def request(port: int, method: str, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, headers=headers)
    r = conn.getresponse()
    out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    conn.close()
    return out


def test_metrics_parse_with_build_info_process_and_no_created(srv: BackgroundServer) -> None:
    c = Raw(srv.port)
    c.call({"cmd": "PUSHB", "queue": "m", "jobs": [{"data": 1}, {"data": 2}]})
    c.call({"cmd": "PULLB", "queue": "m", "count": 1, "timeout": 0, "owner": "w"})
    c.call({"cmd": "PULLB", "queue": "empty", "count": 1, "timeout": 300, "owner": "w"})
    status, headers, body = request(srv.server.http_port, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    fams = {f.name: f for f in parse_text(body.decode())}
    samples = [s for f in fams.values() for s in f.samples]
    assert not [s.name for s in samples if s.name.endswith("_created")]
    [info] = fams["bunq_build_info"].samples
    assert info.value == 1 and {"version", "core", "python"} <= set(info.labels)
    assert "process_resident_memory_bytes" in fams and "python_info" in fams
    jobs = {(s.labels["queue"], s.labels["state"]): s.value
            for s in fams["bunq_queue_jobs"].samples}  # fmt: skip
    assert jobs[("m", "waiting")] == 1 and jobs[("m", "active")] == 1
    assert ("m", "failed") in jobs and not [k for k in jobs if k[1] == "dlq"]
    # the long poll's 300 ms wait is timed apart from command latency
    latency = {s.labels["cmd"] for s in fams["bunq_command_duration_seconds"].samples}
    polls = [s for s in fams["bunq_long_poll_duration_seconds"].samples
             if s.name.endswith("_sum")]  # fmt: skip
    assert [(s.labels["cmd"], s.value >= 0.25) for s in polls] == [("PULLB", True)]
    assert "PULLB" in latency  # the one without a timeout
    c.close()


def test_openmetrics_when_the_scraper_asks(srv: BackgroundServer) -> None:
    accept = "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
    status, headers, body = request(srv.server.http_port, "GET", "/metrics", Accept=accept)
    assert status == 200 and headers["content-type"].startswith("application/openmetrics-text")
    text = body.decode()
    assert text.rstrip().endswith("# EOF")
    assert "bunq_build_info" in {f.name for f in parse_om(text)}


def test_head_and_stats_counts(srv: BackgroundServer) -> None:
    port = srv.server.http_port
    status, headers, body = request(port, "HEAD", "/health")
    assert status == 200 and body == b"" and headers["content-type"] == "application/json"
    assert request(port, "POST", "/health")[0] == 405
    Raw(srv.port).call({"cmd": "PUSH", "queue": "s", "data": 1})
    stats = json.loads(request(port, "GET", "/stats")[2])
    assert stats["jobs"]["waiting"] == 1 and "failed" in stats["jobs"]
    assert all(type(v) is int for v in stats["totals"].values())
