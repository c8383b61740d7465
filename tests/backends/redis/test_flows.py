"""Dependencies and flows across queues (two slots: link, then admit; releases through
the completing queue's outbox)."""

from __future__ import annotations

from typing import Any

import pytest
from contract.helpers import add, lease1

from bunq import DependencyError, FlowJob, FlowProducer, JobState
from bunq.queue import new_job

pytestmark = pytest.mark.redis


def test_a_flow_with_children_in_other_queues(backend: Any) -> None:
    res = FlowProducer(backend).add(FlowJob("assemble", "parents", data="p", children=[
        FlowJob("part", "left", data=1), FlowJob("part", "right", data=2,
                                                 children=[FlowJob("leaf", "parents", data=3)]),
    ]))  # fmt: skip
    parent = res.job
    assert parent.state is JobState.WAITING_CHILDREN
    [leaf] = backend.lease("parents", 5, 30_000)  # the leaf only: its grandparent waits
    assert leaf.job.data == 3
    assert backend.get_job(parent.id).state is JobState.WAITING_CHILDREN
    backend.complete(lease1(backend, "left"), 10)
    assert backend.lease("right", 5, 30_000) == []  # "right" waits for the leaf
    backend.complete(leaf, 30)
    backend.complete(lease1(backend, "right"), 20)
    assert backend.get_job(parent.id).state is JobState.WAITING
    assert sorted(backend.get_children_results(parent.id).values()) == [10, 20]
    assert lease1(backend, "parents").id == parent.id


def test_depends_on_a_done_job_of_another_queue_is_ready(backend: Any) -> None:
    a = add(backend, "a")
    backend.complete(lease1(backend, "a"), "r")
    assert add(backend, "b", depends_on=[a.id]).state is JobState.WAITING


def test_unknown_dependency_in_any_queue_admits_nothing(backend: Any) -> None:
    a = add(backend, "a")
    with pytest.raises(DependencyError):
        backend.add([new_job("b", "x", 1, {"depends_on": [a.id, "nope"]})])
    assert sum(backend.counts("b").values()) == 0


def test_a_crashed_completer_leaves_the_release_to_the_sweep(
        backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    a = add(backend, "a")
    b = add(backend, "b", depends_on=[a.id])
    delivered = type(backend)._deliver
    monkeypatch.setattr(type(backend), "_deliver", lambda self, queue: None)  # dies before
    backend.complete(lease1(backend, "a"))
    assert backend.get_job(b.id).state is JobState.WAITING_CHILDREN
    monkeypatch.setattr(type(backend), "_deliver", delivered)
    backend.sweep()
    assert backend.get_job(b.id).state is JobState.WAITING
    backend.sweep()  # delivering again changes nothing
    assert lease1(backend, "b").id == b.id


def test_a_release_before_the_dependents_admission_is_counted(backend: Any) -> None:
    a = add(backend, "a")
    lease = lease1(backend, "a")
    # link first (as the admission does), complete before the admission runs
    from bunq.backends.redis.scripts import SCRIPTS

    backend._pipelined(SCRIPTS.link, {backend.keys.queue("a"): ["b", "early", a.id]})
    backend.complete(lease)
    job = backend.add([new_job("b", "x", 1, {"depends_on": [a.id], "job_id": "early"})])[0]
    assert backend.get_job(job.id).state is JobState.WAITING
