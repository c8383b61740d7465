"""A Worker with a coroutine handler over the memory engine runs its handler's event
loop on its own thread and leases and settles there (:class:`bunq.execution.OnLoop`);
over any other backend the loop has a thread of its own. Either way the jobs, their
outcomes, timeouts, cancels and a graceful close are the same."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from bunq import FailureReason, Job, JobOptions, JobState, Queue, Worker
from bunq.execution import Executor


@pytest.fixture
def queue(make_backend: Callable[..., Any]) -> Queue:
    return Queue("w", make_backend("memory"))


def wait_for(pred: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


@pytest.mark.parametrize(("kind", "thread"), [("memory", "bunq-worker-w"),
                                              ("sqlite", "bunq-job-loop")])  # fmt: skip
def test_the_loop_runs_on_the_worker_thread_over_memory_only(
    kind: str, thread: str, make_backend: Callable[..., Any]
) -> None:
    q = Queue("w", make_backend(kind))
    names: list[str] = []

    async def handler(job: Job) -> None:
        names.append(threading.current_thread().name)

    q.add_bulk([("n", i) for i in range(5)])
    w = Worker("w", handler, q.backend, concurrency=3).start()
    wait_for(lambda: q.counts()["completed"] == 5)
    w.close()
    assert set(names) == {thread}


def test_suspended_calls_go_on_while_instant_ones_flow(queue: Queue) -> None:
    """Calls that never suspend keep the loop busy leasing and settling; one turn of
    the loop per batch lets the suspended ones finish meanwhile."""
    slow_done: list[float] = []
    running = peak = 0

    async def handler(job: Job) -> int:
        nonlocal running, peak
        if job.name == "slow":
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            await asyncio.sleep(0)
            running -= 1
            slow_done.append(time.monotonic())
        return int(job.data)

    queue.add_bulk([("slow", i) for i in range(4)])
    queue.add_bulk([("n", i) for i in range(3000)])
    w = Worker("w", handler, queue.backend, concurrency=6).start()
    wait_for(lambda: queue.counts()["completed"] == 3004)
    w.close()
    assert len(slow_done) == 4 and 1 <= peak <= 4
    assert w.processed == 3004 and w.failed == 0


def test_a_task_a_handler_left_running_gets_turns_while_jobs_flow(queue: Queue) -> None:
    """With no call suspended, rounds of lease-start-settle run back to back, but only
    ``BATCHES_PER_TURN`` per loop turn: the loop's other tasks still run meanwhile."""
    count = 0
    at_end: list[int] = []
    keep: list[asyncio.Task[None]] = []

    async def ticker() -> None:
        for _ in range(10):
            await asyncio.sleep(0)  # one loop turn each
        at_end.append(count)

    async def handler(job: Job) -> None:
        nonlocal count
        count += 1
        if job.name == "spawn":
            keep.append(asyncio.get_running_loop().create_task(ticker()))

    queue.add("spawn")
    queue.add_bulk([("n", i) for i in range(5000)])
    w = Worker("w", handler, queue.backend, concurrency=10).start()
    wait_for(lambda: queue.counts()["completed"] == 5001)
    w.close()
    assert at_end and at_end[0] < 2500, at_end  # 10 turns: about 800 jobs, not all


def test_async_timeout_cancels_over_memory(queue: Queue) -> None:
    cancelled = threading.Event()

    async def handler(job: Job) -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job = queue.add("slow", timeout=50, attempts=1)
    w = Worker("w", handler, queue.backend, concurrency=2).start()
    wait_for(lambda: queue.dlq.size() == 1)
    w.close()
    got = queue.get_job(job.id)
    assert got is not None and got.reason is FailureReason.TIMEOUT
    assert cancelled.wait(2)


def test_close_finishes_calls_in_flight_then_stops(queue: Queue) -> None:
    started = threading.Event()

    async def handler(job: Job) -> str:
        started.set()
        await asyncio.sleep(0.2)
        return "done"

    job = queue.add("slow")
    w = Worker("w", handler, queue.backend, concurrency=4).start()
    assert started.wait(5)
    w.close()
    assert not w.running
    got = queue.get_job(job.id)
    assert got is not None and got.state is JobState.COMPLETED


def test_an_idle_worker_wakes_on_add_and_its_loop_stays_free(queue: Queue) -> None:
    """The idle wait runs off the loop: a task a handler left running goes on while
    the worker waits for work."""
    ticks: list[float] = []
    keep: list[asyncio.Task[None]] = []

    async def ticker() -> None:
        for _ in range(10):
            ticks.append(time.monotonic())
            await asyncio.sleep(0.02)

    async def handler(job: Job) -> None:
        if job.name == "spawn":
            keep.append(asyncio.get_running_loop().create_task(ticker()))

    w = Worker("w", handler, queue.backend, idle_wait_ms=5_000).start()
    queue.add("spawn")
    wait_for(lambda: len(ticks) == 10, 2)  # 10 ticks 20 ms apart while the worker idles
    assert ticks[-1] - ticks[0] < 1.0
    job = queue.add("ping")
    wait_for(lambda: queue.get_state(job.id) is JobState.COMPLETED, 2)
    w.close()


def test_a_call_that_never_suspends_is_done_when_start_returns() -> None:
    """``loop_thread=False``: ``start`` from one of the loop's callbacks runs each call's
    first step at once (a task started eagerly, on 3.11 too), in its own task."""

    async def handler(job: Job) -> str:
        task = asyncio.current_task()
        assert task is not None
        if job.data["i"]:
            await asyncio.sleep(0.01)
        return type(task).__name__

    jobs = [Job(id=f"j{i}", queue="q", name="n", data={"i": i}, state=JobState.ACTIVE,
                opts=JobOptions()) for i in range(2)]  # fmt: skip
    ex = Executor(handler, 2, loop_thread=False)
    assert ex.loop is not None
    seen: list[list[str]] = []
    woken: list[int] = []
    ex.wake = lambda: woken.append(1)

    def go() -> None:
        ex.start([(j.id, j, None) for j in jobs])
        seen.append([ex.done.get_nowait()[0] for _ in range(ex.done.qsize())])
        ex.loop.call_later(0.2, ex.loop.stop)  # type: ignore[union-attr]

    ex.loop.call_soon(go)
    ex.run_loop()
    assert seen == [["j0"]]  # j1 suspended; j0 was done on return
    key, outcome = ex.done.get_nowait()
    assert key == "j1" and outcome.ok and outcome.result == "Task"
    assert len(woken) == 2
    ex.close()
    ex.close()  # idempotent
    assert ex.loop.is_closed()
