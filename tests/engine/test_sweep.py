"""Maintenance (bunq.engine.sweep, bunq.engine.dlq) on its own, with a fake clock."""

from __future__ import annotations

import time
from typing import Any

from bunq.backends.base import DlqConfig
from bunq.engine import Engine
from bunq.engine import sweep as sweeps
from bunq.job import FailureReason, JobState, Settle
from bunq.policy import decide_failure
from bunq.queue import new_job


def test_two_phase_stall_marks_then_confirms(engine: Engine, put: Any, clock: Any,
                                             take: Any) -> None:  # fmt: skip
    job = put()
    take(lease_ms=100)
    clock.advance(101)
    assert sweeps.sweep(engine, phases=2).requeued == 0  # candidate only
    assert engine.get_job(job.id).state is JobState.ACTIVE
    assert sweeps.sweep(engine, phases=2).requeued == 1  # confirmed
    got = engine.get_job(job.id)
    assert got.state is JobState.WAITING and got.stalls == 1
    assert got.history[-1].reason is FailureReason.STALLED
    engine._check()


def test_two_phase_spares_a_lease_extended_in_between(engine: Engine, put: Any, clock: Any,
                                                      take: Any) -> None:  # fmt: skip
    put()
    lease = take(lease_ms=100)[0]
    clock.advance(101)
    sweeps.sweep(engine, phases=2)
    assert engine.extend(lease, 1_000) is Settle.OK  # a late heartbeat after a GC pause
    assert sweeps.sweep(engine, phases=2).requeued == 0
    assert engine.complete(lease) is Settle.OK


def test_two_phase_does_not_confirm_a_new_lease(engine: Engine, put: Any, clock: Any,
                                                take: Any) -> None:  # fmt: skip
    put()
    take(lease_ms=100)
    clock.advance(101)
    assert engine.sweep().requeued == 1  # explicit sweep: at once
    take(lease_ms=100)
    assert sweeps.sweep(engine, phases=2).requeued == 0


def test_stall_budget_to_dlq(clock: Any) -> None:
    e = Engine(clock=clock, shards=1, max_stalls=0)
    e.add([new_job("q", "j", 1, {"attempts": 5, "unique_key": "u"})])
    e.lease("q", 1, 10)
    clock.advance(11)
    assert e.sweep().dead == 1
    assert e.dlq_list("q")[0].reason is FailureReason.STALLED
    e.add([new_job("q", "j", 2, {"unique_key": "u"})])  # key released with the job


def test_unique_ttl_expiry_in_sweep(engine: Engine, put: Any, clock: Any) -> None:
    put(unique_key="k", unique_ttl=100)
    shard = engine.route("q")
    clock.advance(100)
    engine.sweep()
    assert ("q", "k") in shard.unique  # until < now only
    clock.advance(1)
    engine.sweep()
    assert ("q", "k") not in shard.unique


def test_dlq_maintenance_counts_entries_dropped_at_entry(engine: Engine, put: Any, take: Any,
                                                         clock: Any) -> None:  # fmt: skip
    engine.dlq_config("q", DlqConfig(max_entries=1))
    for _ in range(3):
        put(attempts=1)
    for lease in take(n=3):
        engine.fail(lease, "x", decide_failure(lease.job, clock()))
    assert engine.dlq_size("q") == 1
    assert engine.sweep().dlq_dropped == 2
    assert engine.sweep().dlq_dropped == 0
    engine._check()


def test_dlq_auto_retry_skips_ttl_expired(engine: Engine, put: Any, clock: Any) -> None:
    engine.dlq_config("q", DlqConfig(auto_retry=True, auto_retry_interval=10))
    put(ttl=1)
    clock.advance(1)
    engine.sweep()
    clock.advance(100)
    assert engine.sweep().dlq_retried == 0 and engine.dlq_size("q") == 1


def test_completed_retention_by_age_and_count(clock: Any) -> None:
    e = Engine(clock=clock, shards=1, completed_max_count=3, completed_max_age=1_000)
    e.add([new_job("q", "j", i, {}) for i in range(5)])
    e.complete_many([(x, None) for x in e.lease("q", 5, 1000)])
    assert e.counts("q")[JobState.COMPLETED] == 3
    clock.advance(1_001)
    e.sweep()
    assert e.counts("q")[JobState.COMPLETED] == 0
    e._check()


def test_completed_jobs_past_the_retention_bounds_are_counted_as_retired(clock: Any) -> None:
    e = Engine(clock=clock, shards=1, completed_max_count=3, completed_max_age=1_000)
    e.add([new_job("q", "j", i, {}) for i in range(5)])
    e.complete_many([(x, None) for x in e.lease("q", 5, 1000)])
    assert e.counts("q")[JobState.COMPLETED] == 3 and e.completed_retired("q") == 2
    clock.advance(1_001)
    e.sweep()  # by age: the queue holds nothing, but is kept for its count
    assert e.counts("q")[JobState.COMPLETED] == 0 and e.completed_retired("q") == 5
    e.add([new_job("q", "j", 9, {})])
    e.complete(e.lease("q", 1, 1000)[0])
    assert e.clean("q", 0, 10, JobState.COMPLETED) and e.completed_retired("q") == 0
    e.add([new_job("q", "j", 9, {})])
    e.complete(e.lease("q", 1, 1000)[0])
    clock.advance(1_001)
    e.sweep()
    e.obliterate("q")
    assert e.completed_retired("q") == 0 and e.completed_retired("never") == 0
    e._check()


def test_idle_queues_are_forgotten(engine: Engine, put: Any, take: Any) -> None:
    put("tmp", remove_on_complete=True)
    engine.complete(take("tmp")[0])
    engine.sweep()
    assert "tmp" not in engine.route("tmp").queues and engine.queues() == []
    engine.pause("kept")
    engine.sweep()
    assert engine.queues() == ["kept"]


def test_maintenance_thread_runs_two_phase_sweeps() -> None:
    now = [1_000_000]
    e = Engine(clock=lambda: now[0], shards=1)
    e.add([new_job("q", "j", 1, {})])
    e.lease("q", 1, 10)
    now[0] += 100
    e.start_maintenance(5)
    deadline = time.monotonic() + 5
    while e.counts("q")[JobState.WAITING] != 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    e.stop_maintenance()
    assert e.counts("q")[JobState.WAITING] == 1
    e.close()
