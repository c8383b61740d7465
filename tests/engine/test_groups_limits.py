"""Rate and concurrency limits and FIFO groups (bunq.engine.lanes, qstate)."""

from __future__ import annotations

from typing import Any

from bunq.backends.base import QueueLimits
from bunq.engine import Engine

from .conftest import check_counts


def test_rate_limit_returns_fewer_never_errors(engine: Engine, put: Any, take: Any,
                                               clock: Any) -> None:  # fmt: skip
    for _ in range(10):
        put()
    engine.set_limits("q", QueueLimits(rate_max=4, rate_duration=1_000))
    assert len(take(n=10)) == 4
    assert take(n=10) == []
    clock.advance(500)
    assert len(take(n=10)) == 2  # half the window refilled half the bucket
    clock.advance(10_000)
    assert len(take(n=10)) == 4


def test_group_concurrency_one_is_strictly_serial(engine: Engine, put: Any, take: Any) -> None:
    engine.set_limits("q", QueueLimits(group_concurrency=1))
    ids = [put(data=i, group="g").id for i in range(5)]
    order = []
    while True:
        got = take(n=10)
        if not got:
            break
        assert len(got) == 1  # never two of the group at once
        order.append(got[0].id)
        engine.complete(got[0])
    assert order == ids  # admission order within the group
    check_counts(engine)


def test_blocked_group_blocks_neither_other_groups_nor_ungrouped(engine: Engine, put: Any,
                                                                 take: Any) -> None:  # fmt: skip
    engine.set_limits("q", QueueLimits(group_concurrency=1))
    a1, a2 = put(data="a1", group="a"), put(data="a2", group="a")
    b1 = put(data="b1", group="b")
    u1, u2 = put(data="u1"), put(data="u2")
    first = take(n=10)
    assert {x.id for x in first} == {a1.id, b1.id, u1.id, u2.id}
    assert take(n=10) == []
    engine.complete(next(x for x in first if x.id == a1.id))
    assert [x.id for x in take(n=10)] == [a2.id]


def test_groups_take_turns(engine: Engine, put: Any, take: Any) -> None:
    for g in "abc":
        for i in range(3):
            put(data=f"{g}{i}", group=g)
    got = [x.job.data for x in take(n=9)]
    assert got[:3] == ["a0", "b0", "c0"] and got[3:6] == ["a1", "b1", "c1"]


def test_priority_between_ungrouped_work_and_the_group_in_turn(engine: Engine, put: Any,
                                                                take: Any) -> None:  # fmt: skip
    put(data="low", group="g")
    put(data="high", priority=5)
    put(data="mid", priority=2)
    put(data="g-urgent", priority=9, group="g")
    # Inside a group, priority orders; the group in turn competes with ungrouped work.
    assert [x.job.data for x in take(n=4)] == ["g-urgent", "high", "mid", "low"]


def test_group_rate_limit(engine: Engine, put: Any, take: Any, clock: Any) -> None:
    engine.set_limits("q", QueueLimits(group_rate_max=2, group_rate_duration=1_000))
    for i in range(4):
        put(data=i, group="g")
    put(data="other", group="h")
    assert sorted(str(x.job.data) for x in take(n=10)) == ["0", "1", "other"]
    assert take(n=10) == []
    clock.advance(1_000)
    assert [x.job.data for x in take(n=10)] == [2, 3]


def test_queue_concurrency_with_groups(engine: Engine, put: Any, take: Any) -> None:
    engine.set_limits("q", QueueLimits(concurrency=2))
    for g in "abc":
        put(group=g)
    assert len(take(n=10)) == 2 and take(n=10) == []
    assert engine.get_limits("q").concurrency == 2
