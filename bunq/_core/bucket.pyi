"""Token bucket and exact sliding-window rate limiters; time is passed in (compiled)."""

from __future__ import annotations

from typing import final

# Every method raises ValueError for a NaN `now` or a negative `n`.

@final
class TokenBucket:
    # ValueError unless capacity > 0, refill_per_sec >= 0 and all finite.
    def __init__(self, capacity: float, refill_per_sec: float, now: float) -> None: ...
    def try_acquire(self, now: float, n: float = 1.0) -> bool: ...
    def tokens(self, now: float) -> float: ...
    def time_until(self, now: float, n: float = 1.0) -> float: ...  # inf if never
    def _check(self) -> None: ...  # AssertionError on a broken invariant

@final
class SlidingWindow:
    # ValueError unless limit >= 1 and window is finite and > 0.
    def __init__(self, limit: int, window: float) -> None: ...
    def try_acquire(self, now: float, n: int = 1) -> bool: ...
    def count(self, now: float) -> int: ...
    def time_until(self, now: float, n: int = 1) -> float: ...  # inf if n > limit
    def _check(self) -> None: ...  # AssertionError on a broken invariant
