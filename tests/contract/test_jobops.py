"""Per-job operations through Queue (Capability.JOB_OPS), the same on every backend."""

from __future__ import annotations

from typing import Any

import pytest
from contract.capability import requires
from contract.helpers import add, fail, lease1

from bunq.backends.base import Capability as C
from bunq.errors import JobNotFound, JobStateError, ValidationError
from bunq.job import FailureReason, JobState, Settle
from bunq.queue import Queue


def queue(backend: Any) -> Queue:
    return Queue("q", backend)


@requires(C.JOB_OPS, C.GET_JOB)
def test_remove_waiting_and_delayed_jobs(backend: Any) -> None:
    q = queue(backend)
    a, b = add(backend), add(backend, delay=60_000)
    assert q.remove(a.id) is True
    assert q.remove(b.id) is True
    assert q.remove(a.id) is False
    assert backend.get_job(a.id) is None and backend.get_job(b.id) is None
    counts = backend.counts("q")
    assert counts[JobState.WAITING] == counts[JobState.DELAYED] == 0
    assert backend.lease("q", 1, 30_000) == []


@requires(C.JOB_OPS)
def test_remove_refuses_an_active_job(backend: Any) -> None:
    q = queue(backend)
    job = add(backend)
    lease = lease1(backend)
    with pytest.raises(JobStateError) as exc:
        q.remove(job.id)
    assert exc.value.data == {"job_id": job.id, "state": "active", "operation": "remove"}
    assert backend.complete(lease, 1) is Settle.OK
    assert q.remove(job.id) is True
    assert backend.counts("q")[JobState.COMPLETED] == 0


@requires(C.JOB_OPS, C.UNIQUE_KEY)
def test_remove_releases_the_unique_key(backend: Any) -> None:
    q = queue(backend)
    job = add(backend, unique_key="k")
    assert q.get_deduplication_job_id("k") == job.id
    assert q.remove(job.id)
    assert q.get_deduplication_job_id("k") is None
    assert add(backend, unique_key="k").id != job.id


@requires(C.JOB_OPS, C.GET_JOB, C.DLQ)
def test_retry_a_dead_lettered_job(backend: Any) -> None:
    q = queue(backend)
    job = add(backend, attempts=1)
    fail(backend, lease1(backend))
    assert backend.get_job(job.id).state is JobState.FAILED
    q.retry(job.id)
    got = backend.get_job(job.id)
    assert got.state is JobState.WAITING and got.attempts == 0
    assert backend.dlq_size("q") == 0
    assert lease1(backend).id == job.id


@requires(C.JOB_OPS, C.GET_JOB)
def test_retry_a_completed_job(backend: Any) -> None:
    q = queue(backend)
    job = add(backend, data={"n": 1})
    backend.complete(lease1(backend), "done")
    q.retry(job.id)
    got = backend.get_job(job.id)
    assert got.state is JobState.WAITING and got.attempts == 0 and got.result is None
    assert backend.counts("q")[JobState.COMPLETED] == 0
    lease = lease1(backend)
    assert lease.id == job.id and lease.attempt == 1 and lease.job.data == {"n": 1}


@requires(C.JOB_OPS)
def test_retry_refuses_a_waiting_job_and_a_missing_one(backend: Any) -> None:
    q = queue(backend)
    job = add(backend)
    with pytest.raises(JobStateError):
        q.retry(job.id)
    with pytest.raises(JobNotFound):
        q.retry("no-such-job")


@requires(C.JOB_OPS, C.GET_JOB, C.CLOCK)
def test_promote_one_and_many(backend: Any) -> None:
    q = queue(backend)
    a, b, c = (add(backend, delay=d) for d in (30_000, 10_000, 20_000))
    ready = add(backend)
    with pytest.raises(JobStateError):
        q.promote(ready.id)
    q.promote(a.id)
    assert backend.get_job(a.id).state is JobState.WAITING
    with pytest.raises(JobStateError):
        q.promote(a.id)
    assert q.promote_jobs(1) == 1  # the earliest: b
    assert backend.get_job(b.id).state is JobState.WAITING
    assert backend.get_job(c.id).state is JobState.DELAYED
    assert q.promote_jobs(10) == 1 and q.promote_jobs(10) == 0
    counts = backend.counts("q")
    assert counts[JobState.WAITING] == 4 and counts[JobState.DELAYED] == 0
    assert {lease1(backend).id for _ in range(4)} == {a.id, b.id, c.id, ready.id}


@requires(C.JOB_OPS, C.GET_JOB, C.PRIORITY)
def test_change_priority_reorders_waiting_jobs(backend: Any) -> None:
    q = queue(backend)
    low, high = add(backend, priority=1), add(backend, priority=5)
    q.change_priority(low.id, 10)
    assert backend.get_job(low.id).priority == 10
    assert lease1(backend).id == low.id
    with pytest.raises(JobStateError):
        q.change_priority(low.id, 1)  # active
    with pytest.raises(ValidationError):
        q.change_priority(high.id, 2**40)
    assert lease1(backend).id == high.id


