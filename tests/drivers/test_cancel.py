"""queue.cancel() and the handler context (ctx), through the Worker and tick().

A running job's cancel is a request the driver polls; the handler sees it
(``ctx.cancelled`` in a sync handler, CancelledError in a coroutine) and the job
settles as cancelled: dead-lettered with reason ``cancelled``, not retried.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import bunq
from bunq import EventKind, FailureReason, JobState, Queue, QueueEvents, Worker, tick
from bunq.execution import takes_context
from bunq.execution.context import cancel_ns

BACKENDS = ["sqlite", "memory", "remote", pytest.param("postgres", marks=pytest.mark.postgres),
            pytest.param("redis", marks=pytest.mark.redis)]  # fmt: skip


def until(pred: Callable[[], bool], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.02)


class Handlers:
    """A sync and a coroutine handler that run until cancelled, noting what they saw."""

    def __init__(self) -> None:
        self.saw: list[str] = []

    def sync(self, job: Any, ctx: bunq.JobContext) -> str:
        ctx.log("started")
        if ctx.cancelled.wait(20):
            self.saw.append("flag")
        return "finished anyway"  # a cancelled job settles cancelled however it returns

    async def coro(self, job: Any, ctx: bunq.JobContext) -> str:
        ctx.log("started")
        try:
            await asyncio.sleep(20)
        except asyncio.CancelledError:
            self.saw.append("CancelledError")
            raise
        return "not cancelled"


def run_driver(driver: str, backend: Any, handler: Any) -> Callable[[], None]:
    """Start ``driver`` on queue ``c`` in a thread; return its stop function."""
    if driver in ("worker", "worker-threads"):  # threads: a pool, or the crew (memory)
        n = 3 if driver == "worker-threads" else 1
        w = Worker("c", handler, backend, lease_ms=2000, idle_wait_ms=50, concurrency=n).start()
        return lambda: w.close()
    stop = threading.Event()
    t = threading.Thread(target=lambda: tick("c", handler, backend, max=1, lease_ms=2000,
                                             stop=stop.is_set), daemon=True)  # fmt: skip
    t.start()
    return lambda: (stop.set(), t.join(30))  # type: ignore[func-returns-value]


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("driver", ["worker", "worker-threads", "tick"])
@pytest.mark.parametrize("style", ["sync", "coro"])
def test_cancel_a_running_job(kind: str, driver: str, style: str, make_backend: Any) -> None:
    backend = make_backend(kind)
    q = Queue("c", backend)
    h = Handlers()
    job = q.add("long", attempts=3)
    with QueueEvents("c", backend) as events:
        stop = run_driver(driver, backend, getattr(h, style))
        try:
            until(lambda: q.get_logs(job.id) == ["started"])
            assert q.get_state(job.id) is JobState.ACTIVE
            q.cancel(job.id)
            with pytest.raises(bunq.JobCancelled):
                q.wait(job.id, 20)
        finally:
            stop()
        kinds = [e.kind for e in events.stream(timeout=0.5) if e.job_id == job.id]
    assert h.saw == ["flag" if style == "sync" else "CancelledError"]
    done = q.get_job(job.id)
    assert done is not None and done.state is JobState.FAILED
    assert done.reason is FailureReason.CANCELLED and done.attempts == 1  # not retried
    assert [e.reason for e in q.dlq.list()] == [FailureReason.CANCELLED]
    assert backend.kv_list(cancel_ns("c")) == {}  # the request is gone once settled
    if kind != "remote":  # bunq serve publishes its own events (tests/server)
        assert kinds[-1] is EventKind.CANCELLED and EventKind.FAILED not in kinds


@pytest.mark.parametrize("kind", BACKENDS)
def test_cancel_a_waiting_job_removes_it(kind: str, make_backend: Any) -> None:
    backend = make_backend(kind)
    q = Queue("c", backend)
    job = q.add("later", delay=60_000)
    q.cancel(job.id)
    assert q.get_job(job.id) is None
    with pytest.raises(bunq.JobNotFound):
        q.cancel(job.id)
    done = q.add("x")
    lease = backend.lease("c", 1, 5000)[0]
    backend.complete(lease, 1)
    with pytest.raises(bunq.JobStateError):
        q.cancel(done.id)


def test_a_request_for_a_job_that_finished_first_is_pruned(make_backend: Any) -> None:
    backend = make_backend("sqlite")
    q = Queue("c", backend)
    job = q.add("quick")
    lease = backend.lease("c", 1, 5000)[0]
    q.cancel(job.id)  # active: a request is written...
    backend.complete(lease, "done")  # ...but it finishes before any driver sees it
    assert list(backend.kv_list(cancel_ns("c"))) == [job.id]
    w = Worker("c", lambda j: None, backend, sweep_interval_ms=1, idle_wait_ms=20).start()
    try:
        until(lambda: backend.kv_list(cancel_ns("c")) == {})
    finally:
        w.close()


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_context_extends_and_reports(kind: str, make_backend: Any) -> None:
    backend = make_backend(kind)
    q = Queue("c", backend)
    job = q.add("x")
    seen: dict[str, Any] = {}

    def handle(j: Any, ctx: bunq.JobContext) -> int:
        ctx.update_progress(30)
        ctx.log("one")
        ctx.extend_lease(60_000)  # the fence still matches: no LeaseLost
        seen["extended"] = True
        seen["cancelled"] = bool(ctx.cancelled)
        return 7

    r = tick("c", handle, backend, lease_ms=1000)
    assert r.succeeded == 1 and seen == {"extended": True, "cancelled": False}
    assert q.get_logs(job.id) == ["one"] and q.get_job(job.id).progress == 30  # type: ignore[union-attr]
    assert q.wait(job.id, 1) == 7


def test_extend_lease_after_the_lease_was_lost_raises(make_backend: Any) -> None:
    backend = make_backend("memory")
    q = Queue("c", backend)
    q.add("x")
    lease = backend.lease("c", 1, 5000)[0]
    ctx = bunq.JobContext(lease.job, backend, lease)
    q.discard(lease.id)
    with pytest.raises(bunq.LeaseLost):
        ctx.extend_lease()


def test_takes_context_is_decided_by_the_signature() -> None:
    def one(job: Any) -> None: ...
    def two(job: Any, ctx: Any) -> None: ...
    def star(*args: Any) -> None: ...
    async def atwo(job: Any, ctx: Any) -> None: ...

    class Call:
        def __call__(self, job: Any, ctx: Any) -> None: ...

    assert [takes_context(f) for f in (one, two, star, atwo, Call(), functools.partial(two, 1))] \
        == [False, True, True, True, True, False]  # fmt: skip
    assert takes_context(lambda job, ctx=None: None)


def test_the_cancel_flag_made_late_or_early_sees_the_cancel() -> None:
    """``ctx.cancelled`` is made on first use: set if the job was cancelled before, and
    set by a cancel after; ``cancel_requested`` is what the drivers read."""
    from bunq.execution import JobContext

    job = bunq.Job(id="j", queue="q", name="n", data=None, state=JobState.ACTIVE,
                   opts=bunq.JobOptions())  # fmt: skip
    late = JobContext(job, None)
    assert not late.cancel_requested
    late.cancel()
    assert late.cancel_requested and late.cancelled and late.cancelled.wait(0)
    assert late.cancelled is late.cancelled  # one flag per context

    early = JobContext(job, None)
    flag = early.cancelled
    assert not flag and not flag.wait(0)
    early.cancel()
    assert flag and flag.is_set() and flag.wait(0) and early.cancel_requested
