"""FIFO groups: per-group concurrency and rate limits, FIFO inside a group, turns across
groups (moved here from the memory engine's tests: every backend with GROUPS)."""

from __future__ import annotations

from typing import Any

from contract.capability import requires
from contract.helpers import add

from bunq.backends.base import Capability as C
from bunq.backends.base import QueueLimits


def take(backend: Any, n: int = 1) -> list[Any]:
    return backend.lease("q", n, 30_000, "t")  # type: ignore[no-any-return]


@requires(C.GROUPS, C.CONCURRENCY_LIMIT)
def test_group_concurrency_one_is_strictly_serial(backend: Any) -> None:
    backend.set_limits("q", QueueLimits(group_concurrency=1))
    ids = [add(backend, data=i, group="g").id for i in range(5)]
    order = []
    while True:
        got = take(backend, 10)
        if not got:
            break
        assert len(got) == 1  # never two of the group at once
        order.append(got[0].id)
        backend.complete(got[0])
    assert order == ids  # admission order within the group
    assert backend.counts("q")["completed"] == 5


@requires(C.GROUPS, C.CONCURRENCY_LIMIT)
def test_blocked_group_blocks_neither_other_groups_nor_ungrouped(backend: Any) -> None:
    backend.set_limits("q", QueueLimits(group_concurrency=1))
    a1, a2 = add(backend, data="a1", group="a"), add(backend, data="a2", group="a")
    b1 = add(backend, data="b1", group="b")
    u1, u2 = add(backend, data="u1"), add(backend, data="u2")
    first = take(backend, 10)
    assert {x.id for x in first} == {a1.id, b1.id, u1.id, u2.id}
    assert take(backend, 10) == []
    backend.complete(next(x for x in first if x.id == a1.id))
    assert [x.id for x in take(backend, 10)] == [a2.id]


@requires(C.GROUPS, C.CONCURRENCY_LIMIT)
def test_a_failed_job_gives_its_group_slot_back(backend: Any) -> None:
    from contract.helpers import fail

    backend.set_limits("q", QueueLimits(group_concurrency=1))
    add(backend, data=1, group="g", attempts=1)
    two = add(backend, data=2, group="g")
    [first] = take(backend, 10)
    assert take(backend, 10) == []
    fail(backend, first)
    assert [x.id for x in take(backend, 10)] == [two.id]


@requires(C.GROUPS)
def test_groups_take_turns(backend: Any) -> None:
    for g in "abc":
        for i in range(3):
            add(backend, data=f"{g}{i}", group=g)
    got = [x.job.data for x in take(backend, 9)]
    assert got[:3] == ["a0", "b0", "c0"] and got[3:6] == ["a1", "b1", "c1"]


@requires(C.GROUPS)
def test_turns_carry_over_between_claims(backend: Any) -> None:
    # One job per claim: a busy group cannot starve the others across claims either.
    for g in "ab":
        for i in range(3):
            add(backend, data=f"{g}{i}", group=g)
    got = []
    for _ in range(4):
        [lease] = take(backend, 1)
        got.append(lease.job.data)
    assert got == ["a0", "b0", "a1", "b1"]


@requires(C.GROUPS, C.PRIORITY)
def test_priority_between_ungrouped_work_and_the_group_in_turn(backend: Any) -> None:
    add(backend, data="low", group="g")
    add(backend, data="high", priority=5)
    add(backend, data="mid", priority=2)
    add(backend, data="g-urgent", priority=9, group="g")
    # Inside a group, priority orders; the group in turn competes with ungrouped work.
    assert [x.job.data for x in take(backend, 4)] == ["g-urgent", "high", "mid", "low"]


@requires(C.GROUPS, C.RATE_LIMIT, C.CLOCK)
def test_group_rate_limit(backend: Any, clock: Any) -> None:
    backend.set_limits("q", QueueLimits(group_rate_max=2, group_rate_duration=1_000))
    for i in range(4):
        add(backend, data=i, group="g")
    add(backend, data="other", group="h")
    assert sorted(str(x.job.data) for x in take(backend, 10)) == ["0", "1", "other"]
    assert take(backend, 10) == []
    clock.advance(1_000)
    assert [x.job.data for x in take(backend, 10)] == [2, 3]


@requires(C.GROUPS, C.CONCURRENCY_LIMIT)
def test_queue_concurrency_with_groups(backend: Any) -> None:
    backend.set_limits("q", QueueLimits(concurrency=2))
    for g in "abc":
        add(backend, group=g)
    assert len(take(backend, 10)) == 2 and take(backend, 10) == []
    assert backend.get_limits("q").concurrency == 2
