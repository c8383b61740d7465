"""TokenBucket and SlidingWindow: semantics by example, then model-based state machines.

The bucket model does exact rational arithmetic (``Fraction``). Every time,
rate, capacity and amount drawn is dyadic and small, so the float results
are exact and must equal the model bit for bit.
"""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

TIMES = st.integers(0, 64).map(lambda q: q / 4)  # 0.0 .. 16.0 in quarter steps; may go back


def test_bucket_starts_full_and_refills(impl: SimpleNamespace) -> None:
    b = impl.bucket.TokenBucket(2, 1.0, now=100.0)
    assert b.tokens(100.0) == 2.0
    assert b.try_acquire(100.0, 2) and not b.try_acquire(100.0)
    assert b.time_until(100.0) == 1.0
    assert b.time_until(100.0, 3) == math.inf  # more than capacity
    assert b.tokens(100.5) == 0.5
    assert b.try_acquire(101.0)
    assert b.tokens(1000.0) == 2.0  # capped at capacity
    assert b.try_acquire(1000.0, 0) and b.time_until(1000.0, 0) == 0.0


def test_bucket_time_going_backwards_adds_nothing(impl: SimpleNamespace) -> None:
    b = impl.bucket.TokenBucket(10, 1.0, now=50.0)
    assert b.try_acquire(50.0, 10)
    assert b.tokens(40.0) == 0.0  # earlier than last: treated as 50
    assert b.tokens(52.0) == 2.0
    assert b.tokens(51.0) == 2.0  # no double counting after the step back


def test_bucket_zero_refill_and_errors(impl: SimpleNamespace) -> None:
    b = impl.bucket.TokenBucket(1, 0.0, now=0.0)
    assert b.try_acquire(0.0)
    assert b.time_until(5.0) == math.inf
    for args in ((0, 1.0, 0.0), (1, -1.0, 0.0), (math.inf, 1.0, 0.0), (1, 1.0, math.nan)):
        with pytest.raises(ValueError):
            impl.bucket.TokenBucket(*args)
    with pytest.raises(ValueError):
        b.try_acquire(1.0, -1)
    with pytest.raises(ValueError):
        b.tokens(math.nan)
    with pytest.raises(TypeError):
        b.try_acquire("1")


def test_window_counts_half_open_interval(impl: SimpleNamespace) -> None:
    w = impl.bucket.SlidingWindow(3, 10.0)
    assert w.try_acquire(0.0, 2) and w.try_acquire(5.0)
    assert not w.try_acquire(9.0)
    assert w.time_until(9.0) == 1.0  # the units at t=0 leave at t=10 (interval is open below)
    assert w.count(10.0) == 1 and w.try_acquire(10.0, 2)
    assert not w.try_acquire(10.0, 4) and w.time_until(10.0, 4) == math.inf
    assert w.try_acquire(3.0, 0)  # an earlier now is clamped to 10.0
    assert w.count(3.0) == 3


def test_window_memory_is_bounded_by_limit(impl: SimpleNamespace) -> None:
    w = impl.bucket.SlidingWindow(1000, 1.0)
    t = 0.0
    for i in range(20_000):
        t += 0.0005
        w.try_acquire(t, i % 3)
    w._check()
    assert w.count(t) <= 1000


def test_window_errors(impl: SimpleNamespace) -> None:
    for args in ((0, 1.0), (1, 0.0), (1, math.inf), (1, math.nan)):
        with pytest.raises(ValueError):
            impl.bucket.SlidingWindow(*args)
    w = impl.bucket.SlidingWindow(1, 1.0)
    with pytest.raises(ValueError):
        w.try_acquire(0.0, -1)
    with pytest.raises(TypeError):
        w.try_acquire(0.0, 1.0)
    with pytest.raises(ValueError):
        w.count(math.nan)


class BucketMachine(RuleBasedStateMachine):
    """TokenBucket against exact rational arithmetic."""

    def __init__(self, mod: SimpleNamespace) -> None:
        super().__init__()
        self.mod = mod

    @initialize(
        capacity=st.sampled_from([0.5, 1, 2, 3.5, 5]),
        rate=st.sampled_from([0, 0.25, 0.5, 1, 2, 4]),
        now=TIMES,
    )
    def setup(self, capacity: float, rate: float, now: float) -> None:
        self.bucket = self.mod.TokenBucket(capacity, rate, now)
        self.cap, self.rate = Fraction(capacity), Fraction(rate)
        self.tokens, self.last = self.cap, Fraction(now)

    def advance(self, now: float) -> None:
        t = Fraction(now)
        if t > self.last:
            self.tokens = min(self.cap, self.tokens + (t - self.last) * self.rate)
            self.last = t

    @rule(now=TIMES, n=st.sampled_from([0, 0.5, 1, 2, 3, 6]))
    def try_acquire(self, now: float, n: float) -> None:
        self.advance(now)
        ok = self.tokens >= n
        if ok:
            self.tokens -= Fraction(n)
        assert self.bucket.try_acquire(now, n) is ok

    @rule(now=TIMES)
    def tokens_(self, now: float) -> None:
        self.advance(now)
        assert self.bucket.tokens(now) == self.tokens

    @rule(now=TIMES, n=st.sampled_from([0, 0.5, 1, 2, 3, 6]))
    def time_until(self, now: float, n: float) -> None:
        self.advance(now)
        if self.tokens >= n:
            expected = 0.0
        elif n > self.cap or self.rate == 0:
            expected = math.inf
        else:
            expected = float((n - self.tokens) / self.rate)
        assert self.bucket.time_until(now, n) == expected

    @invariant()
    def agrees(self) -> None:
        self.bucket._check()


class WindowMachine(RuleBasedStateMachine):
    """SlidingWindow against the full list of admitted timestamps."""

    def __init__(self, mod: SimpleNamespace) -> None:
        super().__init__()
        self.mod = mod

    @initialize(limit=st.integers(1, 5), window=st.sampled_from([0.25, 1.0, 2.5]))
    def setup(self, limit: int, window: float) -> None:
        self.win = self.mod.SlidingWindow(limit, window)
        self.limit, self.window = limit, window
        self.admitted: list[float] = []  # never pruned
        self.last = -math.inf

    def inside(self, now: float) -> list[float]:
        self.last = now = max(now, self.last)
        return [t for t in self.admitted if now - self.window < t <= now]

    @rule(now=TIMES, n=st.integers(0, 6))
    def try_acquire(self, now: float, n: int) -> None:
        ok = len(self.inside(now)) + n <= self.limit
        if ok:
            self.admitted += [self.last] * n
        assert self.win.try_acquire(now, n) is ok

    @rule(now=TIMES)
    def count(self, now: float) -> None:
        assert self.win.count(now) == len(self.inside(now))

    @rule(now=TIMES, n=st.integers(0, 6))
    def time_until(self, now: float, n: int) -> None:
        inside = self.inside(now)
        if n > self.limit:
            expected = math.inf
        elif len(inside) + n <= self.limit:
            expected = 0.0
        else:  # wait until the (len + n - limit)-th oldest unit leaves
            expected = inside[len(inside) + n - self.limit - 1] + self.window - self.last
        assert self.win.time_until(now, n) == expected

    @invariant()
    def agrees(self) -> None:
        self.win._check()


def test_bucket_matches_model(impl: SimpleNamespace) -> None:
    run_state_machine_as_test(lambda: BucketMachine(impl.bucket))


def test_window_matches_model(impl: SimpleNamespace) -> None:
    run_state_machine_as_test(lambda: WindowMachine(impl.bucket))
