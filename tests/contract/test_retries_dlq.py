"""Retries with backoff, the dead-letter queue and its maintenance."""

from __future__ import annotations

from typing import Any

from contract.capability import requires
from contract.helpers import add, fail, lease1

from bunq.backends.base import Capability as C
from bunq.backends.base import DlqConfig
from bunq.job import FailureReason, JobState, Settle


@requires(C.GET_JOB, C.CLOCK)
def test_exponential_backoff_times(backend: Any, clock: Any) -> None:
    job = add(backend, attempts=4, backoff={"type": "exponential", "delay": 100, "cap": 300})
    waits = []
    for _ in range(3):
        lease = lease1(backend)
        t0 = clock()
        assert fail(backend, lease) is Settle.OK
        got = backend.get_job(job.id)
        assert got.state is JobState.DELAYED
        waits.append(got.run_at - t0)
        clock.advance(waits[-1] - 1)
        assert backend.lease("q", 1, 30_000) == []
        clock.advance(1)
    assert waits == [100, 200, 300]
    assert fail(backend, lease1(backend)) is Settle.OK
    got = backend.get_job(job.id)
    assert got.state is JobState.FAILED and got.reason is FailureReason.MAX_ATTEMPTS_EXCEEDED
    assert [a.attempt for a in got.history] == [1, 2, 3, 4]


@requires(C.GET_JOB)
def test_fixed_backoff(backend: Any, clock: Any) -> None:
    job = add(backend, attempts=3, backoff=250)
    t0 = clock()
    fail(backend, lease1(backend))
    assert backend.get_job(job.id).run_at == t0 + 250


@requires(C.DLQ)
def test_dlq_entry_keeps_reason_and_last_error(backend: Any) -> None:
    job = add(backend, attempts=2, backoff=0, data={"k": 1})
    fail(backend, lease1(backend), "first")
    fail(backend, lease1(backend), "second")
    [entry] = backend.dlq_list("q")
    assert entry.job.id == job.id and entry.job.data == {"k": 1}
    assert entry.reason is FailureReason.MAX_ATTEMPTS_EXCEEDED and entry.error == "second"
    last = entry.history[-1]
    assert (last.attempt, last.error, last.duration_ms) == (2, "second", 5)
    assert backend.dlq_size("q") == 1 and backend.counts("q")[JobState.FAILED] == 1


@requires(C.DLQ, C.HISTORY)
def test_dlq_entry_keeps_reason_error_and_history(backend: Any, clock: Any) -> None:
    job = add(backend, attempts=2, backoff=0, data={"k": 1})
    fail(backend, lease1(backend), "first")
    fail(backend, lease1(backend), "second")
    [entry] = backend.dlq_list("q")
    assert entry.job.id == job.id and entry.job.data == {"k": 1}
    assert entry.reason is FailureReason.MAX_ATTEMPTS_EXCEEDED
    assert entry.error == "second"
    assert [(a.attempt, a.error) for a in entry.history] == [(1, "first"), (2, "second")]
    assert all(a.duration_ms == 5 for a in entry.history)
    assert backend.dlq_size("q") == 1 and backend.counts("q")[JobState.FAILED] == 1


@requires(C.DLQ, C.GET_JOB)
def test_unrecoverable_goes_straight_to_dlq(backend: Any) -> None:
    job = add(backend, attempts=5)
    fail(backend, lease1(backend), unrecoverable=True)
    assert backend.get_job(job.id).reason is FailureReason.EXPLICIT_FAIL


@requires(C.GET_JOB, C.CLOCK)
def test_delayed_error_gives_the_attempt_back(backend: Any, clock: Any) -> None:
    job = add(backend, attempts=1)
    fail(backend, lease1(backend), delay_ms=500, give_back_attempt=True)
    got = backend.get_job(job.id)
    assert got.state is JobState.DELAYED and got.attempts == 0
    clock.advance(500)
    assert lease1(backend).attempt == 1


@requires(C.DLQ, C.GET_JOB)
def test_timeout_on_last_attempt_is_reason_timeout(backend: Any) -> None:
    job = add(backend, attempts=1)
    fail(backend, lease1(backend), reason=FailureReason.TIMEOUT)
    assert backend.get_job(job.id).reason is FailureReason.TIMEOUT


@requires(C.DLQ, C.GET_JOB)
def test_dlq_retry_one_and_all(backend: Any) -> None:
    a = add(backend, attempts=1)
    b = add(backend, attempts=1)
    for lease in backend.lease("q", 2, 30_000):
        fail(backend, lease)
    assert backend.dlq_retry("q", a.id) == 1
    assert backend.get_job(a.id).state is JobState.WAITING
    assert backend.get_job(a.id).attempts == 0
    assert backend.dlq_retry("q") == 1
    assert backend.dlq_size("q") == 0
    assert {lease.id for lease in backend.lease("q", 5, 30_000)} == {a.id, b.id}


@requires(C.DLQ, C.GET_JOB)
def test_dlq_purge_and_remove(backend: Any) -> None:
    ids = [add(backend, attempts=1).id for _ in range(3)]
    for lease in backend.lease("q", 3, 30_000):
        fail(backend, lease)
    assert backend.dlq_remove("q", ids[0]) is True
    assert backend.dlq_remove("q", ids[0]) is False
    assert backend.get_job(ids[0]) is None
    assert backend.dlq_purge("q") == 2
    assert backend.dlq_size("q") == 0


@requires(C.DLQ, C.CLOCK)
def test_dlq_auto_retry_during_sweep(backend: Any, clock: Any) -> None:
    backend.dlq_config("q", DlqConfig(auto_retry=True, auto_retry_interval=1_000,
                                      max_auto_retries=1))  # fmt: skip
    job = add(backend, attempts=1)
    fail(backend, lease1(backend))
    clock.advance(999)
    assert backend.sweep().dlq_retried == 0
    clock.advance(1)
    assert backend.sweep().dlq_retried == 1
    fail(backend, lease1(backend))
    clock.advance(5_000)
    assert backend.sweep().dlq_retried == 0  # spent its one auto retry
    assert backend.get_job(job.id).state is JobState.FAILED


@requires(C.DLQ, C.CLOCK)
def test_dlq_bounds_drop_old_and_excess_entries(backend: Any, clock: Any) -> None:
    backend.dlq_config("q", DlqConfig(max_entries=2, max_age=10_000))
    assert backend.dlq_config("q").max_entries == 2
    for _ in range(4):
        add(backend, attempts=1)
    for lease in backend.lease("q", 4, 30_000):
        fail(backend, lease)
        clock.advance(1)
    assert backend.sweep().dlq_dropped == 2
    assert backend.dlq_size("q") == 2
    clock.advance(10_001)
    backend.sweep()
    assert backend.dlq_size("q") == 0
