"""bunq.tick.tick() over SQS, through the Backend contract only (blamejs refuses this)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from bunq import tick as tick_module
from bunq.errors import Retry, UnrecoverableError
from bunq.job import JobState
from bunq.queue import new_job
from bunq.tick import tick

pytestmark = pytest.mark.sqs


def fill(backend: Any, n: int, queue: str = "q", **opts: Any) -> list[Any]:
    return backend.add([new_job(queue, "job", i, opts) for i in range(n)])  # type: ignore[no-any-return]


def tick_all(*args: Any, **kw: Any) -> Any:
    """Tick while each tick fills its batch (whichever spelling bunq.tick has now)."""
    loop = getattr(tick_module, "tick_loop", None)
    if loop is not None:
        return loop(*args, **kw)
    return tick(*args, loop_while_more=True, **kw)


def count_calls(backend: Any) -> dict[str, int]:
    calls: dict[str, int] = {}

    def hook(model: Any, **_: Any) -> None:
        calls[model.name] = calls.get(model.name, 0) + 1

    backend.api.client.meta.events.register("before-call.sqs", hook)
    return calls


def test_tick_drains_the_queue_and_reports(sqs: Any) -> None:
    fill(sqs, 25)
    seen: list[int] = []
    r = tick("q", lambda job: seen.append(job.data), sqs, max=100)
    assert (r.leased, r.succeeded, r.failed, r.stale, r.unsettled) == (25, 25, 0, 0, 0)
    assert r.stopped == "empty" and not r.may_have_more and r.queue_depth == 0
    assert sorted(seen) == list(range(25))


def test_tick_batches_to_under_a_third_of_a_call_per_job(sqs: Any) -> None:
    fill(sqs, 100)
    calls = count_calls(sqs)
    r = tick("q", lambda job: None, sqs, max=100)
    assert r.succeeded == 100
    total = sum(calls.values())
    assert total / 100 <= 0.3, calls
    assert calls["DeleteMessageBatch"] <= 11 and calls["ReceiveMessage"] <= 11


def test_tick_retries_and_dead_letters_by_bunqs_policy(sqs: Any) -> None:
    fill(sqs, 2, attempts=1)
    fill(sqs, 2, attempts=3, backoff=60_000)
    fill(sqs, 1, attempts=5)

    def handler(job: Any) -> None:
        if job.max_attempts == 5:
            raise UnrecoverableError("never")
        raise Retry("again") if job.max_attempts == 3 else ValueError("bad")

    r = tick("q", handler, sqs, max=100)
    assert (r.leased, r.failed, r.moved_to_dlq, r.succeeded) == (5, 5, 3, 0)
    counts = sqs.counts("q")
    assert counts[JobState.ACTIVE] == 2 and counts[JobState.FAILED] == 3  # 2 in backoff
    reasons = sorted(e.reason.value for e in sqs.dlq_list("q"))
    assert reasons == ["explicit_fail", "max_attempts_exceeded", "max_attempts_exceeded"]


def test_tick_stops_at_max_and_tick_loop_finishes(sqs: Any) -> None:
    fill(sqs, 30)
    r = tick("q", lambda job: None, sqs, max=10)
    assert r.leased == 10 and r.stopped == "max" and r.may_have_more
    total = tick_all("q", lambda job: None, sqs, max=10)
    assert total.succeeded == 20 and total.stopped == "empty"


def test_tick_respects_the_deadline_and_gives_back_unstarted_jobs(sqs: Any) -> None:
    fill(sqs, 10, attempts=1)

    def slow(job: Any) -> None:
        time.sleep(0.25)

    r = tick("q", slow, sqs, max=10, lease_ms=30_000, deadline_ms=900)
    assert r.stopped == "deadline" and r.may_have_more
    assert r.succeeded + r.released + r.stale == r.leased and 1 <= r.succeeded < 10
    rest = sqs.lease("q", 10, 30_000)
    assert len(rest) == 10 - r.succeeded
    assert {ls.attempt for ls in rest} == {1}  # given back: the one attempt is not spent


def test_tick_with_concurrency_and_async_handlers(sqs: Any) -> None:
    fill(sqs, 20)

    def sync_handler(job: Any) -> int:
        time.sleep(0.02)
        return int(job.data)

    r = tick("q", sync_handler, sqs, max=100, concurrency=4)
    assert r.succeeded == 20
    fill(sqs, 10)

    async def async_handler(job: Any) -> int:
        await asyncio.sleep(0.02)
        return int(job.data)

    r = tick("q", async_handler, sqs, max=100, concurrency=5)
    assert r.succeeded == 10 and r.queue_depth == 0


def test_tick_extends_a_lease_before_a_job_that_would_outlast_it(sqs: Any) -> None:
    fill(sqs, 3, timeout=1_500)  # each job may take 1.5 s; leases are 1 s
    calls = count_calls(sqs)
    r = tick("q", lambda job: time.sleep(0.05), sqs, max=3, lease_ms=1_000)
    assert r.succeeded == 3 and r.stale == 0
    assert calls.get("ChangeMessageVisibility", 0) >= 1
