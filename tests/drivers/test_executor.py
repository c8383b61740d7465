"""The Executor's coroutine path: calls run one after another in long-lived slot tasks
(no task per call), each slot's first step and wake-up at once on a loop object that
takes attributes; on one that does not (uvloop's), a loop turn later.

Whether a call finishes without suspending or not, whichever slot runs it, and on
either kind of loop, its outcome, its context (contextvars, the current task, cancel)
and its failures are the same.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bunq import Job, JobContext, JobOptions, JobState
from bunq.errors import JobCancelled
from bunq.execution import Executor, Outcome, slots
from bunq.execution.outcome import HandlerCancelled

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


@pytest.fixture(autouse=True, params=["loop with attributes", "loop without attributes"])
def loop_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test on both kinds of loop: on one without attributes (uvloop's) nothing
    can stand in for ``loop.call_soon``, so a woken slot runs a loop turn later."""
    if request.param == "loop without attributes":
        init = slots.Slots.__init__

        def as_uvloop(self: slots.Slots, *args: Any, **kw: Any) -> None:
            init(self, *args, **kw)
            self.at_once = False

        monkeypatch.setattr(slots.Slots, "__init__", as_uvloop)
    yield


def job(i: int, timeout: int | None = None) -> Job:
    return Job(id=f"j{i}", queue="q", name="n", data={"i": i}, state=JobState.ACTIVE,
               opts=JobOptions(timeout=timeout))  # fmt: skip


def run_all(handler: Callable[..., Any], jobs: list[Job],
            ctxs: list[JobContext | None] | None = None,
            during: Callable[[], None] | None = None, concurrency: int = 10,
            ) -> dict[str, Outcome]:  # fmt: skip
    """Start ``jobs`` on one executor; return each job's outcome by id."""
    with Executor(handler, concurrency) as ex:
        ex.start([(j.id, j, c) for j, c in zip(jobs, ctxs or [None] * len(jobs), strict=True)])
        if during is not None:
            during()
        got = dict(ex.done.get(timeout=10) for _ in jobs)
    return got


def test_calls_that_never_suspend_and_calls_that_do_both_settle() -> None:
    async def handler(j: Job) -> Any:
        if j.data["i"] % 2:
            await asyncio.sleep(0.01)  # suspends: finished by a task
            await asyncio.sleep(0)  # a bare yield is forwarded too
            return j.data["i"] * 10
        return None if j.data["i"] == 0 else j.data["i"]

    got = run_all(handler, [job(i) for i in range(6)])
    assert [(got[f"j{i}"].ok, got[f"j{i}"].result) for i in range(6)] == [
        (True, None), (True, 10), (True, 2), (True, 30), (True, 4), (True, 50)]  # fmt: skip


def test_failures_before_and_after_the_first_suspension() -> None:
    async def handler(j: Job) -> None:
        if j.data["i"] == 1:
            await asyncio.sleep(0.01)
        raise ValueError(f"boom {j.data['i']}")

    got = run_all(handler, [job(0), job(1)])
    assert [str(got[k].error) for k in ("j0", "j1")] == ["boom 0", "boom 1"]
    assert not got["j0"].ok and not got["j0"].timed_out and not got["j0"].cancelled


def test_a_handler_runs_in_its_own_task() -> None:
    """``asyncio.current_task()`` (``asyncio.timeout``, ``wait_for`` on 3.12+, anyio's
    cancel scopes) works from the handler's first line, before anything suspended it."""

    async def handler(j: Job) -> str:
        task = asyncio.current_task()
        await asyncio.wait_for(asyncio.sleep(0.01 if j.data["i"] else 0), 5)
        assert asyncio.current_task() is task
        return type(task).__name__

    got = run_all(handler, [job(0), job(1)])
    assert got["j0"].ok and got["j1"].ok, got
    assert got["j0"].result == got["j1"].result == "Task"


