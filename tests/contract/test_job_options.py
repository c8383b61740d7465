"""Job options: ``keep_logs`` (newest log lines only), ``debounce`` (the newest add wins)."""

from __future__ import annotations

from typing import Any

import pytest
from contract.capability import CLOCK, requires
from contract.helpers import add

from bunq import JobState
from bunq.backends.base import Capability as C
from bunq.errors import ValidationError
from bunq.queue import Queue, new_job


@requires(C.LOGS)
def test_keep_logs_bounds_a_jobs_log_to_its_newest_lines(backend: Any) -> None:
    two = add(backend, keep_logs=2)
    plain = add(backend)
    for i in range(5):
        backend.add_log(two.id, f"line {i}")
        backend.add_log(plain.id, f"line {i}")
    assert backend.get_logs(two.id) == ["line 3", "line 4"]
    assert len(backend.get_logs(plain.id)) == 5
    none = add(backend, keep_logs=0)
    backend.add_log(none.id, "dropped")
    assert backend.get_logs(none.id) == []


def test_keep_logs_is_checked() -> None:
    from bunq.job import JobOptions

    for bad in (-1, 1.5, "3", 10**7):
        with pytest.raises(ValidationError):
            JobOptions.parse({"keep_logs": bad})
    assert JobOptions.parse({"keep_logs": 3}).to_dict()["keep_logs"] == 3
    assert "keep_logs" not in JobOptions.parse({}).to_dict()


@requires(C.UNIQUE_KEY, C.GET_JOB, CLOCK)
def test_debounce_keeps_the_newest_add_within_its_window(backend: Any, clock: Any) -> None:
    q = Queue("q", backend)
    first = q.add("save", {"v": 1}, debounce={"id": "doc-7", "ttl": 1000})
    clock.advance(500)
    second = q.add("save", {"v": 2}, debounce={"id": "doc-7", "ttl": 1000})
    assert backend.get_job(first.id) is None  # replaced
    assert [j.data for j in backend.get_jobs("q", JobState.WAITING)] == [{"v": 2}]
    assert q.get_deduplication_job_id("doc-7") == second.id
    with pytest.raises(ValidationError):
        q.add("save", None, debounce={"ttl": 10})
    with pytest.raises(ValidationError):
        q.add("save", None, debounce={"id": "x"}, unique_key="y")


@requires(C.GROUPS, C.GROUP_MAX_SIZE)
def test_group_max_size_refuses_an_add_over_the_groups_pending_jobs(backend: Any) -> None:
    from bunq.errors import GroupFull

    capped = {"group": "tenant-1", "group_max_size": 2}
    add(backend, **capped)
    add(backend, delay=60_000, **capped)  # delayed jobs count too
    with pytest.raises(GroupFull) as err:
        add(backend, **capped)
    assert err.value.code == "group_full" and "maximum size of 2" in str(err.value)
    add(backend, group="tenant-2", group_max_size=2)  # per group
    add(backend, group="tenant-1")  # a job without the option is not limited
    with pytest.raises(GroupFull):  # a batch over the bound admits nothing
        backend.add([new_job("q", "j", None, {"group": "tenant-3", "group_max_size": 1})
                     for _ in range(2)])  # fmt: skip
    assert backend.counts("q")[JobState.WAITING] + backend.counts("q")[JobState.DELAYED] == 4
    leases = backend.lease("q", 10, 30_000, "t")  # a leased job no longer counts
    assert any(lease.job.opts.group == "tenant-1" for lease in leases)
    add(backend, **capped)
    with pytest.raises(ValidationError):
        add(backend, group_max_size=2)  # without a group
