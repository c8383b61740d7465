"""bunqueue's Python client (PyPI ``bunqueue-client``, import ``bunqueue``) against bunq serve."""

from __future__ import annotations

import importlib.util
import threading
import time
from typing import Any

import pytest
from compat.conftest import TOKEN, missing


@pytest.fixture(autouse=True)
def _client_installed() -> None:
    if importlib.util.find_spec("bunqueue") is None:
        missing("bunqueue-client (pip install bunqueue-client)")


def wait_for(pred: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_python_client_push_pull_ack_fail_counts(compat_server: Any) -> None:
    import bunqueue

    q = bunqueue.Queue("compat-py", port=compat_server.port)
    first = q.add("first", {"n": 1}, priority=5)
    bad = q.add("bad", {"fail": True}, attempts=1)
    ids = q.add_bulk([{"name": "bulk", "data": {"n": i}} for i in range(30)])
    assert len(ids) == 30 and q.count() == 32
    assert q.get_job_counts()["waiting"] == 32
    assert q.get_job("missing-id") is None
    results: list[Any] = []

    def process(job: Any) -> Any:
        if job.data.get("fail"):
            raise ValueError("boom")
        results.append(job.data["n"])
        return {"double": job.data["n"] * 2}

    w = bunqueue.Worker(
        "compat-py", process, port=compat_server.port, concurrency=4, poll_timeout_ms=200
    )
    try:
        wait_for(lambda: q.get_job_counts()["completed"] == 31)
    finally:
        w.close()
    counts = q.get_job_counts()
    assert counts["failed"] == 1 and counts["waiting"] == counts["active"] == 0
    assert q.get_state(bad.id) == "failed" and q.get_state(first.id) == "completed"
    assert q.get_result(first.id) == {"double": 2}
    job = q.get_job(first.id)
    assert job is not None and job.raw["name"] == "first" and job.attempts == 1
    dlq = q.get_dlq()
    assert [j["id"] for j in dlq] == [bad.id]
    assert q.retry_dlq() == 1 and q.get_job_counts()["waiting"] == 1
    q.close()


def test_python_client_heartbeat_keeps_a_long_job(compat_server: Any) -> None:
    import bunqueue

    q = bunqueue.Queue("compat-beat", port=compat_server.port)
    j = q.add("slow", {"n": 1})
    started = threading.Event()

    def process(job: Any) -> Any:
        started.set()
        job.heartbeat()  # JobHeartbeat {id, token}
        job.extend_lock(800)  # ExtendLock {id, token, duration}
        time.sleep(1.5)  # past the 500 ms lock: only the worker's JobHeartbeatB keeps it
        return "done"

    w = bunqueue.Worker(
        "compat-beat",
        process,
        port=compat_server.port,
        concurrency=1,
        lock_ttl_ms=500,
        heartbeat_interval_s=0.1,
        poll_timeout_ms=200,
    )
    try:
        wait_for(lambda: q.get_state(j.id) == "completed")
    finally:
        w.close()
    got = q.get_job(j.id)
    assert got is not None and got.attempts == 1 and got.raw["returnvalue"] == "done"
    q.close()


def test_python_client_control_and_cron(compat_server: Any) -> None:
    import bunqueue

    q = bunqueue.Queue("compat-ctl", port=compat_server.port)
    q.pause()
    assert q.is_paused()
    q.add("a", {"x": 1})
    assert q.get_job_counts()["paused"] == 1
    q.resume()
    assert not q.is_paused() and q.drain() == 1
    q.upsert_job_scheduler("every-100", {"every": 100}, {"name": "tick", "data": {"k": 1}})
    assert [s["name"] for s in q.get_job_schedulers()] == ["every-100"]
    wait_for(lambda: q.get_job_counts()["waiting"] >= 1, timeout=5)
    q.remove_job_scheduler("every-100")
    assert q.get_job_schedulers() == []
    assert q.ping() and q.get_stats()["waiting"] >= 1
    q.close()


def test_python_client_needs_the_token(auth_server: Any) -> None:
    import bunqueue

    anon = bunqueue.Queue("compat-auth", port=auth_server.port)
    with pytest.raises(bunqueue.CommandError, match="Not authenticated"):
        anon.add("x", {})
    anon.close()
    wrong = bunqueue.Queue("compat-auth", port=auth_server.port, token="nope")
    with pytest.raises(bunqueue.AuthError):
        wrong.add("x", {})
    wrong.close()
    q = bunqueue.Queue("compat-auth", port=auth_server.port, token=TOKEN)
    assert q.add("x", {}).id and q.count() == 1
    q.close()


def test_python_client_wait_for_job(compat_server: Any) -> None:
    """``Queue.wait_for_job`` sends WaitJob: the result, or CommandError for a dead job."""
    import bunqueue
    from bunqueue.errors import CommandError

    q = bunqueue.Queue("compat-py-wait", port=compat_server.port)
    good = q.add("good", {"n": 4})
    bad = q.add("bad", {"fail": True}, attempts=1)

    def process(job: Any) -> Any:
        if job.data.get("fail"):
            raise ValueError("boom")
        return {"double": job.data["n"] * 2}

    w = bunqueue.Worker("compat-py-wait", process, port=compat_server.port, poll_timeout_ms=200)
    try:
        assert q.wait_for_job(good.id, 10_000) == {"double": 8}
        t0 = time.monotonic()
        with pytest.raises(CommandError):
            q.wait_for_job(bad.id, 10_000)
        assert time.monotonic() - t0 < 5.0  # answered when dead-lettered, not at the timeout
    finally:
        w.close()
