"""Queue.add_bulk's own loop on memory://: the Jobs it builds, and the paused collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from bunq import Queue, connect
from bunq.batching import BULK
from bunq.job import NewJob


@pytest.fixture
def queue() -> Iterator[Queue]:
    q = Queue("q", connect("memory://"))
    yield q
    q.backend.close()


def test_bulk_new_jobs_equal_the_constructor(queue: Queue, monkeypatch: Any) -> None:
    """The NewJobs built inline (build_new_job) are real, frozen NewJobs."""
    seen: list[NewJob] = []
    add = queue.backend.add
    monkeypatch.setattr(queue.backend, "add", lambda jobs: seen.extend(jobs) or add(jobs))
    out = queue.add_bulk([("a", 1), ("b", {"k": 2}, {"priority": 3})])
    assert [type(j) for j in seen] == [NewJob, NewJob]
    assert seen == [NewJob("q", j.name, j.data, j.opts, j.id) for j in out]
    with pytest.raises(AttributeError):
        seen[0].name = "other"  # type: ignore[misc]


@pytest.mark.parametrize("n", [BULK - 1, BULK])
def test_a_big_bulk_pauses_the_collector_while_it_builds(queue: Queue, monkeypatch: Any,
                                                        n: int) -> None:  # fmt: skip
    """From BULK items on, the NewJobs are built with the cyclic GC paused (they are
    garbage when the call returns); it runs again afterwards, as before the call."""
    from bunq import queue as queuemod

    during: list[bool] = []
    stream = queuemod.new_job_ids

    def ids(n: int) -> Any:
        during.append(gc.isenabled())
        return stream(n)

    monkeypatch.setattr(queuemod, "new_job_ids", ids)
    assert gc.isenabled()
    assert len(queue.add_bulk([("a", i) for i in range(n)])) == n
    assert during == [n < BULK] and gc.isenabled()
    gc.disable()
    try:  # a collector the caller disabled stays disabled
        queue.add_bulk([("a", i) for i in range(n)])
        assert not gc.isenabled()
    finally:
        gc.enable()
