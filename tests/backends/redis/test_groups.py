"""FIFO groups on Redis, with the memory engine's semantics (tests/engine/test_groups_limits.py):
per-group concurrency and rate limits enforced in the claim, FIFO within a group,
round-robin across groups, a blocked group never blocking others."""

from __future__ import annotations

from typing import Any

import pytest
from contract.helpers import add

from bunq.backends.base import QueueLimits
from bunq.job import JobState

pytestmark = pytest.mark.redis


def take(backend: Any, n: int = 10) -> list[Any]:
    return list(backend.lease("q", n, 30_000, "w"))


def test_group_concurrency_one_is_strictly_serial(backend: Any) -> None:
    backend.set_limits("q", QueueLimits(group_concurrency=1))
    ids = [add(backend, data=i, group="g").id for i in range(5)]
    order = []
    while True:
        got = take(backend)
        if not got:
            break
        assert len(got) == 1  # never two of the group at once
        order.append(got[0].id)
        backend.complete(got[0])
    assert order == ids  # admission order within the group
    assert backend.counts("q")[JobState.COMPLETED] == 5


def test_blocked_group_blocks_neither_other_groups_nor_ungrouped(backend: Any) -> None:
    backend.set_limits("q", QueueLimits(group_concurrency=1))
    a1, a2 = add(backend, data="a1", group="a"), add(backend, data="a2", group="a")
    b1 = add(backend, data="b1", group="b")
    u1, u2 = add(backend, data="u1"), add(backend, data="u2")
    first = take(backend)
    assert {x.id for x in first} == {a1.id, b1.id, u1.id, u2.id}
    assert take(backend) == []
    backend.complete(next(x for x in first if x.id == a1.id))
    assert [x.id for x in take(backend)] == [a2.id]


def test_groups_take_turns(backend: Any) -> None:
    for g in "abc":
        for i in range(3):
            add(backend, data=f"{g}{i}", group=g)
    got = [x.job.data for x in take(backend, 9)]
    assert got[:3] == ["a0", "b0", "c0"] and got[3:6] == ["a1", "b1", "c1"]


def test_turns_continue_across_lease_calls(backend: Any) -> None:
    for g in "ab":
        for i in range(2):
            add(backend, data=f"{g}{i}", group=g)
    assert [x.job.data for x in take(backend, 1)] == ["a0"]
    assert [x.job.data for x in take(backend, 1)] == ["b0"]
    assert [x.job.data for x in take(backend, 2)] == ["a1", "b1"]


def test_priority_between_ungrouped_work_and_the_group_in_turn(backend: Any) -> None:
    add(backend, data="low", group="g")
    add(backend, data="high", priority=5)
    add(backend, data="mid", priority=2)
    add(backend, data="g-urgent", priority=9, group="g")
    assert [x.job.data for x in take(backend, 4)] == ["g-urgent", "high", "mid", "low"]


def test_group_rate_limit(backend: Any, clock: Any) -> None:
    backend.set_limits("q", QueueLimits(group_rate_max=2, group_rate_duration=1_000))
    for i in range(4):
        add(backend, data=i, group="g")
    add(backend, data="other", group="h")
    assert sorted(str(x.job.data) for x in take(backend)) == ["0", "1", "other"]
    assert take(backend) == []
    clock.advance(1_000)
    assert [x.job.data for x in take(backend)] == [2, 3]


def test_queue_concurrency_with_groups(backend: Any) -> None:
    backend.set_limits("q", QueueLimits(concurrency=2))
    for g in "abc":
        add(backend, group=g)
    assert len(take(backend)) == 2 and take(backend) == []
    assert backend.get_limits("q").concurrency == 2


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
