"""bunqueue's JS client drives per-job operations against ``bunq serve``."""

from __future__ import annotations

from typing import Any

from compat.test_js_client import run_js


def test_js_client_promote_change_priority_retry_completed(compat_server: Any) -> None:
    out = run_js(compat_server.port, script="jobops.mjs")
    assert (out["delayed"], out["promoted"]) == ("delayed", "waiting")
    assert out["promotedMany"] == 1 and out["later2"] == "waiting"
    assert out["parked"] == "delayed" and out["gone"] is None
    assert out["perPriority"] == {"0": 4, "5": 1, "10": 1}
    # the reprioritised job runs first, then priority 5, then the rest in admission order
    assert out["order"] == ["low", "high", "later", "later2", "edited"], out["order"]
    assert out["editedData"] == 50
    assert out["countsDone"]["completed"] == 5 and out["countsDone"]["delayed"] == 1
    assert out["lowAfterRetry"] == "waiting"
    assert out["countsRetried"]["waiting"] == 5 and out["countsRetried"]["completed"] == 0
    assert out["secondRun"] == 5 and out["countsFinal"]["completed"] == 5


def test_js_client_cancels_a_job_a_bunq_worker_runs(compat_server: Any) -> None:
    import time

    from bunq import FailureReason, JobContext, JobState, Queue, Worker
    from bunq.backends.remote import RemoteBackend

    backend = RemoteBackend("127.0.0.1", compat_server.port)
    q = Queue("compat-cancel", backend)
    saw: list[bool] = []

    def handle(job: Any, ctx: JobContext) -> str:
        saw.append(ctx.cancelled.wait(20))
        return "stopped"

    job = q.add("long", job_id="cancel-me", attempts=3)
    worker = Worker("compat-cancel", handle, backend, lease_ms=5000).start()
    try:
        end = time.monotonic() + 10
        while q.get_state(job.id) is not JobState.ACTIVE:
            assert time.monotonic() < end
            time.sleep(0.02)
        out = run_js(compat_server.port, script="cancel.mjs")
    finally:
        worker.close()
    assert (out["before"], out["after"]) == ("active", "failed")
    assert saw == [True]
    done = q.get_job(job.id)
    assert done is not None and done.reason is FailureReason.CANCELLED and done.attempts == 1
    backend.close()
