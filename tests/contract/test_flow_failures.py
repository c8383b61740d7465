"""What a dead-lettered flow child does to its parent (bunq.jobrules.FlowFailure).

Children live in queue ``kids`` and the parent in ``q``, so leasing a child
never leases the parent by accident.
"""

from __future__ import annotations

from typing import Any

from contract.capability import requires
from contract.helpers import fail, lease1

from bunq import FlowJob, FlowProducer, JobState
from bunq.backends.base import Capability as C
from bunq.job import FailureReason

FLOWS = (C.FLOWS, C.GET_JOB)


def flow(backend: Any, *children: dict[str, Any], parent: dict[str, Any] | None = None) -> Any:
    kids = [FlowJob("kid", "kids", data=i, opts={"attempts": 1, **o})
            for i, o in enumerate(children)]  # fmt: skip
    return FlowProducer(backend).add(FlowJob("parent", "q", "p", opts=parent or {}, children=kids))


def state(backend: Any, job_id: str) -> JobState:
    return backend.get_job(job_id).state  # type: ignore[no-any-return]


@requires(*FLOWS)
def test_by_default_the_parent_keeps_waiting(backend: Any) -> None:
    parent = flow(backend, {}).job
    lease = lease1(backend, "kids")
    fail(backend, lease, "kid broke")
    assert state(backend, lease.job.id) is JobState.FAILED
    backend.sweep()
    assert state(backend, parent.id) is JobState.WAITING_CHILDREN
    assert backend.lease("q", 1, 30_000) == []


@requires(*FLOWS, C.FLOW_POLICIES)
def test_fail_parent_on_failure_dead_letters_the_parent_and_up_the_tree(backend: Any) -> None:
    kid = FlowJob("kid", "kids", 0, opts={"attempts": 1, "fail_parent_on_failure": True})
    mid = FlowJob("mid", "q", "m", opts={"fail_parent_on_failure": True}, children=[kid])
    res = FlowProducer(backend).add(FlowJob("top", "q", "t", children=[mid]))
    ids = {j.name: j.id for j in res.jobs.values()}
    fail(backend, lease1(backend, "kids"), "kid broke")
    got = backend.get_job(ids["mid"])
    assert got.state is JobState.FAILED and got.reason is FailureReason.DEPENDENCY_FAILED
    assert "kid broke" in got.error
    top = backend.get_job(ids["top"])  # mid failed with fail_parent: top follows
    assert top.state is JobState.FAILED and top.reason is FailureReason.DEPENDENCY_FAILED
    assert backend.lease("q", 5, 30_000) == []


@requires(*FLOWS, C.FLOW_POLICIES)
def test_ignore_dependency_counts_the_child_as_done(backend: Any) -> None:
    res = flow(backend, {"ignore_dependency_on_failure": True}, {})
    parent = res.job
    leases = backend.lease("kids", 2, 30_000, "t")
    by_data = {lease.job.data: lease for lease in leases}
    fail(backend, by_data[0], "kid broke")
    assert state(backend, parent.id) is JobState.WAITING_CHILDREN  # child 1 still runs
    backend.complete(by_data[1], "ok")
    assert lease1(backend, "q").job.id == parent.id
    assert list(backend.get_children_results(parent.id).values()) == ["ok"]


@requires(*FLOWS, C.FLOW_POLICIES)
def test_remove_dependency_drops_the_child_from_the_parent(backend: Any) -> None:
    parent = flow(backend, {"remove_dependency_on_failure": True}).job
    child = lease1(backend, "kids")
    fail(backend, child, "kid broke")
    got = backend.get_job(parent.id)
    assert got.state is JobState.WAITING and child.job.id not in got.opts.depends_on


