"""Fences, completion, extension and the sweep of expired leases."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.capability import requires
from contract.helpers import add, fail, lease1

from bunq.backends.base import Capability as C
from bunq.job import FailureReason, JobState, Settle


@requires(C.GET_JOB)
def test_complete_records_result_once(backend: Any) -> None:
    job = add(backend)
    lease = lease1(backend)
    assert backend.complete(lease, {"sum": 3}) is Settle.OK
    assert backend.complete(lease, "again") is Settle.STALE
    got = backend.get_job(job.id)
    assert got.state is JobState.COMPLETED and got.result == {"sum": 3}
    assert got.finished_at is not None


@requires(C.GET_JOB)
def test_wrong_token_or_attempt_is_stale_and_changes_nothing(backend: Any) -> None:
    job = add(backend)
    lease = lease1(backend)
    assert backend.complete(replace(lease, token="forged"), 1) is Settle.STALE
    assert backend.complete(replace(lease, attempt=lease.attempt + 1), 1) is Settle.STALE
    assert backend.extend(replace(lease, token="forged"), 10_000) is Settle.STALE
    assert backend.get_job(job.id).state is JobState.ACTIVE
    assert backend.complete(lease, 1) is Settle.OK


@requires(C.CLOCK, C.GET_JOB)
def test_expired_lease_is_swept_back_and_old_fence_is_stale(backend: Any, clock: Any) -> None:
    job = add(backend)
    old = lease1(backend, lease_ms=1_000)
    clock.advance(1_001)
    result = backend.sweep()
    assert result.requeued == 1
    got = backend.get_job(job.id)
    assert got.state is JobState.WAITING and got.stalls == 1
    new = lease1(backend)
    assert new.attempt == 2
    assert backend.complete(old, "late") is Settle.STALE
    assert backend.fail(old, "late", fail_decision(backend, old)) is Settle.STALE
    assert backend.complete(new, "ok") is Settle.OK


def fail_decision(backend: Any, lease: Any) -> Any:
    from bunq.policy import decide_failure

    return decide_failure(lease.job, backend.clock())


@requires(C.CLOCK)
def test_sweep_is_idempotent_and_spares_live_leases(backend: Any, clock: Any) -> None:
    add(backend)
    add(backend)
    backend.lease("q", 1, 1_000)
    backend.lease("q", 1, 60_000)
    clock.advance(2_000)
    assert backend.sweep().requeued == 1
    assert backend.sweep().requeued == 0
    assert backend.counts("q")[JobState.ACTIVE] == 1


@requires(C.CLOCK, C.GET_JOB)
def test_extend_keeps_the_lease_alive(backend: Any, clock: Any) -> None:
    job = add(backend)
    lease = lease1(backend, lease_ms=1_000)
    clock.advance(900)
    assert backend.extend(lease, 1_000) is Settle.OK
    clock.advance(900)
    assert backend.sweep().requeued == 0
    assert backend.get_job(job.id).state is JobState.ACTIVE
    assert backend.complete(lease) is Settle.OK


@requires(C.CLOCK, C.GET_JOB)
def test_stall_budget_spent_goes_to_dlq_stalled(backend: Any, clock: Any) -> None:
    job = add(backend, attempts=100)
    for _ in range(backend.max_stalls + 1):
        lease1(backend, lease_ms=10)
        clock.advance(11)
        backend.sweep()
    got = backend.get_job(job.id)
    assert got.state is JobState.FAILED and got.reason is FailureReason.STALLED
    entry = backend.dlq_list("q")[0]
    assert entry.reason is FailureReason.STALLED
    assert len(entry.history) == backend.max_stalls + 1


@requires(C.CLOCK, C.GET_JOB)
def test_stall_on_last_attempt_goes_to_dlq(backend: Any, clock: Any) -> None:
    job = add(backend, attempts=1)
    lease1(backend, lease_ms=10)
    clock.advance(11)
    assert backend.sweep().dead == 1
    assert backend.get_job(job.id).reason is FailureReason.STALLED


@requires(C.GET_JOB)
def test_remove_on_complete_forgets_the_job(backend: Any) -> None:
    job = add(backend, remove_on_complete=True)
    assert backend.complete(lease1(backend), 1) is Settle.OK
    assert backend.get_job(job.id) is None


@requires(C.TTL, C.CLOCK, C.GET_JOB)
def test_ttl_expired_job_is_never_started(backend: Any, clock: Any) -> None:
    job = add(backend, ttl=1_000)
    clock.advance(1_000)
    assert backend.lease("q", 1, 30_000) == []
    assert backend.sweep().ttl_expired == 1
    got = backend.get_job(job.id)
    assert got.state is JobState.FAILED and got.reason is FailureReason.TTL_EXPIRED


@requires(C.TTL, C.CLOCK)
def test_ttl_not_reached_leases_normally(backend: Any, clock: Any) -> None:
    job = add(backend, ttl=1_000)
    clock.advance(999)
    assert lease1(backend).id == job.id


@requires(C.GET_JOB)
def test_fail_with_no_attempts_left_is_dead(backend: Any) -> None:
    job = add(backend, attempts=1)
    assert fail(backend, lease1(backend)) is Settle.OK
    assert backend.get_job(job.id).reason is FailureReason.MAX_ATTEMPTS_EXCEEDED
