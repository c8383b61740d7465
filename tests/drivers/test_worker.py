"""The Worker driver end to end over a real SQLite file."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from bunq import (
    DelayedError,
    FailureReason,
    JobState,
    Queue,
    Retry,
    UnrecoverableError,
    Worker,
)  # fmt: skip
from bunq.stacks import split


@pytest.fixture(params=["sqlite", "memory"])
def queue(request: pytest.FixtureRequest, make_backend: Callable[..., Any]) -> Queue:
    """Both loops of a sync handler: the pool fed by the worker's thread (sqlite), and
    the crew (memory: the handler threads lease and settle themselves)."""
    return Queue("w", make_backend(request.param))


def wait_for(pred: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def test_worker_processes_every_job_once(queue: Queue) -> None:
    seen: list[int] = []
    queue.add_bulk([("n", i) for i in range(200)])
    w = Worker("w", lambda job: seen.append(job.data) or job.data * 2, queue.backend).start()
    wait_for(lambda: queue.counts()["completed"] == 200)
    w.close()
    assert sorted(seen) == list(range(200))
    assert w.processed == 200
    done = queue.get_jobs("completed", limit=1)[0]
    assert done.result == done.data * 2


def test_worker_retries_then_dead_letters(queue: Queue) -> None:
    calls: list[int] = []

    def handler(job: Any) -> None:
        calls.append(job.attempts)
        raise ValueError("nope")

    job = queue.add("x", attempts=3, backoff=0)
    w = Worker("w", handler, queue.backend).start()
    wait_for(lambda: queue.dlq.size() == 1)
    w.close()
    assert calls == [1, 2, 3]
    [entry] = queue.dlq.list()
    assert entry.job.id == job.id and entry.reason is FailureReason.MAX_ATTEMPTS_EXCEEDED
    assert len(entry.history) == 3
    # the error and its traceback, throw site first (bunq.stacks: the one representation)
    message, stack = split(entry.error)
    assert message == "ValueError: nope" and stack is not None
    assert stack[0] == "ValueError: nope" and stack[1].startswith("at handler (")


def test_every_failed_attempt_is_logged_with_the_job_and_the_traceback(
        queue: Queue, caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    def handler(job: Any) -> None:
        raise ValueError("nope")

    caplog.set_level("INFO", logger="bunq.jobs")
    job = queue.add("x", attempts=2, backoff=0)
    w = Worker("w", handler, queue.backend).start()
    wait_for(lambda: queue.dlq.size() == 1)
    w.close()
    recs = [r for r in caplog.records if r.name == "bunq.jobs"]
    assert [(r.levelname, r.attempt) for r in recs] == [("WARNING", 1), ("ERROR", 2)]  # type: ignore[attr-defined]
    for r in recs:
        assert (r.job_id, r.queue, r.error) == (job.id, "w", "ValueError: nope")  # type: ignore[attr-defined]
        assert r.exc_info and r.exc_info[0] is ValueError
    assert "will run again" in recs[0].getMessage()
    assert "dead-lettered (max_attempts_exceeded)" in recs[1].getMessage()


def test_unrecoverable_delayed_and_retry_signals(queue: Queue) -> None:
    seen: dict[str, list[int]] = {"u": [], "d": [], "r": []}

    def handler(job: Any) -> str:
        seen[job.name].append(job.attempts)
        if job.name == "u":
            raise UnrecoverableError("bad input")
        if job.name == "d" and len(seen["d"]) == 1:
            raise DelayedError(10)
        if job.name == "r" and len(seen["r"]) == 1:
            raise Retry(delay_ms=10)
        return "ok"

    u, d, r = queue.add("u", attempts=5), queue.add("d", attempts=1), queue.add("r", attempts=2)
    w = Worker("w", handler, queue.backend).start()
    wait_for(lambda: queue.counts()["completed"] == 2 and queue.dlq.size() == 1)
    w.close()
    assert queue.get_job(u.id).reason is FailureReason.EXPLICIT_FAIL and seen["u"] == [1]
    assert seen["d"] == [1, 1]  # the delayed attempt was given back
    assert seen["r"] == [1, 2]
    assert (
        queue.get_state(d.id) is JobState.COMPLETED and queue.get_state(r.id) is JobState.COMPLETED
    )


def test_async_handler_with_concurrency(queue: Queue) -> None:
    running = 0
    peak = 0

    async def handler(job: Any) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return int(job.data)

    queue.add_bulk([("n", i) for i in range(20)])
    w = Worker("w", handler, queue.backend, concurrency=5).start()
    wait_for(lambda: queue.counts()["completed"] == 20)
    w.close()
    assert 2 <= peak <= 5


def test_thread_concurrency(queue: Queue) -> None:
    active = 0
    peak = 0
    lock = threading.Lock()

    def handler(job: Any) -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.03)
        with lock:
            active -= 1

    queue.add_bulk([("n", i) for i in range(24)])
    w = Worker("w", handler, queue.backend, concurrency=4).start()
    wait_for(lambda: queue.counts()["completed"] == 24)
    w.close()
    assert 2 <= peak <= 4


def test_timeout_fails_the_attempt(queue: Queue) -> None:
    def handler(job: Any) -> None:
        time.sleep(0.4)

    job = queue.add("slow", timeout=100, attempts=1)
    w = Worker("w", handler, queue.backend).start()
    wait_for(lambda: queue.dlq.size() == 1)
    w.close()
    got = queue.get_job(job.id)
    assert got.reason is FailureReason.TIMEOUT and got.state is JobState.FAILED


def test_a_retry_leased_while_the_timed_out_run_still_runs_is_its_own_run(queue: Queue) -> None:
    """The first run outlives its timeout (a thread cannot be stopped) and its retry is
    leased by the same Worker meanwhile: the retry's lease is kept alive and its result
    recorded; the late first run changes nothing."""
    runs: list[int] = []
    first_returned = threading.Event()

    def handler(job: Any) -> str:
        runs.append(job.attempts)
        if len(runs) == 1:
            time.sleep(2.0)  # past its timeout, and past the retry's whole run
            first_returned.set()
            return "late"
        time.sleep(0.5)  # within the timeout, longer than the lease: it must be extended
        return "retry"

    job = queue.add("slow", timeout=700, attempts=3, backoff=1)
    w = Worker("w", handler, queue.backend, concurrency=2, lease_ms=300).start()
    try:
        wait_for(lambda: queue.get_state(job.id) is JobState.COMPLETED, 10)
        assert first_returned.wait(5)
        time.sleep(0.2)  # the late run's outcome is collected (and dropped)
    finally:
        w.close()
    got = queue.get_job(job.id)
    assert got.result == "retry" and got.state is JobState.COMPLETED
    assert len(runs) == 2


def test_async_timeout_cancels(queue: Queue) -> None:
    async def handler(job: Any) -> None:
        await asyncio.sleep(5)

    job = queue.add("slow", timeout=50, attempts=1)
    w = Worker("w", handler, queue.backend).start()
    wait_for(lambda: queue.dlq.size() == 1)
    w.close()
    assert queue.get_job(job.id).reason is FailureReason.TIMEOUT


def test_heartbeat_keeps_a_long_job_leased(queue: Queue) -> None:
    def handler(job: Any) -> str:
        time.sleep(0.8)
        return "done"

    job = queue.add("long")
    w = Worker("w", handler, queue.backend, lease_ms=300, sweep_interval_ms=50).start()
    wait_for(lambda: queue.counts()["active"] == 1)
    # a second worker sweeps aggressively; the heartbeat must keep the lease alive
    other = Worker("w", lambda j: "stolen", queue.backend, lease_ms=300,
                   sweep_interval_ms=20).start()  # fmt: skip
    wait_for(lambda: queue.counts()["completed"] == 1)
    w.close()
    other.close()
    got = queue.get_job(job.id)
    assert got.result == "done" and got.attempts == 1 and got.stalls == 0


def test_close_gives_back_unstarted_jobs(queue: Queue) -> None:
    started = threading.Event()

    def handler(job: Any) -> None:
        started.set()
        time.sleep(0.2)

    queue.add_bulk([("n", i) for i in range(10)])
    w = Worker("w", handler, queue.backend, batch=10).start()
    started.wait(5)
    w.close()
    counts = queue.counts()
    assert counts["active"] == 0
    assert counts["completed"] >= 1 and counts["completed"] + counts["waiting"] == 10
    for job in queue.get_jobs("waiting"):
        assert job.attempts == 0  # given back without spending an attempt


def test_idle_worker_wakes_fast_on_add(queue: Queue) -> None:
    done = threading.Event()
    w = Worker("w", lambda job: done.set(), queue.backend, idle_wait_ms=5_000).start()
    time.sleep(0.3)  # let it go idle
    queue.add("ping")
    assert done.wait(2)  # woken by the add: far sooner than its 5 s idle wait
    w.close()


def test_unstorable_result_dead_letters_instead_of_killing_the_worker(queue: Queue) -> None:
    job = queue.add("bad-result", attempts=3)
    ok = queue.add("fine")
    w = Worker("w", lambda j: object() if j.name == "bad-result" else "ok", queue.backend).start()
    wait_for(lambda: queue.dlq.size() == 1 and queue.counts()["completed"] == 1)
    assert w.running
    w.close()
    got = queue.get_job(job.id)
    assert got.reason is FailureReason.EXPLICIT_FAIL and "serialisable" in (got.error or "")
    assert queue.get_job(ok.id).result == "ok"


def test_the_handler_threads_lease_and_settle_over_memory(make_backend: Any) -> None:
    """Over the memory engine a sync handler's threads do the loop's work (Crew): a
    call that hangs holds its own slot only; the other threads settle and lease on."""
    q = Queue("w", make_backend("memory"))
    release = threading.Event()
    names: set[str] = set()

    def handler(job: Any) -> None:
        names.add(threading.current_thread().name)
        if job.name == "hang":
            release.wait(20)

    hang = q.add("hang")
    w = Worker("w", handler, q.backend, concurrency=2)
    settled_on: set[str] = set()
    settle = w._settle

    def recorded(done: Any) -> None:
        settled_on.add(threading.current_thread().name)
        settle(done)

    w._settle = recorded  # type: ignore[method-assign]
    w.start()
    try:
        wait_for(lambda: q.get_state(hang.id) is JobState.ACTIVE)
        q.add_bulk([("n", i) for i in range(300)])
        wait_for(lambda: q.counts()["completed"] == 300)
        assert q.get_state(hang.id) is JobState.ACTIVE
    finally:
        release.set()
        w.close()
    assert q.get_state(hang.id) is JobState.COMPLETED
    assert all(n.startswith("bunq-job-") for n in names)
    assert any(n.startswith("bunq-job-") for n in settled_on)  # not only the worker's thread


async def _async_noop(job: Any) -> None:
    return None


@pytest.mark.parametrize("handler", [lambda job: None, _async_noop], ids=["crew", "onloop"])
def test_an_error_in_the_loops_own_work_ends_the_worker(make_backend: Any, handler: Any) -> None:
    """Memory engine: an error in leasing or settling, on a handler thread (the crew) or
    in a turn of the handler's loop (OnLoop), ends the worker and reaches excepthook."""
    q = Queue("w", make_backend("memory"))
    q.add_bulk([("n", i) for i in range(5)])
    w = Worker("w", handler, q.backend, concurrency=3)

    def broken(done: Any) -> None:
        raise RuntimeError("settle broke")

    w._settle = broken  # type: ignore[method-assign]
    errors: list[BaseException | None] = []
    old = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)
    try:
        w.start()
        wait_for(lambda: not w.running, 5)
    finally:
        threading.excepthook = old
    assert [str(e) for e in errors] == ["settle broke"]
