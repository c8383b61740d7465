"""bunqueue's own ``QueueEvents`` (npm ``bunqueue`` 2.9.5, on bun) listening to ``bunq serve``.

``tests/compat/js/events.mjs`` subscribes a QueueEvents, runs a bunqueue
Worker over three good jobs, one that fails for good and one that fails once
then succeeds, and reports what the listener heard; ``job.waitUntilFinished``
(``WaitJob`` over TCP) waits for a good job and for the one that fails.
"""

from __future__ import annotations

from typing import Any

from compat.conftest import TOKEN
from compat.test_js_client import run_js


def check(out: dict[str, Any]) -> None:
    ids, seen = out["ids"], out["seen"]
    ok, bad, flaky = ids["ok"], ids["bad"], ids["flaky"]
    every = [*ok, bad, flaky]
    assert [e["jobId"] for e in seen["waiting"]] == every
    assert sorted(e["jobId"] for e in seen["active"]) == sorted([*every, flaky])  # flaky twice
    completed = {e["jobId"]: e["returnvalue"] for e in seen["completed"]}
    assert completed == {ok[0]: {"double": 0}, ok[1]: {"double": 2}, ok[2]: {"double": 4}} | {
        flaky: {"double": 20}
    }
    failed = {e["jobId"]: (e["failedReason"], e["data"]) for e in seen["failed"]}
    assert failed == {bad: ("boom", {"fail": True}), flaky: ("first try fails", {"flaky": True})}
    assert seen["retried"] == [{"jobId": flaky, "prev": "failed"}]
    assert sorted(e["jobId"] for e in seen["progress"]) == sorted([*ok, flaky])
    assert {e["data"] for e in seen["progress"]} == {50}
    assert out["finished"] == {"double": 0}  # queue.waitJobUntilFinished heard `completed`
    # job.waitUntilFinished over TCP (WaitJob): the return value; a dead-lettered job
    # rejects at once (bunqueue's client reads `completed: false` as its timeout error)
    assert out["waitedResult"] == {"double": 2}
    assert out["waitedAgain"] == {"double": 2} and out["againMs"] < 1000
    assert "timed out" in out["waitedFailure"]["rejected"]
    assert out["heardElsewhere"] == []  # a listener of another queue hears nothing
    assert out["errors"] == ["Error: boom", "Error: first try fails"]  # QueueEvents' own echo


def test_js_queue_events_hear_completed_and_failed(compat_server: Any) -> None:
    check(run_js(compat_server.port, script="events.mjs"))


def test_js_queue_events_with_auth_token(auth_server: Any) -> None:
    check(run_js(auth_server.port, TOKEN, script="events.mjs"))
