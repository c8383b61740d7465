"""tick(): every TickResult counter provoked on purpose, over SQLite files."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from bunq.backends.sql.sqlite import SQLiteBackend
from bunq.errors import BackendError, BackendUnavailable, ConfigError, UnsupportedError
from bunq.job import FailureReason, JobState
from bunq.queue import Queue
from bunq.stacks import split
from bunq.tick import TickResult, tick


def invariant(r: TickResult) -> None:
    assert r.leased == r.succeeded + r.failed + r.stale + r.unsettled + r.released


def test_tick_runs_and_settles_through_the_worker_policy(q: Queue, backend: Any) -> None:
    q.add_bulk([("n", i) for i in range(6)])
    q.add("bad", attempts=2, backoff=0)

    def handler(job: Any) -> Any:
        if job.name == "bad":
            raise ValueError("boom")
        return job.data * 10

    r = tick("t", handler, backend, max=10)
    assert (r.leased, r.succeeded, r.failed, r.moved_to_dlq) == (7, 6, 1, 0)
    assert (r.may_have_more, r.stopped, r.queue_depth) == (False, "empty", 1)
    invariant(r)
    assert sorted(j.result for j in q.get_jobs("completed")) == [0, 10, 20, 30, 40, 50]
    bad = q.get_jobs("waiting")[0]
    assert bad.attempts == 1 and split(bad.error)[0] == "ValueError: boom"


def test_tick_moves_exhausted_jobs_to_the_dlq(q: Queue, backend: Any) -> None:
    q.add("x", attempts=1)
    r = tick("t", lambda job: 1 / 0, backend)
    assert (r.failed, r.moved_to_dlq, r.queue_depth) == (1, 1, 0)
    entry = q.dlq.list()[0]
    assert entry.reason is FailureReason.MAX_ATTEMPTS_EXCEEDED
    assert "ZeroDivisionError" in (entry.error or "")


def test_may_have_more_when_the_batch_comes_back_full(q: Queue, backend: Any) -> None:
    q.add_bulk([("n", i) for i in range(5)])
    r = tick("t", lambda job: None, backend, max=3)
    assert (r.leased, r.may_have_more, r.stopped, r.queue_depth) == (3, True, "max", 2)
    r = tick("t", lambda job: None, backend, max=3)
    assert (r.leased, r.may_have_more, r.stopped, r.queue_depth) == (2, False, "empty", 0)


def test_stale_when_the_lease_is_shorter_than_the_handler(
        q: Queue, backend: Any, clock: Any, tmp_path: Any) -> None:  # fmt: skip
    q.add("slow")
    other = SQLiteBackend(backend.path, clock=clock)  # another process's connection
    taken: list[Any] = []

    def handler(job: Any) -> None:
        clock.advance(500)  # runs past its 100 ms lease ...
        other.sweep()  # ... another tick sweeps it back and leases it
        taken.extend(other.lease("t", 1, 30_000, "other"))

    try:
        r = tick("t", handler, backend, lease_ms=100)
    finally:
        other.close()
    assert (r.leased, r.stale, r.succeeded, r.swept) == (1, 1, 0, 0)
    invariant(r)
    assert len(taken) == 1 and taken[0].attempt == 2
    assert q.get_job(taken[0].id).state is JobState.ACTIVE  # the other owner still has it


def test_unsettled_when_the_backend_refuses_the_outcome(
        q: Queue, backend: Any, faulty: Any) -> None:  # fmt: skip
    q.add_bulk([("ok", 1), ("ok", 2)])
    q.add("bad", 3)
    flaky = faulty(backend, {"complete", "complete_many", "fail"})

    def handler(job: Any) -> None:
        if job.name == "bad":
            raise RuntimeError("no")

    r = tick("t", handler, flaky)
    assert (r.leased, r.unsettled, r.succeeded, r.failed) == (3, 3, 0, 0)
    invariant(r)
    # two chunks (a probe of one job, then the rest), each settle tried 3 times
    assert (flaky.calls["complete_many"], flaky.calls["fail"]) == (6, 3)
    assert q.counts()["active"] == 3  # the leases expire and the jobs run again


def test_queue_depth_is_none_when_counts_fails(q: Queue, backend: Any, faulty: Any) -> None:
    q.add("x")
    r = tick("t", lambda job: None, faulty(backend, {"counts"}))
    assert (r.succeeded, r.queue_depth) == (1, None)
    no_counts = faulty(backend, {"counts"}, UnsupportedError("sqs", "counts"))
    assert tick("t", lambda job: None, no_counts).queue_depth is None


def test_sweep_and_cron_failures_do_not_stop_the_tick(
        q: Queue, backend: Any, faulty: Any) -> None:  # fmt: skip
    q.add("x")
    r = tick("t", lambda job: None, faulty(backend, {"sweep", "kv_list"}))
    assert (r.succeeded, r.swept, r.cron_fired) == (1, 0, 0)


def test_tick_sweeps_expired_leases_first(q: Queue, backend: Any, clock: Any) -> None:
    q.add("orphan")
    assert backend.lease("t", 1, 1000, "crashed-worker")
    clock.advance(5000)
    r = tick("t", lambda job: job.attempts, backend)
    assert (r.swept, r.succeeded) == (1, 1)
    assert q.get_jobs("completed")[0].result == 2


def test_lease_failure_raises_with_the_counters_so_far(
        q: Queue, backend: Any, faulty: Any) -> None:  # fmt: skip
    q.add("x")
    with pytest.raises(BackendError) as info:
        tick("t", lambda job: None, faulty(backend, {"lease"}))
    assert info.value.data["tick"]["leased"] == 0


def test_deadline_with_a_fake_clock(q: Queue, backend: Any, clock: Any) -> None:
    q.add_bulk([("n", i) for i in range(10)])
    r = tick("t", lambda job: clock.advance(100), backend, max=10, deadline_ms=550)
    # 5 jobs end at +500; a 6th (100 ms, the longest so far) would end after +550
    assert (r.succeeded, r.leased, r.released) == (5, 5, 0)
    assert (r.stopped, r.may_have_more, r.queue_depth) == ("deadline", True, 5)


def test_deadline_uses_the_job_timeout_and_gives_back_unstarted_jobs(
        q: Queue, backend: Any, clock: Any) -> None:  # fmt: skip
    q.add("long", timeout=1000)
    r = tick("t", lambda job: None, backend, deadline_at=clock() + 500)
    assert (r.leased, r.released, r.succeeded, r.stopped) == (1, 1, 0, "deadline")
    invariant(r)
    job = q.get_jobs("waiting")[0]
    assert job.attempts == 0  # given back without spending an attempt


def test_deadline_with_the_real_clock(make_backend: Callable[..., Any]) -> None:
    be = make_backend("sqlite")
    Queue("t", be).add_bulk([("n", i) for i in range(50)])
    t0 = time.monotonic()
    r = tick("t", lambda job: time.sleep(0.02), be, max=50, deadline_ms=200)
    took = time.monotonic() - t0
    assert 1 <= r.succeeded <= 10 and r.stopped == "deadline" and r.may_have_more
    assert took < 0.2 + 0.5  # the deadline, plus the last job overrunning on a loaded machine


def test_a_long_batch_extends_leases_before_starting_jobs(
        q: Queue, backend: Any, clock: Any) -> None:  # fmt: skip
    for i in range(4):
        q.add("n", i, timeout=5000)

    def handler(job: Any) -> None:
        clock.advance(3000)  # longer than lease_ms, within the job's timeout
        backend.sweep()  # a peer's sweep must not take the job

    r = tick("t", handler, backend, max=4, lease_ms=1000)
    assert (r.succeeded, r.stale, r.swept) == (4, 0, 0)


def test_finished_jobs_are_settled_before_their_leases_lapse(
        q: Queue, backend: Any, clock: Any) -> None:  # fmt: skip
    q.add_bulk([("n", i) for i in range(6)])
    steps = iter([1, 1, 400, 400, 400, 400])  # fast jobs first: a large chunk is leased

    def handler(job: Any) -> None:
        clock.advance(next(steps))
        backend.sweep()

    r = tick("t", handler, backend, max=10, lease_ms=1000)
    assert (r.succeeded, r.stale, r.may_have_more) == (6, 0, False)
    assert r.released == 2  # jobs turned slow: the two it had no time for went back at once
    invariant(r)


def test_sync_handler_past_its_timeout_fails_with_reason_timeout(q: Queue, backend: Any) -> None:
    q.add("slow", timeout=10, attempts=1)
    r = tick("t", lambda job: time.sleep(0.03), backend)
    assert (r.failed, r.moved_to_dlq) == (1, 1)
    assert q.dlq.list()[0].reason is FailureReason.TIMEOUT


def test_a_result_that_cannot_be_stored_fails_the_attempt(q: Queue, backend: Any) -> None:
    q.add_bulk([("ok", 1)])
    q.add("weird", attempts=1)
    r = tick("t", lambda job: object() if job.name == "weird" else 1, backend)
    assert (r.succeeded, r.failed, r.moved_to_dlq) == (1, 1, 1)
    assert "not serialisable" in (q.dlq.list()[0].error or "")


@pytest.mark.parametrize("concurrency", [1, 4])
def test_coroutine_handlers(q: Queue, backend: Any, concurrency: int) -> None:
    q.add_bulk([("n", i) for i in range(12)])
    live, peak = [0], [0]

    async def handler(job: Any) -> int:
        live[0] += 1
        peak[0] = max(peak[0], live[0])
        await asyncio.sleep(0.005)
        live[0] -= 1
        return int(job.data)

    before = threading.active_count()
    r = tick("t", handler, backend, max=12, concurrency=concurrency)
    assert r.succeeded == 12 and peak[0] <= concurrency
    assert threading.active_count() == before  # the loop thread was joined


def test_concurrency_overlaps_plain_functions(make_backend: Callable[..., Any]) -> None:
    be = make_backend("sqlite")
    Queue("t", be).add_bulk([("n", i) for i in range(16)])
    before = threading.active_count()
    lock, running, peak = threading.Lock(), [0], [0]

    def handler(job: Any) -> None:  # counts the calls running at once (no wall-clock bound)
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1

    r = tick("t", handler, be, max=16, concurrency=4)
    assert r.succeeded == 16 and 2 <= peak[0] <= 4  # 1 would be serial; never past 4
    assert threading.active_count() == before  # the pool was joined


def test_stop_ends_leasing_and_gives_back_nothing_started(q: Queue, backend: Any) -> None:
    q.add_bulk([("n", i) for i in range(5)])
    ran: list[int] = []
    r = tick("t", lambda job: ran.append(job.data), backend, max=5, stop=lambda: len(ran) >= 2)
    assert (r.succeeded, r.stopped, r.may_have_more) == (2, "stopped", True)
    invariant(r)
    assert q.counts()["waiting"] == 3


def test_tick_fires_due_cron_runs_of_its_queue(q: Queue, backend: Any, clock: Any) -> None:
    from bunq.cron import Schedule, Scheduler

    Scheduler(backend).add(Schedule("every-min", "t", "report", every_ms=60_000))
    Scheduler(backend).add(Schedule("elsewhere", "other", "report", every_ms=60_000))
    clock.advance(60_000)
    r = tick("t", lambda job: job.id, backend)
    assert (r.cron_fired, r.succeeded) == (1, 1)
    assert q.get_jobs("completed")[0].result.startswith("cron:every-min:")


def test_loop_while_more_drains_in_batches(q: Queue, backend: Any) -> None:
    q.add_bulk([("n", i) for i in range(25)])
    r = tick("t", lambda job: None, backend, max=10, loop_while_more=True)
    assert (r.ticks, r.leased, r.succeeded, r.may_have_more) == (3, 25, 25, False)


def test_tick_opens_and_closes_a_backend_url(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    Queue("t", url).add("x")
    assert tick("t", lambda job: None, url).succeeded == 1


@pytest.mark.parametrize("kw", [{"max": 0}, {"lease_ms": -1}, {"concurrency": True},
                                {"deadline_ms": 1, "deadline_at": 1}])  # fmt: skip
def test_bad_arguments_raise_config_error(backend: Any, kw: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        tick("t", lambda job: None, backend, **kw)


def test_bad_queue_and_handler(backend: Any) -> None:
    with pytest.raises(ConfigError):
        tick("bad queue!", lambda job: None, backend)
    with pytest.raises(ConfigError):
        tick("t", "not callable", backend)  # type: ignore[arg-type]


def test_result_to_dict_and_merge() -> None:
    a = TickResult(leased=2, succeeded=2, queue_depth=5, stopped="max", may_have_more=True)
    b = TickResult(leased=1, failed=1, queue_depth=0, stopped="empty")
    m = a.merge(b)
    assert (m.leased, m.succeeded, m.failed, m.ticks, m.queue_depth) == (3, 2, 1, 2, 0)
    assert m.to_dict()["may_have_more"] is False and m.to_dict()["stopped"] == "empty"


def test_unavailable_backend_during_extend_releases_what_it_can(
        q: Queue, backend: Any, faulty: Any) -> None:  # fmt: skip
    q.add("n", timeout=60_000)  # needs an extension of the 1 s lease before it starts
    with pytest.raises(BackendUnavailable) as info:
        tick("t", lambda job: None, faulty(backend, {"extend"}), lease_ms=1000)
    assert info.value.data["tick"]["released"] == 1
    assert q.get_jobs("waiting")[0].attempts == 0


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_tick_over_each_sql_backend(kind: str, make_backend: Callable[..., Any]) -> None:
    be = make_backend(kind)
    q = Queue("t", be)
    q.add_bulk([("n", i) for i in range(5)])
    q.add("bad", attempts=1)
    r = tick("t", lambda job: 1 / 0 if job.name == "bad" else job.data, be, max=4,
             loop_while_more=True)  # fmt: skip
    assert (r.leased, r.succeeded, r.failed, r.moved_to_dlq, r.ticks) == (6, 5, 1, 1, 2)
    assert (r.may_have_more, r.queue_depth) == (False, 0)
    assert q.dlq.size() == 1