def test_each_call_has_its_own_context_across_its_suspension() -> None:
    seen: dict[int, str] = {}

    async def handler(j: Job) -> None:
        i = j.data["i"]
        assert VAR.get() == "unset"  # nothing leaks from the calls started before it
        VAR.set(f"v{i}")
        await asyncio.sleep(0.01 if i % 2 else 0)
        seen[i] = VAR.get()

    got = run_all(handler, [job(i) for i in range(4)])
    assert all(o.ok for o in got.values()), got
    assert seen == {i: f"v{i}" for i in range(4)}


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_contextvar_a_call_left_set_does_not_reach_the_next_calls(concurrency: int) -> None:
    """A slot runs calls one after another: one that sets a contextvar (and returns, at
    once or after suspending) leaves it to none of the calls after it."""
    seen: dict[int, str] = {}

    async def handler(j: Job) -> None:
        i = j.data["i"]
        seen[i] = VAR.get()
        if i % 3 == 0:
            VAR.set(f"left by {i}")
        if i % 2:
            await asyncio.sleep(0.001)

    got = run_all(handler, [job(i) for i in range(12)], concurrency=concurrency)
    assert all(o.ok for o in got.values()), got
    assert seen == dict.fromkeys(range(12), "unset")


def test_a_cancel_reaches_a_suspended_call_as_cancelled_error() -> None:
    started, saw = threading.Event(), []

    async def handler(j: Job, ctx: JobContext) -> str:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            saw.append("CancelledError")
            raise
        return "not cancelled"

    ctx = JobContext(job(0), None)

    def cancel() -> None:
        assert started.wait(5)
        ctx.cancel()

    got = run_all(handler, [job(0)], [ctx], during=cancel)["j0"]
    assert got.cancelled and isinstance(got.error, JobCancelled) and saw == ["CancelledError"]


def test_a_call_cancelled_before_it_started_settles_cancelled() -> None:
    async def handler(j: Job, ctx: JobContext) -> str:
        if j.data["i"]:
            await asyncio.sleep(10)  # the bound task is cancelled at once
        return "returned"

    ctxs: list[JobContext | None] = [JobContext(job(i), None) for i in range(2)]
    for c in ctxs:
        assert c is not None
        c.cancel()
    got = run_all(handler, [job(0), job(1)], ctxs)
    assert got["j0"].cancelled and got["j1"].cancelled


def test_a_cancel_that_arrives_after_its_job_finished_misses_the_next_job() -> None:
    """One slot runs j0 then j1: j0's cancel, asked as j0 returns, reaches the loop
    while j1 is suspended, and is dropped (it is for a job that has finished)."""
    ctxs: list[JobContext | None] = [JobContext(job(i), None) for i in range(2)]

    async def handler(j: Job, ctx: JobContext) -> str:
        await asyncio.sleep(0.001)
        if j.data["i"] == 0:
            ctx.cancel()  # reaches the loop after this call has returned
            return "j0 returned"
        await asyncio.sleep(0.05)
        return "j1 returned"

    got = run_all(handler, [job(0), job(1)], ctxs, concurrency=1)
    assert got["j0"].cancelled  # a job cancelled while it ran ends cancelled
    assert got["j1"].ok and got["j1"].result == "j1 returned"


def test_after_a_cancelled_call_the_next_call_sees_a_task_nobody_cancelled() -> None:
    """The cancel of j0 is taken back from the task that ran it (3.11+: ``uncancel``):
    j1, on the same task, times out by ``asyncio.timeout()`` / ``wait_for`` as usual."""
    started = threading.Event()
    tasks: list[asyncio.Task[Any] | None] = []
    ctxs: list[JobContext | None] = [JobContext(job(i), None) for i in range(2)]

    async def handler(j: Job, ctx: JobContext) -> Any:
        task = asyncio.current_task()
        tasks.append(task)
        if j.data["i"] == 0:
            started.set()
            await asyncio.sleep(10)
        assert task is not None
        cancelling = task.cancelling() if sys.version_info >= (3, 11) else 0
        try:
            await asyncio.wait_for(asyncio.sleep(10), 0.02)
        except asyncio.TimeoutError:
            return ("timed out", cancelling)
        return ("slept", cancelling)

    def cancel_j0() -> None:
        assert started.wait(5)
        ctx = ctxs[0]
        assert ctx is not None
        ctx.cancel()

    got = run_all(handler, [job(0), job(1)], ctxs, during=cancel_j0, concurrency=1)
    assert got["j0"].cancelled
    assert got["j1"].ok and got["j1"].result == ("timed out", 0)
    assert tasks[0] is tasks[1]  # one slot ran both