@requires(C.JOB_OPS, C.GET_JOB, C.CLOCK)
def test_change_delay(backend: Any, clock: Any) -> None:
    q = queue(backend)
    job = add(backend)
    q.change_delay(job.id, 5_000)
    got = backend.get_job(job.id)
    assert got.state is JobState.DELAYED and got.run_at == clock() + 5_000
    assert backend.counts("q")[JobState.DELAYED] == 1
    assert backend.lease("q", 1, 30_000) == []
    q.change_delay(job.id, 0)
    assert lease1(backend).id == job.id
    with pytest.raises(JobStateError):
        q.change_delay(job.id, 10)


@requires(C.JOB_OPS, C.GET_JOB)
def test_update_data(backend: Any) -> None:
    q = queue(backend)
    job = add(backend, data={"v": 1})
    q.update(job.id, {"v": 2})
    assert backend.get_job(job.id).data == {"v": 2}
    lease = lease1(backend)
    assert lease.job.data == {"v": 2}
    q.update(job.id, {"v": 3})  # active jobs too
    backend.complete(lease, None)
    assert backend.get_job(job.id).data == {"v": 3}
    with pytest.raises(JobStateError):
        q.update(job.id, {"v": 4})
    with pytest.raises(JobNotFound):
        q.update("no-such-job", 1)


@requires(C.JOB_OPS, C.GET_JOB, C.DLQ)
def test_discard_sends_waiting_and_active_jobs_to_the_dlq(backend: Any) -> None:
    q = queue(backend)
    waiting = add(backend, attempts=5)
    q.discard(waiting.id)
    got = backend.get_job(waiting.id)
    assert got.state is JobState.FAILED and got.reason is FailureReason.EXPLICIT_FAIL
    active = add(backend, attempts=5)
    lease = lease1(backend)
    q.discard(active.id)
    assert backend.get_job(active.id).state is JobState.FAILED
    assert backend.complete(lease, None) is Settle.STALE
    assert backend.dlq_size("q") == 2
    counts = backend.counts("q")
    assert counts[JobState.ACTIVE] == counts[JobState.WAITING] == 0
    with pytest.raises(JobStateError):
        q.discard(active.id)


@requires(C.JOB_OPS, C.LOGS)
def test_clear_logs_keeps_the_newest(backend: Any) -> None:
    q = queue(backend)
    job = add(backend)
    for i in range(5):
        backend.add_log(job.id, f"line {i}")
    q.clear_logs(job.id, keep=2)
    assert backend.get_logs(job.id) == ["line 3", "line 4"]
    q.clear_logs(job.id)
    assert backend.get_logs(job.id) == []


@requires(C.JOB_OPS, C.UNIQUE_KEY)
def test_deduplication_key_read_and_removal(backend: Any) -> None:
    q = queue(backend)
    job = add(backend, unique_key="k")
    assert q.get_deduplication_job_id("k") == job.id
    assert q.get_deduplication_job_id("other") is None
    assert q.remove_deduplication_key("k") is True
    assert q.remove_deduplication_key("k") is False
    second = add(backend, unique_key="k")  # the key is free: a second live job takes it
    assert second.id != job.id and q.get_deduplication_job_id("k") == second.id


@requires(C.JOB_OPS, C.GET_JOB, C.JOB_ID)
def test_get_job_by_custom_id(backend: Any) -> None:
    q = queue(backend)
    job = add(backend, job_id="order-42")
    got = q.get_job_by_custom_id("order-42")
    assert got is not None and got.id == job.id == "order-42"
    assert q.get_job_by_custom_id("order-43") is None
    assert Queue("other", backend).get_job_by_custom_id("order-42") is None
    q.remove("order-42")  # the refusal point for backends without JOB_OPS


@requires(C.GET_JOB, C.CLOCK)
def test_move_to_delayed_and_back_to_wait_keep_the_attempt(backend: Any, clock: Any) -> None:
    q = queue(backend)
    job = add(backend)
    lease = lease1(backend)
    assert q.move_to_delayed(lease, 1_000) is Settle.OK
    got = backend.get_job(job.id)
    assert got.state is JobState.DELAYED and got.attempts == 0
    assert q.move_to_delayed(lease, 1_000) is Settle.STALE
    clock.advance(1_000)
    lease = lease1(backend)
    assert lease.attempt == 1
    assert q.move_to_wait(lease) is Settle.OK
    assert lease1(backend).attempt == 1


@requires(C.JOB_OPS, C.PRIORITY)
def test_counts_per_priority(backend: Any) -> None:
    q = queue(backend)
    for prio, delay in ((0, 0), (0, 60_000), (5, 0), (-3, 0), (2**31 - 1, 0), (5, 60_000)):
        add(backend, priority=prio, delay=delay)
    add(backend, queue="other", priority=5)
    lease1(backend)  # the top priority job: active, no longer counted
    assert q.counts_per_priority() == {0: 2, 5: 2, -3: 1}
    assert Queue("empty", backend).counts_per_priority() == {}


@requires(C.JOB_OPS, C.PRIORITY)
def test_a_reprioritised_job_keeps_its_place_among_equals(backend: Any) -> None:
    q = queue(backend)
    a, b, c, d = (add(backend, name=n, priority=p) for n, p in (("a", 1), ("b", 5), ("c", 1),
                                                                 ("d", 5)))  # fmt: skip
    q.change_priority(c.id, 5)
    assert [lease1(backend).id for _ in range(4)] == [b.id, c.id, d.id, a.id]
