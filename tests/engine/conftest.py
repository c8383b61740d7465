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
