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


def test_plain_bulk_of_mixed_options_matches_the_one_by_one_path(
    engine: Engine, clock: Any
) -> None:
    """A plain bulk whose options change from job to job (ready, delayed, TTL, grouped,
    prioritised LIFO) and which crosses two queues of one shard: the same Jobs, counts
    and lease order as the same jobs added one at a time (``_add_one``)."""
    from bunq.job import Job

    one, two = "q", next(n for n in (f"r{i}" for i in range(50))
                         if engine.route(n) is engine.route("q"))  # fmt: skip
    shapes = [(one, {}), (one, {"delay": 50}), (one, {"ttl": 10_000}), (two, {}),
              (two, {"group": "g"}), (one, {"priority": 3, "lifo": True}), (one, {})]  # fmt: skip
    batch = [new_job(qn, "j", i, opts) for i, (qn, opts) in enumerate(shapes * 3)]
    other = Engine(clock=clock, shards=2)
    try:
        got = engine.add(batch)  # 21 jobs: the bulk path, plain (one shard, no lookups)
        alone = [other.add([b])[0] for b in batch]
        now = clock()
        for job, new in zip(got, batch, strict=True):
            delay = new.opts.delay
            assert job == Job(new.id, new.queue, new.name, new.data,
                              JobState.DELAYED if delay else JobState.WAITING, new.opts,
                              created_at=now, run_at=now + delay)  # fmt: skip
        assert got == alone
        for qn in (one, two):
            assert engine.counts(qn) == other.counts(qn)
            order = [le.id for le in engine.lease(qn, 100, 1000, "t")]
            assert order == [le.id for le in other.lease(qn, 100, 1000, "t")]
        engine._check()
    finally:
        other.close()


def test_plain_bulk_keeps_a_read_listing_in_step(engine: Engine) -> None:
    """With the waiting listing built (a page was read), a plain bulk adds to it too."""
    first = engine.add([new_job("q", "j", i, {}) for i in range(3)])
    assert len(engine.get_jobs_page("q", JobState.WAITING, 100, None).jobs) == 3
    more = engine.add([new_job("q", "j", i, {}) for i in range(70)])  # paused-GC size too
    listed = [j.id for j in engine.get_jobs_page("q", JobState.WAITING, 100, None).jobs]
    assert sorted(listed) == sorted(j.id for j in first + more)
    engine._check()


def test_plain_bulk_wakes_a_waiting_consumer(engine: Engine) -> None:
    import threading

    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(engine.wait("q", 5_000)))
    waiter.start()
    for _ in range(500):  # until the waiter is parked on the queue's condition
        shard = engine.route("q")
        with shard.lock:
            if shard.queue("q").nwait:
                break
        threading.Event().wait(0.002)
    engine.add([new_job("q", "j", i, {}) for i in range(5)])
    waiter.join(5)
    assert woke == [True]
    assert engine.counts("q")[JobState.WAITING] == 5


def test_plain_bulk_across_queues_with_one_options_object(engine: Engine) -> None:
    """One options object for every job, two queues of one shard, only one of which has
    its waiting listing built: each queue's lane, listing and counts get their own jobs."""
    from bunq.job import DEFAULT_OPTIONS

    two = next(n for n in (f"r{i}" for i in range(50)) if engine.route(n) is engine.route("q"))
    engine.add([new_job(two, "j", 0, {})])
    assert len(engine.get_jobs_page(two, JobState.WAITING, 100, None).jobs) == 1  # listing built
    batch = [NewJob(two if i % 3 else "q", "j", i, DEFAULT_OPTIONS) for i in range(30)]
    engine.add(batch)
    for qn in ("q", two):
        want = {b.id for b in batch if b.queue == qn}
        listed = {j.id for j in engine.get_jobs_page(qn, JobState.WAITING, 100, None).jobs}
        assert want <= listed and len(listed) == len(want) + (qn == two)
        assert engine.counts(qn)[JobState.WAITING] == len(listed)
    engine._check()
