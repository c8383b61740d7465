"""MinHeap: the defined semantics by example, then a model-based state machine."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test
from unit.core.heapmachine import KEYS, KeyedHeapMachine

TIMES = st.sampled_from([-1.0, 0.0, -0.0, 1.0, 2.5, 7.0, math.inf])


def test_minheap_pops_earliest_then_admission_order(impl: SimpleNamespace) -> None:
    t = impl.minheap.MinHeap()
    t.push("late", 5.0)
    t.push("a", 1.0)
    t.push("b", 1.0)
    t.push("early", -3.0)
    assert [t.pop()[0] for _ in range(4)] == ["early", "a", "b", "late"]


def test_minheap_pop_due_respects_now_and_limit(impl: SimpleNamespace) -> None:
    t = impl.minheap.MinHeap()
    for i in range(6):
        t.push(i, float(i))
    assert t.pop_due(2.0, limit=2) == [(0, 0.0), (1, 1.0)]
    assert t.pop_due(2.0, limit=0) == []
    assert t.pop_due(3.5) == [(2, 2.0), (3, 3.0)]
    assert t.pop_due(-10.0) == []
    assert t.peek() == (4, 4.0) and len(t) == 2
    with pytest.raises(ValueError):
        t.pop_due(9.0, limit=-1)


def test_minheap_seq_restores_order_within_equal_run_at(impl: SimpleNamespace) -> None:
    t = impl.minheap.MinHeap()
    t.push("c", 1.0, seq=9)
    t.push("a", 1.0, seq=2)
    t.push("d", 1.0)  # seq 10
    assert [t.pop()[0] for _ in range(3)] == ["a", "c", "d"]


def test_minheap_discard_then_repush(impl: SimpleNamespace) -> None:
    t = impl.minheap.MinHeap(compact_ratio=1.0)
    t.push("a", 1.0)
    t.push("b", 2.0)
    assert t.discard("a") and not t.discard("a")
    t.push("a", 3.0)
    assert t.run_at_of("a") == 3.0
    t._check()
    assert t.pop_due(10.0) == [("b", 2.0), ("a", 3.0)]


def test_minheap_run_at_order_and_value_are_exact(impl: SimpleNamespace) -> None:
    # The compiled heap orders run_at as an int64 image of the double: check
    # the edges of that map, and that -0.0 == 0.0 ties on seq and keeps its sign.
    t = impl.minheap.MinHeap()
    times = [math.inf, 1e-320, -1e-320, 5e-324, -math.inf, 2.0**60 + 1, -2.5, 1.0, -1.0]
    for i, at in enumerate(times):
        t.push(i, at)
    t.push("neg0", -0.0)
    t.push("pos0", 0.0)
    t.push("neg0b", -0.0)
    assert repr(t.run_at_of("neg0")) == "-0.0"
    popped = [t.pop() for _ in range(len(t))]
    assert [at for _, at in popped] == sorted(times + [0.0] * 3)
    zeros = [(k, repr(at)) for k, at in popped if at == 0.0]
    assert zeros == [("neg0", "-0.0"), ("pos0", "0.0"), ("neg0b", "-0.0")]
    t.push("z", -0.0)
    assert repr(t.peek()[1]) == "-0.0" and repr(t.pop_due(0.0)[0][1]) == "-0.0"


def test_minheap_errors(impl: SimpleNamespace) -> None:
    t = impl.minheap.MinHeap()
    for op in (t.pop, t.peek):
        with pytest.raises(IndexError):
            op()
    with pytest.raises(KeyError):
        t.run_at_of("x")
    with pytest.raises(ValueError):
        t.push("x", math.nan)
    with pytest.raises(TypeError):
        t.push("x", "1.0")
    t.push("x", 1)
    with pytest.raises(ValueError):
        t.push("x", 2.0)
    with pytest.raises(ValueError):
        t.push("y", 2.0, seq=-1)
    with pytest.raises(TypeError):
        t.push({}, 2.0)
    t._check()  # failed pushes leave no trace
    assert t.run_at_of("x") == 1.0 and isinstance(t.run_at_of("x"), float)
    for ratio in (-1, 2, math.nan):
        with pytest.raises(ValueError):
            impl.minheap.MinHeap(ratio)


class MinHeapMachine(KeyedHeapMachine):
    """MinHeap against a dict sorted by (run_at, seq, push order)."""

    heap_class = "MinHeap"
    value_of = "run_at_of"

    @rule(key=KEYS, run_at=TIMES, seq=st.none() | st.integers(0, 30))
    def push(self, key: object, run_at: float, seq: int | None) -> None:
        s = self.admit(key, seq, lambda: self.heap.push(key, run_at, seq=seq))
        if s is not None:
            self.model[key] = (run_at, s, self.pushes)

    @rule(now=TIMES, limit=st.none() | st.integers(0, 3))
    def pop_due(self, now: float, limit: int | None) -> None:
        due = [k for k in sorted(self.model, key=self.model.__getitem__) if self.value(k) <= now]
        if limit is not None:
            due = due[:limit]
        assert self.heap.pop_due(now, limit) == [self.returned(k) for k in due]
        for k in due:
            del self.model[k]

    def returned(self, key: object) -> object:
        return (key, self.model[key][0])

    def value(self, key: object) -> float:
        return float(self.model[key][0])


def test_minheap_matches_model(impl: SimpleNamespace) -> None:
    run_state_machine_as_test(lambda: MinHeapMachine(impl.minheap))
