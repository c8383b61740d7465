"""WebhookRunner: webhooks delivered from the backend's job events, without bunq serve.

A Worker runs jobs; the runner reads the events (on SQLite through a second backend
object on the same file, as another process would) and a local receiver gets signed
deliveries in the shape bunq serve sends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from webhooks.receiver import receiver, until

from bunq import Queue, Worker
from bunq.errors import ConfigError
from bunq.webhooks import TargetGuard, WebhookRunner, Webhooks, verify

LOOPBACK = TargetGuard(allow=["127.0.0.1/32"])


def _handler(job: Any) -> Any:
    if job.name == "bad":
        raise RuntimeError("boom")
    return job.data["n"] * 2


def _docs(reqs: list[Any], secret: str) -> dict[str, dict[str, Any]]:
    out = {}
    for r in reqs:
        verify(secret, r.headers, r.body)
        doc = json.loads(r.body)
        out[doc["event"]] = doc
    return out


@pytest.mark.parametrize("kind", ["sqlite", "memory", "postgres", "redis"])
def test_signed_completed_and_failed_from_a_worker(make_backend: Any, tmp_path: Path,
                                                    kind: str) -> None:  # fmt: skip
    if kind == "sqlite":
        from bunq.backends.sql.sqlite import SQLiteBackend

        path = str(tmp_path / "jobs.db")
        runner_be = SQLiteBackend(path)
    else:
        runner_be = make_backend(kind)
    with receiver() as r:
        runner = WebhookRunner(runner_be, guard=LOOPBACK, backoff_ms=20, refresh_s=0.2)
        hook = runner.webhooks.add(r.url, ["job.completed", "job.failed", "job.dead"],
                                   queue="mail")  # fmt: skip
        with runner:
            assert runner.queues == ["mail"]
            # the Worker's own backend object: another process would open one the same way
            worker_be = SQLiteBackend(path) if kind == "sqlite" else runner_be
            try:
                q = Queue("mail", worker_be)
                ok = q.add("ok", {"n": 21})
                bad = q.add("bad", {"n": 0}, attempts=1)
                Queue("other", worker_be).add("ok", {"n": 1})  # no webhook listens to it
                w = Worker("mail", _handler, worker_be, idle_wait_ms=50).start()
                other = Worker("other", _handler, worker_be, idle_wait_ms=50).start()
                try:
                    reqs = r.wait_for(3)
                    time.sleep(0.3)
                finally:
                    w.close()
                    other.close()
            finally:
                if worker_be is not runner_be:
                    worker_be.close()
            until(lambda: runner.dispatcher.delivered == 3)
            log = runner.dispatcher.deliveries(hook.id)
        if kind == "sqlite":
            runner_be.close()
    assert len(r.requests) == 3
    docs = _docs(reqs, hook.secret)
    assert set(docs) == {"job.completed", "job.failed", "job.dead"}
    done, failed = docs["job.completed"], docs["job.failed"]
    assert (done["jobId"], done["queue"], done["data"]) == (ok.id, "mail", 42)
    assert (failed["jobId"], failed["terminal"]) == (bad.id, True)
    assert failed["error"] == "RuntimeError: boom"  # the message, without the stack
    assert failed["data"] == {"n": 0}  # the job's data, as bunq serve sends it
    assert docs["job.dead"]["jobId"] == bad.id
    assert {d.outcome for d in log} == {"delivered"} and len(log) == 3


def test_queues_follow_the_webhooks_and_each_event_is_delivered_once(make_backend: Any) -> None:
    be = make_backend("memory")
    with receiver() as r, WebhookRunner(be, guard=LOOPBACK, refresh_s=0.1, rescan_s=0.1) as run:
        assert run.queues == []
        other = Webhooks(be, LOOPBACK)  # another process's store object: seen on refresh
        hook = other.add(r.url, ["job.pushed"], queue="a", secret="k")
        until(lambda: run.queues == ["a"])
        job = Queue("a", be).add("x")
        Queue("b", be).add("x")
        [req] = r.wait_for(1)
        time.sleep(0.3)
        assert len(r.requests) == 1
        doc = json.loads(req.body)
        assert doc["event"] == "job.pushed" and doc["jobId"] == job.id
        verify("k", req.headers, req.body)
        other.add(r.url, ["job.pushed"], secret="k")  # every queue: b is read too
        until(lambda: run.queues == ["a", "b"])
        other.remove(hook.id)
        Queue("b", be).add("y")
        r.wait_for(2)
        time.sleep(0.3)
        assert len(r.requests) == 2
    assert json.loads(r.requests[1].body)["queue"] == "b"


def test_a_backend_bunq_serve_serves_is_refused(make_backend: Any) -> None:
    from server.remote_factory import QUIET

    from bunq.backends import connect
    from bunq.server.app import BackgroundServer
    from bunq.server.context import ServerConfig

    cfg = ServerConfig(port=0, http_port=None, **QUIET)
    with BackgroundServer(make_backend("memory"), cfg) as srv:
        remote = connect(f"bunq://127.0.0.1:{srv.port}")
        try:
            with pytest.raises(ConfigError, match="bunq serve delivers"):
                WebhookRunner(remote)
        finally:
            remote.close()


def test_the_cli_runs_a_runner_until_sigterm(tmp_path: Path) -> None:
    from bunq.backends.sql.sqlite import SQLiteBackend
    from bunq.tick import tick

    path = tmp_path / "jobs.db"
    url = f"sqlite:///{path}"
    be = SQLiteBackend(str(path))
    try:
        with receiver() as r:
            hook = Webhooks(be, LOOPBACK).add(r.url, ["job.completed"], queue="mail")
            env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
            proc = subprocess.Popen(
                [sys.executable, "-m", "bunq", "webhooks", "run", "--backend", url,
                 "--allow", "127.0.0.1/32", "--log-format", "text"],
                stderr=subprocess.PIPE, text=True, env=env,
            )  # fmt: skip
            try:
                assert proc.stderr is not None
                line = proc.stderr.readline()
                assert "bunq webhooks: delivering from sqlite" in line, line
                job = Queue("mail", be).add("x", {"n": 2})
                tick("mail", _handler, be, max=10)
                [req] = r.wait_for(1)
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(20) == 0
                assert "delivered 1" in proc.stderr.read()
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        doc = json.loads(req.body)
        verify(hook.secret, req.headers, req.body)
        assert (doc["event"], doc["jobId"], doc["data"]) == ("job.completed", job.id, 4)
    finally:
        be.close()


def test_to_wire_is_what_the_server_sends_and_bunq_reads_back() -> None:
    from bunq.backends.remote_events import from_wire
    from bunq.jobevents import EventKind, JobEvent, to_wire
    from bunq.stacks import with_stack

    data = {
        EventKind.COMPLETED: {"result": {"r": 1}},
        EventKind.FAILED: {"error": with_stack("E: no", ["at x"]), "will_retry": True},
        EventKind.PROGRESS: {"progress": 40},
        EventKind.DELAYED: {"delay": 500},
        EventKind.REMOVED: {"prev": "waiting"},
        EventKind.CANCELLED: {"prev": "active"},
    }
    for kind in EventKind:
        ev = JobEvent(kind, "q", "7", 1000, data.get(kind, {}))
        doc = to_wire(ev, job_data={"d": 1})
        if kind is EventKind.WAITING:
            assert doc is None  # an add is "pushed" already
            continue
        assert doc is not None and doc["queue"] == "q" and doc["timestamp"] == 1000.0
        back = from_wire(doc)
        assert back is not None and back.kind is kind, (kind, doc)
    failed = to_wire(JobEvent(EventKind.FAILED, "q", "7", 1, data[EventKind.FAILED]), {"d": 1})
    assert failed == {"eventType": "failed", "queue": "q", "jobId": "7", "timestamp": 1.0,
                      "error": "E: no", "data": {"d": 1}, "terminal": False}  # fmt: skip
    done = to_wire(JobEvent(EventKind.COMPLETED, "q", "7", 1, {"result": 5}))
    assert done is not None and (done["eventType"], done["data"]) == ("completed", 5)
