"""The one settler (bunq.execution.settle), driven by each driver that uses it.

Every test runs the same jobs through ``tick()`` and a ``Worker`` over each
local backend and asserts the same stored outcome: the drivers share one
settle path, so they must not differ in what they record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from bunq import FailureReason, JobState, Queue, Worker, tick
from bunq.errors import BackendUnavailable
from bunq.execution import give_back, settle_batch
from bunq.execution.run import Outcome
from bunq.stacks import split

BACKENDS = ["sqlite", "memory", "remote", pytest.param("postgres", marks=pytest.mark.postgres),
            pytest.param("redis", marks=pytest.mark.redis)]  # fmt: skip
DRIVERS = ["tick", "worker"]
Handler = Callable[[Any], Any]


class FailOnce:
    """Delegate to a real backend; the first call of each method in ``fail`` raises
    BackendUnavailable (a database that went away for a moment)."""

    def __init__(self, inner: Any, fail: set[str]) -> None:
        self._inner, self._fail = inner, fail
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._fail:
            return attr

        def once(*a: Any, **kw: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            if self.calls[name] == 1:
                raise BackendUnavailable("injected: the database went away")
            return attr(*a, **kw)

        return once


def wait_for(pred: Callable[[], bool], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def drain(driver: str, backend: Any, handler: Handler, n: int) -> dict[str, int]:
    """Run ``n`` jobs of queue ``s`` through ``driver`` once; return (succeeded, failed)."""
    if driver == "tick":
        r = tick("s", handler, backend, max=n, loop_while_more=True)
        assert r.unsettled == 0 and r.stale == 0
        return {"succeeded": r.succeeded, "failed": r.failed}
    w = Worker("s", handler, backend, batch=n).start()
    try:
        wait_for(lambda: w.processed + w.failed >= n)
    finally:
        w.close()
    return {"succeeded": w.processed, "failed": w.failed}


@pytest.fixture(params=BACKENDS)
def queue(request: Any, make_backend: Callable[..., Any]) -> Queue:
    return Queue("s", make_backend(request.param))


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_batch_with_a_success_an_unstorable_result_and_a_failure(
        driver: str, queue: Queue, caplog: Any) -> None:  # fmt: skip
    boom = queue.add("boom", attempts=3, backoff=3_600_000)  # fails: retried in an hour
    ok = queue.add("ok", 1)  # completed in the same batch as an unstorable result:
    weird = queue.add("weird", attempts=3)  # not worth a retry (it would be refused again)

    def handler(job: Any) -> Any:
        if job.name == "boom":
            raise RuntimeError("no")
        return object() if job.name == "weird" else job.data + 1

    assert drain(driver, queue.backend, handler, 3) == {"succeeded": 1, "failed": 2}
    assert queue.get_job(ok.id).result == 2
    dead = queue.get_job(weird.id)
    assert dead.reason is FailureReason.EXPLICIT_FAIL and "serialisable" in (dead.error or "")
    assert [e.job.id for e in queue.dlq.list()] == [weird.id]
    retried = queue.get_job(boom.id)
    assert (retried.state, retried.attempts) == (JobState.DELAYED, 1)
    message, stack = split(retried.error)
    assert message == "RuntimeError: no" and stack is not None and "at handler" in stack[1]
    assert "stale" not in caplog.text  # the refused batch wrote nothing: no lease was lost


@pytest.mark.parametrize("driver", DRIVERS)
def test_backend_unavailable_once_is_retried_not_lost(driver: str, queue: Queue) -> None:
    ok = queue.add("ok", 1)
    boom = queue.add("boom", attempts=3, backoff=3_600_000)
    flaky = FailOnce(queue.backend, {"complete_many", "fail"})

    def handler(job: Any) -> Any:
        if job.name == "boom":
            raise RuntimeError("no")
        return job.data

    assert drain(driver, flaky, handler, 2) == {"succeeded": 1, "failed": 1}
    assert flaky.calls == {"complete_many": 2, "fail": 2}  # each settled on its second try
    assert queue.get_job(ok.id).state is JobState.COMPLETED
    assert queue.get_job(boom.id).attempts == 1


@pytest.mark.parametrize("driver", DRIVERS)
def test_unstarted_leases_are_given_back_with_their_attempt_unspent(
        driver: str, queue: Queue) -> None:  # fmt: skip
    queue.add_bulk([("n", i) for i in range(5)])
    ran: list[int] = []
    if driver == "tick":
        r = tick("s", ran.append, queue.backend, max=5, stop=lambda: len(ran) >= 2)
        assert (r.leased, r.succeeded, r.released) == (5, 2, 3)
    else:
        w = Worker("s", ran.append, queue.backend, batch=5)

        def handler(job: Any) -> None:
            ran.append(job.data)
            if len(ran) == 2:  # stop the worker with three jobs of its batch unstarted
                threading.Thread(target=w.close).start()
                wait_for(w._stop.is_set)

        w.handler = handler
        w.start()
        wait_for(lambda: not w.running)
    assert len(ran) == 2
    counts = queue.counts()
    assert (counts["completed"], counts["waiting"]) == (2, 3)
    assert [j.attempts for j in queue.get_jobs("waiting")] == [0, 0, 0]


def test_give_back_counts_a_lease_lost_meanwhile_as_stale(make_backend: Any) -> None:
    q = Queue("s", make_backend("sqlite"))
    q.add_bulk([("n", 1), ("n", 2)])
    backend = q.backend
    first, second = backend.lease("s", 2, 30_000, "me")
    assert settle_batch(backend, [(first, Outcome(True, "done"))])[0].kind == "succeeded"
    assert [a.value for a in give_back(backend, [first, second])] == ["stale", "ok"]
    assert q.get_job(second.id).state is JobState.WAITING and q.get_job(second.id).attempts == 0
