"""Rate limits of the engine (FIFO groups: tests/contract/test_groups.py, every backend)."""

from __future__ import annotations

from typing import Any

from bunq.backends.base import QueueLimits
from bunq.engine import Engine


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