def test_a_call_that_cancels_its_own_task_and_returns_leaves_no_cancel_behind() -> None:
    """j0 cancels the task it runs in and returns before the cancel is thrown: it
    completes, and j1, on the same slot, is not cancelled by it (nor are later batches)."""

    async def handler(j: Job) -> str:
        if j.data["i"] == 0:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            return "j0 returned"
        await asyncio.sleep(0.001)
        return f"j{j.data['i']} returned"

    with Executor(handler, 1) as ex:
        for batch in ([0, 1], [2]):
            ex.start([(f"j{i}", job(i), None) for i in batch])
        got = dict(ex.done.get(timeout=10) for _ in range(3))
    assert {k: (o.ok, o.result) for k, o in got.items()} == {
        f"j{i}": (True, f"j{i} returned") for i in range(3)}  # fmt: skip


def test_close_ends_every_slot_with_no_task_left_pending(caplog: pytest.LogCaptureFixture) -> None:
    """Parked slots end at close, and so does one still in a call (its call cancelled):
    asyncio logs no 'Task was destroyed but it is pending'."""
    started = threading.Event()

    async def handler(j: Job) -> None:
        if j.data["i"] == 0:
            started.set()
            await asyncio.sleep(60)

    caplog.set_level(logging.ERROR, logger="asyncio")
    ex = Executor(handler, 4)
    ex.start([(f"j{i}", job(i), None) for i in range(4)])
    assert started.wait(5)
    begun = time.monotonic()
    ex.close()
    assert time.monotonic() - begun < 5
    gc.collect()
    assert not [r for r in caplog.records if "pending" in r.getMessage()], caplog.text
    got = dict(ex.done.get(timeout=1) for _ in range(4))
    assert isinstance(got["j0"].error, HandlerCancelled)  # its call was cancelled by close


def test_timed_calls_and_awaitables_that_are_not_coroutines() -> None:
    class Handler:
        async def _later(self, v: int) -> int:
            await asyncio.sleep(0.01)
            return v

        async def __call__(self, j: Job) -> Any:  # a callable object, coroutine __call__
            if j.opts.timeout is not None:
                await asyncio.sleep(1)  # past its timeout: cancelled by wait_for
            return await asyncio.ensure_future(self._later(j.data["i"]))

    got = run_all(Handler(), [job(1), job(2, timeout=50)])
    assert got["j1"].ok and got["j1"].result == 1
    assert not got["j2"].ok and got["j2"].timed_out


def test_a_cancelled_error_nobody_asked_for_fails_the_attempt() -> None:
    """A handler that raises CancelledError itself (no cancel of its job) gets an outcome:
    re-raised, the executor's task would end without one and the driver hold the job."""

    async def handler(j: Job, ctx: JobContext) -> None:
        if j.data["i"]:
            await asyncio.sleep(0)  # after a suspension too
        raise asyncio.CancelledError("gave up")

    ctxs: list[JobContext | None] = [JobContext(job(i), None) for i in range(2)]
    got = run_all(handler, [job(0), job(1)], ctxs)
    for o in got.values():
        assert not o.ok and not o.cancelled and isinstance(o.error, HandlerCancelled)
        assert "gave up" in str(o.error)


def test_a_sync_executor_without_a_pool_runs_on_the_callers_threads() -> None:
    """``pool=False``: no threads of its own; ``run`` on the caller's thread (the
    Worker's crew calls it from each of its threads), ``start`` is refused."""
    before = threading.active_count()
    ex = Executor(lambda j: threading.current_thread().name, 4, pool=False)
    try:
        assert not ex.inline and threading.active_count() == before
        out = ex.run(job(1))
        assert out.ok and out.result == threading.current_thread().name
        try:
            ex.start([(1, job(1), None)])
        except RuntimeError:
            pass
        else:
            raise AssertionError("start() needs a pool")
    finally:
        ex.close()
