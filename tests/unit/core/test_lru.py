"""LRUCache and BoundedSet: semantics by example, then model-based state machines."""

from __future__ import annotations

import math
from collections import OrderedDict
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

KEY_POOL = [0, 1, 2, 3, 4, 5, "a", (0, 1), None]
KEYS = st.sampled_from(KEY_POOL)
VALUES = st.sampled_from([None, 0, 1, "v", (1, 2)])


def test_lru_evicts_least_recently_used(impl: SimpleNamespace) -> None:
    c = impl.lru.LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # a is now newest
    c.put("c", 3)  # evicts b
    assert c.keys() == ["a", "c"] and "b" not in c
    assert c.evictions == 1
    assert c.peek("a") == 1 and c.keys() == ["a", "c"]  # peek does not refresh
    c.put("a", 10)  # update refreshes
    assert c.keys() == ["c", "a"] and c.get("a") == 10
    assert c.pop("c") == 3 and c.pop("c", "gone") == "gone"
    assert c.get("zz", "dflt") == "dflt" and c.peek("zz") is None
    assert c.evictions == 1  # pop does not count
    c.clear()
    assert len(c) == 0 and c.evictions == 1  # clear neither counts nor resets


def test_lru_maxsize_one_and_errors(impl: SimpleNamespace) -> None:
    c = impl.lru.LRUCache(1)
    for i in range(5):
        c.put(i, i)
    assert c.keys() == [4] and c.evictions == 4
    c._check()
    for bad in (0, -3):
        with pytest.raises(ValueError):
            impl.lru.LRUCache(bad)
    with pytest.raises(TypeError):
        impl.lru.LRUCache(2.5)
    with pytest.raises(TypeError):
        c.get([1])
    with pytest.raises(AttributeError):
        c.evictions = 0  # read-only


def test_boundedset_evicts_oldest_batch(impl: SimpleNamespace) -> None:
    s = impl.lru.BoundedSet(10, evict_fraction=0.3)
    for i in range(10):
        s.add(i)
    s.add(0)  # present: no refresh, no eviction
    assert len(s) == 10 and s.evictions == 0
    s.add(10)  # 11 > 10: evict the oldest int(10 * 0.3) = 3
    assert [i for i in range(11) if i in s] == list(range(3, 11))
    assert s.evictions == 3
    assert s.discard(5) and not s.discard(5)
    s._check()


def test_boundedset_batch_is_at_least_one(impl: SimpleNamespace) -> None:
    s = impl.lru.BoundedSet(3, evict_fraction=0.0)
    for i in range(5):
        s.add(i)
    assert [i for i in range(5) if i in s] == [2, 3, 4] and s.evictions == 2
    for kwargs in ({"maxsize": 0}, {"maxsize": 2, "evict_fraction": -0.1}):
        with pytest.raises(ValueError):
            impl.lru.BoundedSet(**kwargs)
    with pytest.raises(ValueError):
        impl.lru.BoundedSet(2, math.nan)


class LRUMachine(RuleBasedStateMachine):
    """LRUCache against an OrderedDict kept oldest-first."""

    def __init__(self, mod: SimpleNamespace) -> None:
        super().__init__()
        self.mod = mod

    @initialize(maxsize=st.integers(1, 5))
    def setup(self, maxsize: int) -> None:
        self.cache = self.mod.LRUCache(maxsize)
        self.maxsize = maxsize
        self.model: OrderedDict[object, object] = OrderedDict()
        self.evictions = 0

    @rule(key=KEYS, value=VALUES)
    def put(self, key: object, value: object) -> None:
        self.cache.put(key, value)
        self.model[key] = value
        self.model.move_to_end(key)
        if len(self.model) > self.maxsize:
            self.model.popitem(last=False)
            self.evictions += 1

    @rule(key=KEYS)
    def get(self, key: object) -> None:
        marker = object()
        expected = self.model.get(key, marker)
        if key in self.model:
            self.model.move_to_end(key)
        assert self.cache.get(key, marker) is expected

    @rule(key=KEYS)
    def peek(self, key: object) -> None:
        assert self.cache.peek(key) == self.model.get(key)

    @rule(key=KEYS)
    def pop(self, key: object) -> None:
        assert self.cache.pop(key, "missing") == self.model.pop(key, "missing")

    @rule(data=st.data())
    def clear(self, data: st.DataObject) -> None:
        if data.draw(st.integers(0, 9)) == 0:
            self.cache.clear()
            self.model.clear()

    @invariant()
    def agrees(self) -> None:
        self.cache._check()
        assert self.cache.keys() == list(self.model)
        assert len(self.cache) == len(self.model)
        assert self.cache.evictions == self.evictions
        for key in KEY_POOL:
            assert (key in self.cache) == (key in self.model)


class BoundedSetMachine(RuleBasedStateMachine):
    """BoundedSet against a plain list kept oldest-first."""

    def __init__(self, mod: SimpleNamespace) -> None:
        super().__init__()
        self.mod = mod

    @initialize(maxsize=st.integers(1, 5), fraction=st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    def setup(self, maxsize: int, fraction: float) -> None:
        self.set = self.mod.BoundedSet(maxsize, evict_fraction=fraction)
        self.maxsize = maxsize
        self.batch = max(1, int(maxsize * fraction))
        self.model: list[object] = []
        self.evictions = 0

    @rule(key=KEYS)
    def add(self, key: object) -> None:
        self.set.add(key)
        if key in self.model:
            return
        self.model.append(key)
        if len(self.model) > self.maxsize:
            del self.model[: self.batch]
            self.evictions += self.batch

    @rule(key=KEYS)
    def discard(self, key: object) -> None:
        present = key in self.model
        if present:
            self.model.remove(key)
        assert self.set.discard(key) is present

    @invariant()
    def agrees(self) -> None:
        self.set._check()
        assert len(self.set) == len(self.model)
        assert self.set.evictions == self.evictions
        for key in KEY_POOL:
            assert (key in self.set) == (key in self.model)


def test_lru_matches_model(impl: SimpleNamespace) -> None:
    run_state_machine_as_test(lambda: LRUMachine(impl.lru))


def test_boundedset_matches_model(impl: SimpleNamespace) -> None:
    run_state_machine_as_test(lambda: BoundedSetMachine(impl.lru))
