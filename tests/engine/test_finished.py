"""Finished jobs by time (bunq.engine.finished): pages, clean(grace) and retention.

The engine answers these from a skip list; each test compares the answer
with the SQL backends' order recomputed from the finish times it set.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bunq.engine import Engine
from bunq.job import DEFAULT_OPTIONS, FailureReason, JobState, NewJob
from bunq.policy import FailDecision

from ..conftest import FakeClock

Q = "fin"
STEPS = st.lists(st.sampled_from([0, 0, 1, 2, 5, -3]), min_size=1, max_size=40)


def finish(engine: Engine, clock: FakeClock, steps: list[int],
           fail_every: int = 0) -> list[tuple[int, int, str]]:  # fmt: skip
    """Add one job per step, then settle them one by one, moving the clock by each step.

    Steps may be 0 (jobs finished in the same millisecond) or negative (a
    clock that stepped back). Every ``fail_every``-th job is dead-lettered,
    the others complete. Returns (finished at, admission index, id) per job,
    in the order they finished.
    """
    jobs = engine.add([NewJob(Q, "j", i, DEFAULT_OPTIONS) for i in range(len(steps))])
    leases = engine.lease(Q, len(steps), 60_000)
    assert [lease.job.id for lease in leases] == [job.id for job in jobs]
    out = []
    for i, (lease, step) in enumerate(zip(leases, steps, strict=True)):
        clock.advance(step)
        if fail_every and i % fail_every == 0:
            engine.fail(lease, "boom", FailDecision("dlq", 0, FailureReason.EXPLICIT_FAIL))
        else:
            engine.complete(lease, i)
        out.append((clock.now, i, lease.job.id))
    engine._check()
    return out


@settings(max_examples=60, deadline=None)
@given(steps=STEPS, offset=st.integers(0, 45), limit=st.integers(1, 12))
def test_pages_are_the_sql_order(steps: list[int], offset: int, limit: int) -> None:
    clock = FakeClock(1_000_000)
    engine = Engine(clock=clock, shards=1)
    try:
        done = finish(engine, clock, steps)
        want = [jid for _, _, jid in sorted(done, reverse=True)]  # time, then admission, DESC
        page = engine.get_jobs(Q, JobState.COMPLETED, offset, limit)
        assert [j.id for j in page] == want[offset : offset + limit]
    finally:
        engine.close()


@settings(max_examples=60, deadline=None)
@given(steps=STEPS, back=st.integers(0, 60), limit=st.integers(0, 12))
def test_clean_removes_the_oldest_beyond_grace(steps: list[int], back: int, limit: int) -> None:
    clock = FakeClock(1_000_000)
    engine = Engine(clock=clock, shards=1)
    try:
        done = finish(engine, clock, steps)
        before = clock.now - back
        old = sorted((at, order, jid) for order, (at, _, jid) in enumerate(done) if at <= before)
        gone = engine.clean(Q, back, limit, JobState.COMPLETED)
        assert gone == [jid for _, _, jid in old[:limit]]  # oldest first, then finish order
        assert engine.counts(Q)[JobState.COMPLETED] == len(done) - len(gone)
        engine._check()
    finally:
        engine.close()


def test_dlq_pages_and_clean_use_the_dlq_time(clock: FakeClock) -> None:
    engine = Engine(clock=clock, shards=1)
    try:
        done = finish(engine, clock, [1, 0, 2, 0, 1, 3, 0, 0], fail_every=2)
        failed = sorted((at, i, jid) for at, i, jid in done if i % 2 == 0)  # +1, +3, +4, +7
        everything = engine.dlq_list(Q, limit=100)
        assert [e.job.id for e in everything] == [jid for _, _, jid in failed[::-1]]
        assert [e.entered_at for e in everything] == [at for at, _, _ in failed[::-1]]
        page = engine.dlq_list(Q, limit=2, offset=1)
        assert [e.job.id for e in page] == [e.job.id for e in everything[1:3]]
        gone = engine.clean(Q, 0, 2, JobState.FAILED)
        assert gone == [jid for _, _, jid in failed[:2]]
        assert engine.dlq_size(Q) == len(failed) - 2
        engine._check()
    finally:
        engine.close()


def test_retention_drops_by_age_after_the_clock_stepped_back(clock: Any) -> None:
    engine = Engine(clock=clock, shards=1, completed_max_age=100)
    try:
        done = finish(engine, clock, [0, 50, -40, 30])  # finished at +0, +50, +10, +40
        clock.advance(100)  # now +140: +0 and +10 are older than 100 ms, +40 is not
        engine.sweep()
        left = [j.id for j in engine.get_jobs(Q, JobState.COMPLETED, 0, 10)]
        assert left == [done[1][2], done[3][2]]
        engine._check()
    finally:
        engine.close()
