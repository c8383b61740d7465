"""Per-job methods on a Job read through a Queue: each is the Queue method with the job's id."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
from contract.capability import requires
from contract.helpers import add, lease1

from bunq.backends.base import Capability as C
from bunq.errors import DetachedJob, JobNotFound
from bunq.job import JobState
from bunq.queue import Queue
from bunq.tick import tick


def queue(backend: Any) -> Queue:
    return Queue("q", backend)


@requires(C.JOB_OPS, C.GET_JOB)
def test_promote_change_priority_update_and_refresh(backend: Any) -> None:
    q = queue(backend)
    job = q.add("job", {"n": 1}, delay=60_000)
    assert job.get_state() is JobState.DELAYED
    job.change_priority(7)
    job.update({"n": 2})
    job.promote()
    assert job.state is JobState.DELAYED and job.data == {"n": 1}  # the snapshot stays
    fresh = job.refresh()
    assert fresh.state is JobState.WAITING and fresh.priority == 7 and fresh.data == {"n": 2}
    assert fresh.get_state() is JobState.WAITING


@requires(C.JOB_OPS, C.GET_JOB)
def test_change_delay_and_remove(backend: Any) -> None:
    q = queue(backend)
    job = q.add_bulk([("job", None)])[0]
    job.change_delay(60_000)
    assert job.refresh().state is JobState.DELAYED
    assert job.remove() is True
    assert job.remove() is False
    with pytest.raises(JobNotFound):
        job.refresh()


@requires(C.JOB_OPS, C.GET_JOB, C.DLQ)
def test_discard_then_retry(backend: Any) -> None:
    q = queue(backend)
    job = q.add("job")
    job.discard()
    assert job.refresh().state is JobState.FAILED
    job.retry()
    assert job.refresh().state is JobState.WAITING


@requires(C.GET_JOB)
def test_reads_through_the_queue_are_attached(backend: Any) -> None:
    q = queue(backend)
    job = q.add("job", 1)
    for read in (q.get_job(job.id), q.get_job_by_custom_id(job.id),
                 q.get_jobs("waiting")[0], q.get_jobs_page("waiting").jobs[0]):  # fmt: skip
        assert read is not None and read == job
        assert read.get_state() is JobState.WAITING


@requires(C.PROGRESS, C.LOGS, C.GET_JOB)
def test_progress_and_logs(backend: Any) -> None:
    q = queue(backend)
    job = q.add("job")
    job.update_progress(40)
    job.log("one")
    assert job.get_logs() == ["one"]
    assert job.refresh().progress == 40


@requires(C.GET_JOB)
def test_wait_returns_the_result_after_a_worker_runs_it(backend: Any) -> None:
    q = queue(backend)
    job = q.add("job", 20)
    result = tick("q", lambda j: j.data + 1, backend, housekeeping=False)
    assert result is not None
    assert job.wait(5) == 21


def test_a_detached_job_raises_a_typed_error(backend: Any) -> None:
    job = add(backend)  # built by the backend directly
    for call in (job.promote, job.remove, job.refresh, lambda: job.wait(0.1),
                 lambda: job.change_priority(1), lambda: job.log("x")):  # fmt: skip
        with pytest.raises(DetachedJob) as exc:
            call()
        assert exc.value.code == "detached_job"
        assert "not read through a Queue" in str(exc.value)
    lease = lease1(backend)
    with pytest.raises(DetachedJob, match=r"use Queue\.retry\(job\.id\)"):
        lease.job.retry()


def test_the_back_reference_is_not_part_of_the_value(backend: Any) -> None:
    q = queue(backend)
    attached = q.add("job", 1)
    detached = dataclasses.replace(attached)
    assert getattr(detached, "_queue", None) is None
    assert attached == detached and hash(attached) == hash(detached)
    assert repr(attached) == repr(detached) and "Queue" not in repr(attached)
    assert getattr(pickle.loads(pickle.dumps(attached)), "_queue", None) is None
    with pytest.raises(DetachedJob):
        detached.promote()


@requires(C.GET_JOB)
def test_the_job_a_tick_hands_its_handler_is_attached(backend: Any) -> None:
    q = queue(backend)
    job = q.add("job", 1)
    assert job.get_state() is JobState.WAITING  # (SQS refuses get_job here)
    seen: list[Any] = []
    tick("q", lambda j: seen.append(j.get_state()), backend, housekeeping=False)
    assert seen == [JobState.ACTIVE]
    assert job.refresh().state is JobState.COMPLETED


@requires(C.GET_JOB)
def test_the_job_a_worker_hands_its_handler_is_attached(backend: Any) -> None:
    from bunq.worker import Worker

    q = queue(backend)
    job = q.add("job", 2)
    worker = Worker("q", lambda j: [j.get_state().value, j.data], backend, idle_wait_ms=10)
    worker.start()
    try:
        assert list(job.wait(10)) == ["active", 2]
    finally:
        worker.close()