@requires(*FLOWS, C.FLOW_POLICIES)
def test_continue_parent_runs_it_while_other_children_wait(backend: Any) -> None:
    parent = flow(backend, {"continue_parent_on_failure": True}, {}).job
    leases = backend.lease("kids", 2, 30_000, "t")
    failing = next(lease for lease in leases if lease.job.data == 0)
    fail(backend, failing, "kid broke")
    assert lease1(backend, "q").job.id == parent.id  # the other child is still active


@requires(*FLOWS, C.FLOW_POLICIES, C.JOB_OPS)
def test_a_policy_applies_to_a_discarded_child_too(backend: Any) -> None:
    parent = flow(backend, {"fail_parent_on_failure": True}).job
    kid = next(j for j in backend.get_jobs("kids", JobState.WAITING))
    backend.discard_job(kid.id)
    assert state(backend, parent.id) is JobState.FAILED


@requires(*FLOWS, C.FLOW_POLICIES)
def test_remove_child_dependency_releases_the_parent_once(backend: Any) -> None:
    res = flow(backend, {}, {})
    parent = res.job
    kids = sorted(backend.get_jobs("kids", JobState.WAITING), key=lambda j: j.data)
    assert backend.remove_child_dependency(kids[0].id) == (True, None)
    assert backend.remove_child_dependency(kids[0].id)[0] is False  # already removed
    assert state(backend, parent.id) is JobState.WAITING_CHILDREN
    removed, queue = backend.remove_child_dependency(kids[1].id)
    assert removed is True and queue == "q"
    assert lease1(backend, "q").job.id == parent.id
    for lease in backend.lease("kids", 5, 30_000, "t"):  # finishing later changes nothing
        backend.complete(lease, None)
    assert state(backend, parent.id) is JobState.ACTIVE


@requires(*FLOWS, C.FLOW_POLICIES)
def test_queue_reads_failed_and_ignored_children(backend: Any) -> None:
    from bunq import Queue

    parent = flow(backend, {}, {"ignore_dependency_on_failure": True}, {}).job
    for lease in backend.lease("kids", 3, 30_000, "t"):
        if lease.job.data == 2:
            backend.complete(lease, "done")
        else:
            fail(backend, lease, f"broke {lease.job.data}")
    q = Queue("q", backend)
    failed, ignored = q.get_failed_children(parent.id), q.get_ignored_children_failures(parent.id)
    assert sorted(failed.values()) == ["broke 0"] and sorted(ignored.values()) == ["broke 1"]
    assert list(q.get_children_results(parent.id).values()) == ["done"]
    (kid0,) = failed
    assert q.remove_child_dependency(kid0) is True
    assert state(backend, parent.id) is JobState.WAITING
    assert q.get_failed_children(parent.id) == {}  # no longer one of its dependencies


@requires(*FLOWS, C.FLOW_POLICIES)
def test_policies_apply_to_a_parent_in_the_childs_own_queue(backend: Any) -> None:
    kids = [FlowJob("kid", "q", i, opts={"attempts": 1, "ignore_dependency_on_failure": True})
            for i in range(2)]  # fmt: skip
    top = FlowJob("top", "q", "t", opts={"attempts": 1, "fail_parent_on_failure": True})
    res = FlowProducer(backend).add(FlowJob("root", "top-q", None, children=[
        FlowJob("mid", "q", "m", opts={"attempts": 1, "fail_parent_on_failure": True},
                children=kids), top]))  # fmt: skip
    ids = {j.name: j.id for j in res.jobs.values()}
    for lease in backend.lease("q", 10, 30_000, "t"):  # the two kids and "top"
        fail(backend, lease, f"broke {lease.job.data}")
    mid = backend.get_job(ids["mid"])
    assert mid.state is JobState.WAITING  # both kids ignored: mid runs
    root = backend.get_job(ids["root"])  # "top" failed it
    assert root.state is JobState.FAILED and root.reason is FailureReason.DEPENDENCY_FAILED
    fail(backend, lease1(backend, "q"), "mid broke")  # root already failed: nothing more
    assert backend.get_job(ids["root"]).state is JobState.FAILED
