"""Fixtures for the memory engine's own tests: a fake clock and small engines."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bunq.engine import Engine
from bunq.job import Job, Lease
from bunq.queue import new_job


@pytest.fixture
def engine(clock: Any) -> Iterator[Engine]:
    """An engine with two shards on the fake clock."""
    e = Engine(clock=clock, shards=2)
    yield e
    e.close()


@pytest.fixture
def put(engine: Engine) -> Callable[..., Job]:
    """``put(queue="q", data=None, **opts)``: add one job through the public path."""

    def _put(queue: str = "q", data: Any = None, name: str = "job", **opts: Any) -> Job:
        return engine.add([new_job(queue, name, data, opts)])[0]

    return _put


@pytest.fixture
def take(engine: Engine) -> Callable[..., list[Lease]]:
    """``take(queue="q", n=1, lease_ms=30_000)``: lease jobs."""

    def _take(queue: str = "q", n: int = 1, lease_ms: int = 30_000) -> list[Lease]:
        return engine.lease(queue, n, lease_ms, "t")

    return _take


def check_counts(engine: Engine) -> None:
    """Assert the running counters equal a recount of every record (invariant)."""
    from bunq.engine.record import ACTIVE, CHILDREN, COMPLETED, FAILED, WAITING

    now = engine.clock()
    for shard in engine.shards:
        with shard.lock:
            shard.promote(now)
            for name, q in shard.queues.items():
                recs = [r for r in shard.jobs.values() if r.queue == name]
                waiting = [r for r in recs if r.state is WAITING]
                assert q.n_delayed == sum(r.run_at > now for r in waiting), name
                assert q.n_waiting == sum(r.run_at <= now for r in waiting), name
                assert q.n_active == sum(r.state is ACTIVE for r in recs), name
                assert q.n_children == sum(r.state is CHILDREN for r in recs), name
                assert len(q.completed) == sum(r.state is COMPLETED for r in recs), name
                assert len(q.dlq) == sum(r.state is FAILED for r in recs), name
                assert q.lanes.ready_ids() + len(q.parked) == q.n_waiting, name
