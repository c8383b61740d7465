"""SkipList: the defined semantics by example, then a model-based state machine."""

from __future__ import annotations

import math
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

KEY_POOL = [0, 1, 2, 3, 4, "a", "b", (0, 1), None]
KEYS = st.sampled_from(KEY_POOL)
SCORES = st.sampled_from([-math.inf, -1.0, 0.0, -0.0, 0.5, 1.0, 3.0, math.inf])


def test_skiplist_orders_by_score_then_insertion(impl: SimpleNamespace) -> None:
    s = impl.skiplist.SkipList()
    s.insert("b", 2.0)
    s.insert("a", 1.0)
    s.insert("c", 2.0)
    s.insert("z", 0.5)
    assert list(s) == ["z", "a", "b", "c"]
    assert [s.rank(k) for k in "zabc"] == [0, 1, 2, 3]
    s.remove("b")
    s.insert("b", 2.0)  # re-inserted: last among its equals
    assert list(s) == ["z", "a", "c", "b"]
    assert s.range_by_score(1.0, 2.0) == [("a", 1.0), ("c", 2.0), ("b", 2.0)]
    assert s.range_by_score(1.0, 2.0, limit=2) == [("a", 1.0), ("c", 2.0)]
    assert s.range_by_score(3.0, 1.0) == []
    assert s.range_by_rank(1, 3) == [("a", 1.0), ("c", 2.0)]
    assert s.range_by_rank(2, 99) == [("c", 2.0), ("b", 2.0)]
    assert s.range_by_rank(3, 1) == [] and s.range_by_rank(4, 5) == []
    with pytest.raises(ValueError):
        s.range_by_rank(-1, 2)
    assert s.pop_min() == ("z", 0.5)
    assert s.peek_min() == ("a", 1.0) and len(s) == 3


def test_skiplist_never_compares_keys(impl: SimpleNamespace) -> None:
    s = impl.skiplist.SkipList()
    keys = [object() for _ in range(5)]  # unorderable
    for k in keys:
        s.insert(k, 1.0)
    assert list(s) == keys


def test_skiplist_rank_is_exact_on_a_larger_list(impl: SimpleNamespace) -> None:
    s = impl.skiplist.SkipList(max_level=4, seed=7)
    for i in range(500):
        s.insert(i, float((i * 37) % 101))
    s._check()
    order = sorted(range(500), key=lambda i: ((i * 37) % 101, i))
    assert list(s) == order
    assert all(s.rank(k) == pos for pos, k in enumerate(order))
    assert [k for k, _ in s.range_by_rank(123, 140)] == order[123:140]
    for k in order[::3]:
        assert s.remove(k)
    s._check()
    assert list(s) == [k for k in order if k not in set(order[::3])]


def test_skiplist_errors(impl: SimpleNamespace) -> None:
    sl = impl.skiplist
    s = sl.SkipList()
    for op in (s.pop_min, s.peek_min):
        with pytest.raises(IndexError):
            op()
    for op in (s.score_of, s.rank):
        with pytest.raises(KeyError):
            op("x")
    assert s.remove("x") is False
    s.insert("x", 1.0)
    with pytest.raises(ValueError):
        s.insert("x", 2.0)
    with pytest.raises(ValueError):
        s.insert("y", math.nan)
    for lo, hi, limit in ((math.nan, 1.0, None), (0.0, math.nan, None), (0.0, 1.0, -1)):
        with pytest.raises(ValueError):
            s.range_by_score(lo, hi, limit)
    for kwargs in ({"max_level": 0}, {"max_level": 33}, {"seed": 0}, {"seed": 2**32}):
        with pytest.raises(ValueError):
            sl.SkipList(**kwargs)


def test_skiplist_iter_is_a_snapshot(impl: SimpleNamespace) -> None:
    s = impl.skiplist.SkipList()
    for i in range(5):
        s.insert(i, float(i))
    seen = []
    for k in s:
        seen.append(k)
        s.remove(k)
    assert seen == [0, 1, 2, 3, 4] and len(s) == 0


class SkipListMachine(RuleBasedStateMachine):
    """SkipList (max_level 2, so promotions are constant) against a sorted list."""

    def __init__(self, mod: SimpleNamespace) -> None:
        super().__init__()
        self.mod = mod

    @initialize(max_level=st.sampled_from([1, 2, 3]), seed=st.integers(1, 2**32 - 1))
    def setup(self, max_level: int, seed: int) -> None:
        self.sl = self.mod.SkipList(max_level=max_level, seed=seed)
        self.model: list[tuple[float, int, object]] = []  # sorted (score, seq, key)
        self.seq = 0

    def find(self, key: object) -> int | None:
        return next((i for i, e in enumerate(self.model) if e[2] == key), None)

    @rule(key=KEYS, score=SCORES)
    def insert(self, key: object, score: float) -> None:
        if self.find(key) is not None:
            with pytest.raises(ValueError):
                self.sl.insert(key, score)
            return
        self.sl.insert(key, score)
        self.model.append((score, self.seq, key))
        self.model.sort(key=lambda e: e[:2])
        self.seq += 1

    @rule(key=KEYS)
    def remove(self, key: object) -> None:
        i = self.find(key)
        assert self.sl.remove(key) is (i is not None)
        if i is not None:
            del self.model[i]

    @rule(key=KEYS)
    def lookups(self, key: object) -> None:
        i = self.find(key)
        if i is None:
            with pytest.raises(KeyError):
                self.sl.rank(key)
            with pytest.raises(KeyError):
                self.sl.score_of(key)
            return
        assert self.sl.rank(key) == i
        assert self.sl.score_of(key) == self.model[i][0]

    @rule(lo=SCORES, hi=SCORES, limit=st.none() | st.integers(0, 3))
    def range_by_score(self, lo: float, hi: float, limit: int | None) -> None:
        expected = [(k, s) for s, _, k in self.model if lo <= s <= hi]
        if limit is not None:
            expected = expected[:limit]
        assert self.sl.range_by_score(lo, hi, limit) == expected

    @rule(start=st.integers(0, 10), size=st.integers(0, 4))
    def range_by_rank(self, start: int, size: int) -> None:
        expected = [(k, s) for s, _, k in self.model[start : start + size]]
        assert self.sl.range_by_rank(start, start + size) == expected

    @rule()
    def pop_min(self) -> None:
        if not self.model:
            with pytest.raises(IndexError):
                self.sl.pop_min()
            return
        score, _, key = self.model.pop(0)
        assert self.sl.pop_min() == (key, score)

    @rule()
    def peek_min(self) -> None:
        if not self.model:
            with pytest.raises(IndexError):
                self.sl.peek_min()
            return
        assert self.sl.peek_min() == (self.model[0][2], self.model[0][0])

    @invariant()
    def agrees(self) -> None:
        self.sl._check()
        assert len(self.sl) == len(self.model)
        assert list(self.sl) == [k for _, _, k in self.model]
        for key in KEY_POOL:
            assert (key in self.sl) == (self.find(key) is not None)


def test_skiplist_matches_model(impl: SimpleNamespace) -> None:
    run_state_machine_as_test(lambda: SkipListMachine(impl.skiplist))
