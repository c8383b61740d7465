"""FIFO groups on Redis beyond the contract suite's group tests (tests/contract/test_groups.py,
which run on redis too): grouped jobs through counts, listings, retries and drains, and a
rotation of many groups (Lua's unpack limit)."""

from __future__ import annotations

from typing import Any

import pytest
from contract.helpers import add

from bunq.backends.base import QueueLimits
from bunq.job import JobState

pytestmark = pytest.mark.redis


def take(backend: Any, n: int = 10) -> list[Any]:
    return list(backend.lease("q", n, 30_000, "w"))


def test_grouped_jobs_count_list_retry_and_drain(backend: Any, clock: Any) -> None:
    from contract.helpers import fail

    backend.set_limits("q", QueueLimits(group_concurrency=1))
    a = add(backend, data="a", group="g", attempts=2, backoff=100)
    add(backend, data="b", group="g")
    add(backend, data="u")
    assert backend.counts("q")[JobState.WAITING] == 3
    assert [j.data for j in backend.get_jobs("q", JobState.WAITING)] == ["a", "b", "u"]
    leases = take(backend)
    assert {x.job.data for x in leases} == {"a", "u"}
    fail(backend, next(x for x in leases if x.id == a.id))  # retried in 100 ms: the group frees
    assert [x.job.data for x in take(backend)] == ["b"]
    clock.advance(100)
    assert take(backend) == []  # b holds the group's one slot
    assert backend.counts("q")[JobState.WAITING] == 1
    assert backend.drain("q") == 1 and backend.counts("q")[JobState.WAITING] == 0


def test_many_groups_rotate_and_empty_out(backend: Any) -> None:
    from bunq.queue import new_job

    # Over 8,000 groups stay in the rotation while the emptied ones leave it: the script
    # rewrites the rotation in chunks (Lua's unpack() stops at ~8,000 values).
    n = 17_000
    for lo in range(0, n, 5_000):
        backend.add([new_job("q", "j", i, {"group": f"g{i}"})
                     for i in range(lo, min(lo + 5_000, n))])  # fmt: skip
    backend.add([new_job("q", "j", n + i, {"group": f"g{i}"}) for i in range(0, n, 2)])
    got = []
    while leases := take(backend, 2_000):
        got += [x.job.data for x in leases]
        backend.complete_many([(x, None) for x in leases])
    assert sorted(got) == list(range(n)) + [n + i for i in range(0, n, 2)]
    assert backend.counts("q")[JobState.WAITING] == 0 and take(backend) == []
