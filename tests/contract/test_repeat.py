"""Repeatable jobs (``Queue.add(repeat=...)``) on the cron machinery: each run once."""

from __future__ import annotations

from typing import Any

import pytest
from contract.capability import CLOCK, requires

from bunq import JobState, Queue
from bunq.backends.base import Capability as C
from bunq.cron import Scheduler
from bunq.errors import ValidationError


def runs(backend: Any) -> list[Any]:
    """Fire what is due, from two schedulers in turn (two brokers / ticks)."""
    first = Scheduler(backend).fire_due(queue="q")
    assert Scheduler(backend).fire_due(queue="q") == []  # the other one finds nothing left
    return first


@requires(C.CRON, CLOCK, C.GET_JOB)
def test_every_with_a_limit_fires_each_run_once(backend: Any, clock: Any) -> None:
    clock.now = 1_700_000_000_500  # half-way through a second: runs are second-aligned
    q = Queue("q", backend)
    first = q.add("beat", {"n": 1}, repeat={"every": 1000, "limit": 3})
    assert first.state is JobState.DELAYED and first.run_at == 1_700_000_001_000
    assert first.id == f"cron:{q.get_repeatables()[0].name}:1700000001000"
    again = q.add("beat", {"n": 1}, repeat={"every": 1000, "limit": 3})
    assert again.id == first.id  # the same repeatable job: nothing new
    assert runs(backend) == []  # the first run was added ahead, not again when due
    clock.advance(600)
    assert runs(backend) == []
    clock.advance(1000)
    (second,) = runs(backend)
    assert second.id.endswith(":1700000002000") and second.data == {"n": 1}
    clock.advance(1000)
    (third,) = runs(backend)
    clock.advance(5000)
    assert runs(backend) == []  # the limit is reached
    assert len({first.id, second.id, third.id}) == 3
    (sched,) = q.get_repeatables()
    assert sched.runs == 3 and sched.next_run is None


@requires(C.CRON, CLOCK, C.GET_JOB)
def test_immediately_runs_now_and_start_end_bound_the_runs(backend: Any, clock: Any) -> None:
    q = Queue("q", backend)
    now = clock.now
    first = q.add("now", None, repeat={"every": 500, "immediately": True, "endDate": now + 1200})
    assert first.state is JobState.WAITING
    clock.advance(500)
    assert len(runs(backend)) == 1
    clock.advance(500)
    assert len(runs(backend)) == 1
    clock.advance(500)  # past endDate
    assert runs(backend) == []
    later = q.add("later", None, repeat={"every": 500, "start_date": now + 60_000})
    assert later.state is JobState.DELAYED and later.run_at == now + 60_000


@requires(C.CRON, CLOCK, C.GET_JOB)
def test_pattern_and_removal(backend: Any, clock: Any) -> None:
    clock.now = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
    q = Queue("q", backend)
    first = q.add("nightly", None, repeat={"pattern": "0 3 * * *", "key": "nightly"})
    assert first.run_at == 1_700_017_200_000  # 03:00 UTC the next day
    (sched,) = q.get_repeatables()
    assert q.remove_repeatable(sched.name) is True
    clock.advance(2 * 86_400_000)
    assert runs(backend) == []
    assert q.remove_repeatable(sched.name) is False


@requires(C.CRON)
def test_bad_repeat_options_are_refused(backend: Any) -> None:
    q = Queue("q", backend)
    for bad in ({}, {"every": 1000, "pattern": "* * * * *"}, {"pattern": "* * * * *",
                "immediately": True}, {"every": 1000, "nope": 1}, "daily"):  # fmt: skip
        with pytest.raises(ValidationError):
            q.add("x", None, repeat=bad)
    with pytest.raises(ValidationError):
        q.add("x", None, repeat={"every": 1000}, job_id="fixed")
