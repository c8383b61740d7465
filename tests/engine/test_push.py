"""Admission flow (bunq.engine.push) on its own, with a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from bunq.engine import Engine
from bunq.errors import (
    ConfigError,
    DependencyError,
    DuplicateJob,
    PayloadTooLarge,
    ValidationError,
)
from bunq.job import JobState, NewJob
from bunq.queue import new_job


def test_add_returns_jobs_as_stored(engine: Engine, put: Any) -> None:
    job = put(data={"a": 1}, priority=2)
    assert job.state is JobState.WAITING and job.priority == 2 and job.data == {"a": 1}
    got = engine.get_job(job.id)
    assert got is not None and got.data == {"a": 1} and got.created_at == engine.clock()
    engine._check()


def test_data_is_copied_at_admission(engine: Engine, put: Any) -> None:
    data = {"k": [1]}
    job = put(data=data)
    data["k"].append(2)
    assert engine.get_job(job.id).data == {"k": [1]}


def test_delayed_and_counts(engine: Engine, put: Any, clock: Any) -> None:
    put(delay=100)
    put()
    assert engine.counts("q")[JobState.DELAYED] == 1
    clock.advance(100)
    assert engine.counts("q")[JobState.WAITING] == 2
    engine._check()


def test_bulk_over_several_queues_and_shards_is_atomic(engine: Engine, put: Any) -> None:
    names = [f"q{i}" for i in range(8)]
    assert len({engine.route(n).index for n in names}) == 2
    held = put("q3", unique_key="u")
    batch = [new_job(n, "j", i, {}) for i, n in enumerate(names)]
    batch.append(new_job("q3", "j", 9, {"unique_key": "u"}))
    with pytest.raises(DuplicateJob):
        engine.add(batch)
    assert sum(sum(engine.counts(n).values()) for n in names) == 1
    assert engine.get_job(held.id) is not None
    assert len(engine.add(batch[:-1])) == 8
    engine._check()


def test_plain_bulk_rolls_back_on_duplicate_id(engine: Engine) -> None:
    a = NewJob("q", "j", 1, new_job("q", "j", 1, {}).opts, id="same")
    with pytest.raises(DuplicateJob):
        engine.add([a, NewJob("q", "j", 2, a.opts, id="other"), a])
    assert sum(engine.counts("q").values()) == 0
    assert len(engine.add([NewJob("q", "j", 1, a.opts, id=f"i{i}") for i in range(100)])) == 100
    with pytest.raises(DuplicateJob):
        engine.add([NewJob("q", "j", 1, a.opts, id=f"n{i}") for i in range(99)] + [a, a])
    assert engine.counts("q")[JobState.WAITING] == 100
    engine._check()


def test_validation_errors(engine: Engine) -> None:
    with pytest.raises(ConfigError):
        engine.add([new_job("bad/name", "j", 1, {})])
    with pytest.raises(ValidationError):
        engine.add([new_job("q", "", 1, {})])
    with pytest.raises(ValidationError):
        engine.add([new_job("q", "j", object(), {})])
    with pytest.raises(PayloadTooLarge) as err:
        engine.add([new_job("q", "j", "x" * engine.max_payload, {})])
    assert err.value.data["limit"] == engine.max_payload
    assert engine.queues() == []


def test_job_id_across_queues_is_global(engine: Engine, put: Any) -> None:
    first = put("a", data=1, job_id="x")
    again = put("b", data=2, job_id="x")
    assert again.id == first.id and again.queue == "a"
    assert engine.counts("b")[JobState.WAITING] == 0


def test_job_id_reused_after_dlq(engine: Engine, put: Any, take: Any) -> None:
    from bunq.policy import decide_failure

    put(data=1, job_id="x", attempts=1)
    lease = take()[0]
    engine.fail(lease, "no", decide_failure(lease.job, engine.clock()))
    assert engine.dlq_size("q") == 1
    assert put(data=2, job_id="x").data == 2
    assert engine.dlq_size("q") == 0 and engine.get_job("x").data == 2
    engine._check()


def test_unique_replace_rollback_restores_holder(engine: Engine, put: Any) -> None:
    holder = put(data=1, unique_key="u")
    bad = new_job("q", "j", 2, {"unique_key": "u", "unique_strategy": "replace",
                                "depends_on": ["missing"]})  # fmt: skip
    with pytest.raises(DependencyError):
        engine.add([bad])
    assert engine.get_job(holder.id).state is JobState.WAITING
    with pytest.raises(DuplicateJob):
        put(unique_key="u")
    engine._check()


def test_dependency_on_job_in_another_shard(engine: Engine, put: Any, take: Any) -> None:
    a = put("q0", data="a")
    c = put("q1", data="c", depends_on=[a.id])
    assert engine.route("q0") is not engine.route("q1")
    assert c.state is JobState.WAITING_CHILDREN
    engine.complete(take("q0")[0])
    assert engine.get_job(c.id).state is JobState.WAITING
    engine._check()


def test_depends_on_itself_and_duplicates(engine: Engine, put: Any, take: Any) -> None:
    with pytest.raises(DependencyError):
        engine.add([NewJob("q", "j", 1, new_job("q", "j", 1, {"depends_on": ["me"]}).opts,
                           id="me")])  # fmt: skip
    a = put()
    c = put(depends_on=[a.id, a.id])
    engine.complete(take()[0])
    assert engine.get_job(c.id).state is JobState.WAITING


def test_dependency_on_removed_completed_job_is_satisfied(engine: Engine, put: Any,
                                                          take: Any) -> None:  # fmt: skip
    a = put(remove_on_complete=True)
    engine.complete(take()[0])
    assert engine.get_job(a.id) is None
    assert put(depends_on=[a.id]).state is JobState.WAITING  # the completed-id window


def test_add_promotes_due_delayed_jobs_first(engine: Engine, put: Any, clock: Any,
                                             take: Any) -> None:  # fmt: skip
    early = put(data="early", delay=1_000)  # run_at = t0 + 1000
    clock.advance(1_500)
    put(data="late")  # run_at = t0 + 1500: must come after `early`
    assert [lease.id for lease in take(n=2)][0] == early.id
