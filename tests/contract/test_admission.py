"""Admission, ordering, delays and queries."""

from __future__ import annotations

from typing import Any

from contract.capability import requires
from contract.helpers import add, lease1

from bunq.backends.base import Capability as C
from bunq.job import JobState


@requires(C.GET_JOB, C.PRIORITY)
def test_add_then_get_job_roundtrips_data(backend: Any) -> None:
    data = {"to": "a@b.c", "n": [1, 2.5, None, True], "bytes": b"\x00\xff", "nested": {"k": "v"}}
    job = add(backend, data=data, priority=3)
    got = backend.get_job(job.id)
    assert got is not None
    assert got.data == data and got.priority == 3 and got.state is JobState.WAITING
    assert got.queue == "q" and got.name == "job" and got.attempts == 0


@requires(C.GET_JOB)
def test_get_job_missing_is_none(backend: Any) -> None:
    assert backend.get_job("nope") is None


@requires(C.PRIORITY)
def test_lease_orders_by_priority_then_fifo(backend: Any, clock: Any) -> None:
    ids = []
    for i, prio in enumerate([0, 5, 0, 5, 1]):
        ids.append(add(backend, data=i, priority=prio).id)
        clock.advance(1)
    leases = backend.lease("q", 10, 30_000, "w")
    assert [lease.job.data for lease in leases] == [1, 3, 4, 0, 2]


def test_lease_fifo_within_one_millisecond(backend: Any) -> None:
    for i in range(20):
        add(backend, data=i)
    assert [lease.job.data for lease in backend.lease("q", 20, 30_000)] == list(range(20))


@requires(C.LIFO)
def test_lifo_jobs_come_first_newest_first(backend: Any, clock: Any) -> None:
    add(backend, data="fifo1")
    clock.advance(1)
    add(backend, data="lifo1", lifo=True)
    clock.advance(1)
    add(backend, data="fifo2")
    clock.advance(1)
    add(backend, data="lifo2", lifo=True)
    got = [lease.job.data for lease in backend.lease("q", 10, 30_000)]
    assert got == ["lifo2", "lifo1", "fifo1", "fifo2"]


@requires(C.GET_JOB, C.CLOCK)
def test_delayed_job_is_not_leased_before_its_time(backend: Any, clock: Any) -> None:
    job = add(backend, delay=5_000)
    assert backend.get_job(job.id).state is JobState.DELAYED
    assert backend.counts("q")[JobState.DELAYED] == 1
    assert backend.lease("q", 1, 30_000) == []
    clock.advance(4_999)
    assert backend.lease("q", 1, 30_000) == []
    clock.advance(1)
    assert backend.get_job(job.id).state is JobState.WAITING
    assert lease1(backend).id == job.id


def test_lease_spends_an_attempt_and_respects_n(backend: Any) -> None:
    for i in range(5):
        add(backend, data=i)
    leases = backend.lease("q", 3, 30_000, "w")
    assert len(leases) == 3
    assert all(lease.attempt == 1 and lease.job.attempts == 1 for lease in leases)
    assert all(lease.job.state is JobState.ACTIVE for lease in leases)
    counts = backend.counts("q")
    assert counts[JobState.ACTIVE] == 3 and counts[JobState.WAITING] == 2


def test_lease_on_empty_or_unknown_queue_is_empty(backend: Any) -> None:
    assert backend.lease("empty", 10, 30_000) == []
    assert backend.lease("q", 0, 30_000) == []


def test_queues_are_independent(backend: Any) -> None:
    add(backend, "a", data=1)
    add(backend, "b", data=2)
    assert lease1(backend, "b").job.data == 2
    assert lease1(backend, "a").job.data == 1
    assert {"a", "b"} <= set(backend.queues())


def test_counts_cover_every_state(backend: Any) -> None:
    counts = backend.counts("q")
    assert set(counts) == set(JobState) and sum(counts.values()) == 0
    add(backend)
    add(backend, delay=1000)
    assert backend.counts("q")[JobState.WAITING] == 1


@requires(C.LIST_JOBS)
def test_get_jobs_lists_by_state(backend: Any, clock: Any) -> None:
    a = add(backend, data="a")
    add(backend, data="d", delay=10_000)
    lease = lease1(backend)
    backend.complete(lease, "ok")
    b = add(backend, data="b")
    assert [j.id for j in backend.get_jobs("q", JobState.WAITING)] == [b.id]
    assert [j.data for j in backend.get_jobs("q", JobState.DELAYED)] == ["d"]
    done = backend.get_jobs("q", JobState.COMPLETED)
    assert [j.id for j in done] == [a.id] and done[0].result == "ok"
    assert backend.get_jobs("q", JobState.WAITING, offset=1) == []


def test_concurrent_leases_never_share_a_job(backend: Any) -> None:
    import threading

    for i in range(400):
        add(backend, data=i)
    got: list[str] = []
    lock = threading.Lock()

    def claim() -> None:
        while True:
            leases = backend.lease("q", 7, 30_000, threading.current_thread().name)
            if not leases:
                return
            with lock:
                got.extend(lease.id for lease in leases)

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 400 and len(set(got)) == 400
