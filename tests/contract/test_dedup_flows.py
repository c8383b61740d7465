"""Custom ids, unique keys, dependencies and flows."""

from __future__ import annotations

from typing import Any

import pytest
from contract.capability import requires
from contract.helpers import add, lease1

from bunq import DependencyError, DuplicateJob, FlowJob, FlowProducer, JobState
from bunq.backends.base import Capability as C
from bunq.errors import JobNotFound, ValidationError


@requires(C.JOB_ID, C.GET_JOB)
def test_job_id_is_idempotent_while_live(backend: Any) -> None:
    first = add(backend, data=1, job_id="order-7")
    again = add(backend, data=2, job_id="order-7")
    assert again.id == first.id == "order-7"
    assert backend.get_job("order-7").data == 1
    assert backend.counts("q")[JobState.WAITING] == 1


@requires(C.JOB_ID, C.GET_JOB)
def test_job_id_reusable_after_the_job_finished(backend: Any) -> None:
    add(backend, data=1, job_id="x")
    backend.complete(lease1(backend), None)
    add(backend, data=2, job_id="x")
    got = backend.get_job("x")
    assert got.data == 2 and got.state is JobState.WAITING


@requires(C.UNIQUE_KEY)
def test_unique_key_rejects_while_held(backend: Any) -> None:
    add(backend, unique_key="u1")
    with pytest.raises(DuplicateJob) as err:
        add(backend, unique_key="u1")
    assert err.value.code == "duplicate_job"
    assert backend.counts("q")[JobState.WAITING] == 1
    add(backend, "other-queue", unique_key="u1")  # keys are per queue


@requires(C.UNIQUE_KEY)
def test_unique_key_released_when_job_finishes(backend: Any) -> None:
    first = add(backend, unique_key="u1")
    with pytest.raises(DuplicateJob):  # held while the job is live
        add(backend, unique_key="u1")
    backend.complete(lease1(backend))
    second = add(backend, unique_key="u1")  # released when it finished
    assert second.id != first.id


@requires(C.UNIQUE_KEY, C.CLOCK)
def test_unique_key_extend_keeps_the_holder(backend: Any, clock: Any) -> None:
    first = add(backend, unique_key="u", unique_ttl=1_000, unique_strategy="extend")
    clock.advance(900)
    again = add(backend, unique_key="u", unique_ttl=1_000, unique_strategy="extend")
    assert again.id == first.id
    clock.advance(900)  # 1,800 ms after the first add, 900 after the extension
    with pytest.raises(DuplicateJob):
        add(backend, unique_key="u", unique_ttl=1_000)
    clock.advance(101)
    add(backend, unique_key="u", unique_ttl=1_000)


@requires(C.UNIQUE_KEY, C.GET_JOB)
def test_unique_key_replace_swaps_a_waiting_holder(backend: Any) -> None:
    first = add(backend, data=1, unique_key="u")
    second = add(backend, data=2, unique_key="u", unique_strategy="replace")
    assert second.id != first.id
    assert backend.get_job(first.id) is None
    assert lease1(backend).job.data == 2


@requires(C.UNIQUE_KEY)
def test_unique_key_replace_refuses_an_active_holder(backend: Any) -> None:
    add(backend, unique_key="u")
    lease1(backend)
    with pytest.raises(DuplicateJob):
        add(backend, unique_key="u", unique_strategy="replace")


@requires(C.UNIQUE_KEY, C.CLOCK)
def test_unique_ttl_expires(backend: Any, clock: Any) -> None:
    first = add(backend, unique_key="u", unique_ttl=500)
    clock.advance(400)
    with pytest.raises(DuplicateJob):  # within the ttl
        add(backend, unique_key="u", unique_ttl=500)
    clock.advance(101)
    second = add(backend, unique_key="u", unique_ttl=500)  # the ttl is over
    assert second.id != first.id


