"""Cursor pages (``get_jobs_page``, bunq.pages): the listing of ``get_jobs``, a keyset at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from contract.capability import requires
from contract.helpers import add, lease1

from bunq.backends.base import Capability as C
from bunq.errors import ValidationError
from bunq.job import JobState
from bunq.pages import encode


def walk(backend: Any, state: JobState, limit: int, between: Callable[[int], None] | None = None,
         queue: str = "q") -> list[str]:  # fmt: skip
    """Every page of ``state`` in turn; ``between(i)`` runs after page ``i``."""
    ids: list[str] = []
    after = None
    shown = JobState.WAITING if state is JobState.PAUSED else state  # a Job is never PAUSED
    for i in range(1000):
        page = backend.get_jobs_page(queue, state, limit, after)
        assert len(page.jobs) <= limit
        assert all(j.state is shown for j in page.jobs), page.jobs
        ids += [j.id for j in page.jobs]
        if page.next is None:
            return ids
        assert page.jobs, "a page with a next cursor holds jobs"
        after = page.next
        if between is not None:
            between(i)
    raise AssertionError("pages never ended")


def listing(backend: Any, state: JobState) -> list[str]:
    return [j.id for j in backend.get_jobs("q", state, 0, 10_000)]


@requires(C.LIST_JOBS, C.PRIORITY, C.LIFO)
@pytest.mark.parametrize("limit", [1, 3, 7, 100])
def test_waiting_pages_list_get_jobs_order_once(backend: Any, clock: Any, limit: int) -> None:
    for i in range(23):
        add(backend, data=i, priority=i % 3, lifo=i % 5 == 0)
        if i % 4 == 0:
            clock.advance(1)
    ids = walk(backend, JobState.WAITING, limit)
    assert ids == listing(backend, JobState.WAITING) and len(ids) == 23


@requires(C.LIST_JOBS, C.GROUPS, C.PRIORITY)
def test_pages_merge_group_lanes(backend: Any, clock: Any) -> None:
    for i in range(17):
        add(backend, data=i, group=f"g{i % 3}" if i % 2 else None, priority=i % 2)
        clock.advance(1)
    assert walk(backend, JobState.WAITING, 4) == listing(backend, JobState.WAITING)


@requires(C.LIST_JOBS, C.DELAY, C.CLOCK)
def test_delayed_pages_follow_run_time_with_ties(backend: Any, clock: Any) -> None:
    for i in range(15):
        add(backend, data=i, delay=10_000 + 1_000 * (i % 3))  # five jobs per run time
    ids = walk(backend, JobState.DELAYED, 4)
    assert ids == listing(backend, JobState.DELAYED) and len(ids) == 15
    clock.advance(10_500)  # the first five are due: no longer delayed
    assert len(walk(backend, JobState.DELAYED, 4)) == 10


@requires(C.LIST_JOBS, C.RESULTS)
def test_completed_pages_newest_first(backend: Any, clock: Any) -> None:
    for i in range(12):
        add(backend, data=i)
    for i in range(12):
        backend.complete(lease1(backend), i)
        if i % 4 == 3:
            clock.advance(5)  # runs of equal finish times
    ids = walk(backend, JobState.COMPLETED, 5)
    assert ids == listing(backend, JobState.COMPLETED) and len(ids) == 12


@requires(C.LIST_JOBS)
def test_active_pages(backend: Any) -> None:
    for i in range(9):
        add(backend, data=i)
    backend.lease("q", 7, 30_000, "w")
    assert sorted(walk(backend, JobState.ACTIVE, 2)) == sorted(listing(backend, JobState.ACTIVE))
    assert len(walk(backend, JobState.ACTIVE, 2)) == 7


@requires(C.LIST_JOBS, C.PRIORITY)
def test_jobs_added_and_taken_between_pages(backend: Any, clock: Any) -> None:
    """Jobs that stay waiting throughout are listed exactly once, whatever happens between
    pages; no job is listed twice; the listed jobs keep the state's order."""
    for i in range(30):
        add(backend, data=i, priority=i % 2)
        clock.advance(1)
    first = set(listing(backend, JobState.WAITING))
    taken: set[str] = set()

    def churn(i: int) -> None:
        add(backend, data=f"hi{i}", priority=5)  # sorts before every cursor: not listed
        add(backend, data=f"lo{i}", priority=0)  # sorts after: listed later
        taken.update(lease.job.id for lease in backend.lease("q", 2, 30_000, "w"))
        clock.advance(1)

    ids = walk(backend, JobState.WAITING, 4, churn)
    assert len(ids) == len(set(ids))
    assert first - taken <= set(ids)
    final = listing(backend, JobState.WAITING)
    still = [i for i in ids if i in set(final)]
    assert still == [i for i in final if i in set(still)]


