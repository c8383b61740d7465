"""MinHeap: the defined semantics by example, then a model-based state machine."""

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

KEY_POOL = [0, 1, 2, 3, "a", "b", (0, 1), None]
KEYS = st.sampled_from(KEY_POOL)
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


class MinHeapMachine(RuleBasedStateMachine):
    """MinHeap against a dict sorted by (run_at, seq, push order)."""

    def __init__(self, mod: SimpleNamespace) -> None:
        super().__init__()
        self.mod = mod

    @initialize(ratio=st.sampled_from([0.0, 0.01, 0.3, 1.0]))
    def setup(self, ratio: float) -> None:
        self.heap = self.mod.MinHeap(ratio)
        self.model: dict[object, tuple[float, int, int]] = {}
        self.next_seq = 0
        self.pushes = 0

    def ordered(self) -> list[object]:
        return sorted(self.model, key=self.model.__getitem__)

    @rule(key=KEYS, run_at=TIMES, seq=st.none() | st.integers(0, 30))
    def push(self, key: object, run_at: float, seq: int | None) -> None:
        if key in self.model:
            with pytest.raises(ValueError):
                self.heap.push(key, run_at, seq)
            return
        self.heap.push(key, run_at, seq=seq)
        if seq is None:
            seq = self.next_seq
        self.next_seq = max(self.next_seq, seq + 1)
        self.pushes += 1
        self.model[key] = (run_at, seq, self.pushes)

    @rule()
    def pop(self) -> None:
        if not self.model:
            with pytest.raises(IndexError):
                self.heap.pop()
            return
        key = self.ordered()[0]
        assert self.heap.pop() == (key, self.model.pop(key)[0])

    @rule()
    def peek(self) -> None:
        if not self.model:
            with pytest.raises(IndexError):
                self.heap.peek()
            return
        key = self.ordered()[0]
        assert self.heap.peek() == (key, self.model[key][0])

    @rule(now=TIMES, limit=st.none() | st.integers(0, 3))
    def pop_due(self, now: float, limit: int | None) -> None:
        due = [k for k in self.ordered() if self.model[k][0] <= now]
        if limit is not None:
            due = due[:limit]
        assert self.heap.pop_due(now, limit) == [(k, self.model[k][0]) for k in due]
        for k in due:
            del self.model[k]

    @rule(key=KEYS)
    def discard(self, key: object) -> None:
        assert self.heap.discard(key) is (self.model.pop(key, None) is not None)

    @rule(key=KEYS)
    def run_at_of(self, key: object) -> None:
        if key not in self.model:
            with pytest.raises(KeyError):
                self.heap.run_at_of(key)
            return
        assert self.heap.run_at_of(key) == self.model[key][0]

    @invariant()
    def agrees(self) -> None:
        self.heap._check()
        assert len(self.heap) == len(self.model)
        for key in KEY_POOL:
            assert (key in self.heap) == (key in self.model)


def test_minheap_matches_model(impl: SimpleNamespace) -> None:
    run_state_machine_as_test(lambda: MinHeapMachine(impl.minheap))