@requires(C.FLOWS, C.GET_JOB)
def test_depends_on_waits_for_every_dependency(backend: Any) -> None:
    a = add(backend, data="a")
    b = add(backend, data="b")
    c = add(backend, data="c", depends_on=[a.id, b.id])
    assert c.state is JobState.WAITING_CHILDREN
    leases = backend.lease("q", 5, 30_000)
    assert {lease.job.data for lease in leases} == {"a", "b"}
    backend.complete(leases[0], 1)
    assert backend.get_job(c.id).state is JobState.WAITING_CHILDREN
    backend.complete(leases[1], 2)
    assert backend.get_job(c.id).state is JobState.WAITING
    assert lease1(backend).job.data == "c"


@requires(C.FLOWS)
def test_depends_on_completed_job_is_ready(backend: Any) -> None:
    a = add(backend)
    backend.complete(lease1(backend))
    assert add(backend, depends_on=[a.id]).state is JobState.WAITING


@requires(C.FLOWS)
def test_unknown_dependency_admits_nothing(backend: Any) -> None:
    from bunq.queue import new_job

    with pytest.raises(DependencyError):
        backend.add([new_job("q", "ok", 1, {}), new_job("q", "bad", 2, {"depends_on": ["nope"]})])
    assert backend.counts("q")[JobState.WAITING] == 0


@requires(C.FLOWS)
def test_flow_parent_waits_for_children_and_reads_results(backend: Any) -> None:
    flow = FlowProducer(backend)
    res = flow.add(FlowJob("assemble", "q", data="p", children=[
        FlowJob("part", "q", data=1), FlowJob("part", "q", data=2)]))  # fmt: skip
    parent = res.job
    assert parent.state is JobState.WAITING_CHILDREN and len(res.jobs) == 3
    for lease in backend.lease("q", 10, 30_000):
        backend.complete(lease, lease.job.data * 10)
    results = backend.get_children_results(parent.id)
    assert sorted(results.values()) == [10, 20]
    assert lease1(backend).id == parent.id


@requires(C.FLOWS, C.GET_JOB)
def test_set_parent_relinks_children_admitted_before_their_parent(backend: Any) -> None:
    """bunqueue's Python FlowProducer: children first (a placeholder parent), then
    the parent waiting on them, then UpdateParent for each (``set_parent``)."""
    done = add(backend, "q", "done", 1, parent_id="pending")
    backend.complete(lease1(backend), 10)  # finished before it is linked
    kid = add(backend, "q2", "kid", 2, parent_id="pending")
    parent = add(backend, "q", "parent", depends_on=[done.id, kid.id])
    backend.set_parent(done.id, parent.id)
    backend.set_parent(kid.id, parent.id)
    assert backend.get_job(kid.id).opts.parent_id == parent.id
    backend.complete(lease1(backend, "q2"), 20)
    assert backend.get_children_results(parent.id) == {done.id: 10, kid.id: 20}
    assert backend.get_children_results("pending") == {}
    assert lease1(backend).id == parent.id
    with pytest.raises(JobNotFound):
        backend.set_parent("no-such-job", parent.id)
    with pytest.raises(JobNotFound):
        backend.set_parent(kid.id, "no-such-parent")
    with pytest.raises(ValidationError):
        backend.set_parent(kid.id, kid.id)


@requires(C.FLOWS)
def test_dag_runs_in_dependency_order(backend: Any) -> None:
    flow = FlowProducer(backend)
    res = flow.add_dag("q", {
        "fetch": {"data": 1}, "parse": {"depends_on": ["fetch"]},
        "store": {"depends_on": ["parse", "fetch"]},
    })  # fmt: skip
    order = []
    while True:
        leases = backend.lease("q", 10, 30_000)
        if not leases:
            break
        for lease in leases:
            order.append(lease.job.name)
            backend.complete(lease)
    assert order == ["fetch", "parse", "store"]
    assert set(res.jobs) == {"fetch", "parse", "store"}


@requires(C.FLOWS)
def test_dag_cycle_and_unknown_step_write_nothing(backend: Any) -> None:
    flow = FlowProducer(backend)
    with pytest.raises(DependencyError, match="cycle"):
        flow.add_dag("q", {"a": {"depends_on": ["b"]}, "b": {"depends_on": ["a"]}})
    with pytest.raises(DependencyError, match="unknown step"):
        flow.add_dag("q", {"a": {"depends_on": ["zzz"]}})
    assert sum(backend.counts("q").values()) == 0