@requires(C.LIST_JOBS, C.RESULTS)
def test_completed_pages_while_more_complete(backend: Any, clock: Any) -> None:
    for i in range(20):
        add(backend, data=i)
    for _ in range(10):
        backend.complete(lease1(backend), None)
        clock.advance(1)
    before = listing(backend, JobState.COMPLETED)

    def more(i: int) -> None:
        backend.complete(lease1(backend), None)  # newer than every cursor: not listed
        clock.advance(1)

    assert walk(backend, JobState.COMPLETED, 3, more) == before


@requires(C.LIST_JOBS, C.PAUSE)
def test_paused_queue_pages_as_paused(backend: Any) -> None:
    for i in range(5):
        add(backend, data=i)
    backend.pause("q")
    assert backend.get_jobs_page("q", JobState.WAITING, 10).jobs == []
    assert len(walk(backend, JobState.PAUSED, 2)) == 5


@requires(C.LIST_JOBS)
def test_last_page_and_unknown_queue(backend: Any) -> None:
    add(backend, data=1)
    page = backend.get_jobs_page("q", JobState.WAITING, 1)
    assert len(page.jobs) == 1 and page.next is None
    empty = backend.get_jobs_page("nothing-here", JobState.WAITING, 10)
    assert empty.jobs == [] and empty.next is None


@requires(C.LIST_JOBS)
@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "!!",
        "bm90IGpzb24",
        encode(JobState.DELAYED, (1, 2)),
        encode(JobState.WAITING, ("x", 1, 2, 3, 4, 5)),
        7,
    ],
)
def test_bad_cursors_are_refused(backend: Any, cursor: Any) -> None:
    add(backend, data=1)
    add(backend, data=2)
    with pytest.raises(ValidationError) as e:
        backend.get_jobs_page("q", JobState.WAITING, 1, cursor)
    assert e.value.data.get("field") == "after"


@requires(C.LIST_JOBS)
def test_cursor_of_another_state_is_refused(backend: Any) -> None:
    add(backend, data=1)
    add(backend, data=2)
    after = backend.get_jobs_page("q", JobState.WAITING, 1).next
    assert after is not None
    with pytest.raises(ValidationError):
        backend.get_jobs_page("q", JobState.ACTIVE, 1, after)


@requires(C.LIST_JOBS)
@pytest.mark.parametrize("limit", [0, -1, "5", None])
def test_bad_limits_are_refused(backend: Any, limit: Any) -> None:
    with pytest.raises(ValidationError):
        backend.get_jobs_page("q", JobState.WAITING, limit)


@requires(C.LIST_JOBS, C.JOB_OPS, C.RESULTS)
@pytest.mark.parametrize("state", [JobState.COMPLETED, JobState.DELAYED, JobState.WAITING])
def test_the_cursors_own_job_removed(backend: Any, clock: Any, state: JobState) -> None:
    """The job a cursor points at may be gone when the next page is asked for."""
    for i in range(14):
        add(backend, data=i, delay=10_000 + 1_000 * (i % 2) if state is JobState.DELAYED else 0)
        clock.advance(i % 2)
    if state is JobState.COMPLETED:
        for i in range(14):
            backend.complete(lease1(backend), None)
            clock.advance(i % 3 == 0)  # ties in finish time
    before = listing(backend, state)
    shown: list[str] = []
    after = None
    while True:
        page = backend.get_jobs_page("q", state, 3, after)
        shown += [j.id for j in page.jobs]
        if page.next is None:
            break
        backend.remove_job(page.jobs[-1].id)
        after = page.next
    assert shown == before
