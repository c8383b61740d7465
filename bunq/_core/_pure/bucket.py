"""Reference TokenBucket and exact SlidingWindow; time is always passed in."""

from __future__ import annotations

import math
import operator
from collections import deque
from typing import final

from ._conv import as_float


def _checked_now(now: float) -> float:
    t = as_float(now)
    if t != t:
        raise ValueError("now must not be NaN")
    return t


@final
class TokenBucket:
    """Token bucket that starts full and refills continuously.

    A ``now`` earlier than the latest one seen is treated as that latest one.

    >>> b = TokenBucket(2, 1.0, now=0.0)
    >>> b.try_acquire(0.0, 2), b.try_acquire(0.0), b.time_until(0.0)
    (True, False, 1.0)
    """

    __slots__ = ("_capacity", "_last", "_rate", "_tokens")

    def __init__(self, capacity: float, refill_per_sec: float, now: float) -> None:
        cap, rate, t = as_float(capacity), as_float(refill_per_sec), as_float(now)
        if not (math.isfinite(cap) and cap > 0.0):
            raise ValueError(f"capacity must be finite and > 0, got {cap!r}")
        if not (math.isfinite(rate) and rate >= 0.0):
            raise ValueError(f"refill_per_sec must be finite and >= 0, got {rate!r}")
        if not math.isfinite(t):
            raise ValueError(f"now must be finite, got {t!r}")
        self._capacity, self._rate, self._tokens, self._last = cap, rate, cap, t

    def _refill(self, now: float, n: float) -> float:
        # Validate (now, n), bring the level up to now, return n as a float.
        t, need = as_float(now), as_float(n)
        if t != t:
            raise ValueError("now must not be NaN")
        if not need >= 0.0:
            raise ValueError(f"n must be >= 0, got {need!r}")
        if t > self._last:
            level = self._tokens + (t - self._last) * self._rate
            self._tokens = level if level < self._capacity else self._capacity
            self._last = t
        return need

    def try_acquire(self, now: float, n: float = 1.0) -> bool:
        """Take ``n`` tokens if available; return whether it did."""
        need = self._refill(now, n)
        if self._tokens >= need:
            self._tokens -= need
            return True
        return False

    def tokens(self, now: float) -> float:
        """Return the tokens available at ``now``."""
        self._refill(now, 0.0)
        return self._tokens

    def time_until(self, now: float, n: float = 1.0) -> float:
        """Return seconds until ``n`` tokens are available (0.0 now, inf never)."""
        need = self._refill(now, n)
        if self._tokens >= need:
            return 0.0
        if need > self._capacity or self._rate == 0.0:
            return math.inf
        return (need - self._tokens) / self._rate

    def _check(self) -> None:
        """Verify the invariants; ``AssertionError`` on a violation."""
        if not 0.0 <= self._tokens <= self._capacity or not math.isfinite(self._last):
            raise AssertionError("token level or clock out of range")


@final
class SlidingWindow:
    """Exact sliding-window limiter: at most ``limit`` units per ``window`` seconds.

    A unit admitted at t counts at ``now`` iff ``now - window < t <= now``.

    >>> w = SlidingWindow(2, 10.0)
    >>> w.try_acquire(0.0), w.try_acquire(1.0), w.try_acquire(2.0), w.time_until(2.0)
    (True, True, False, 8.0)
    """

    __slots__ = ("_last", "_limit", "_times", "_window")

    def __init__(self, limit: int, window: float) -> None:
        lim, win = operator.index(limit), as_float(window)
        if lim < 1:
            raise ValueError(f"limit must be >= 1, got {lim!r}")
        if not (math.isfinite(win) and win > 0.0):
            raise ValueError(f"window must be finite and > 0, got {win!r}")
        self._limit, self._window, self._last = lim, win, -math.inf
        self._times: deque[float] = deque()  # admitted units, oldest first

    def _advance(self, now: float, n: int) -> tuple[float, int]:
        # Validate, clamp now to the latest seen, expire old units.
        t = _checked_now(now)
        k = operator.index(n)
        if k < 0:
            raise ValueError(f"n must be >= 0, got {k!r}")
        self._last = t = max(t, self._last)
        while self._times and self._times[0] <= t - self._window:
            self._times.popleft()
        return t, k

    def try_acquire(self, now: float, n: int = 1) -> bool:
        """Admit ``n`` units at ``now`` if the window has room; return whether."""
        t, k = self._advance(now, n)
        if k > self._limit - len(self._times):
            return False
        self._times.extend([t] * k)
        return True

    def count(self, now: float) -> int:
        """Return the units counted in ``(now - window, now]``."""
        self._advance(now, 0)
        return len(self._times)

    def time_until(self, now: float, n: int = 1) -> float:
        """Return seconds until ``n`` units would be admitted (0.0 now, inf never)."""
        t, k = self._advance(now, n)
        if k > self._limit:
            return math.inf
        if k <= self._limit - len(self._times):
            return 0.0
        return self._times[len(self._times) + k - self._limit - 1] + self._window - t

    def _check(self) -> None:
        """Verify the invariants; ``AssertionError`` on a violation."""
        ts = list(self._times)
        if len(ts) > self._limit or ts != sorted(ts):
            raise AssertionError("too many or unordered timestamps")
        if ts and not (ts[0] > self._last - self._window and ts[-1] <= self._last):
            raise AssertionError("timestamp outside the window")
