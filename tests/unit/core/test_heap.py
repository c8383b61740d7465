"""IndexedHeap: the defined semantics by example, then a model-based state machine."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test
from unit.core.heapmachine import KEYS, KeyedHeapMachine


def drain(h: object) -> list[object]:
    return [h.pop() for _ in range(len(h))]  # type: ignore[attr-defined]


def test_heap_pop_breaks_ties_fifo(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap()
    for k in "abcd":
        h.push(k, 1)
    assert drain(h) == list("abcd")


def test_heap_lifo_pops_newest_first(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap()
    for k in "abcd":
        h.push(k, 1, lifo=True)
    assert drain(h) == list("dcba")


def test_heap_lifo_before_fifo_at_equal_priority(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap()
    h.push("f1", 1)
    h.push("l1", 1, lifo=True)
    h.push("f2", 1)
    h.push("l2", 1, lifo=True)
    h.push("hi", 2)
    h.push("lo", -5, lifo=True)
    assert drain(h) == ["hi", "l2", "l1", "f1", "f2", "lo"]


def test_heap_discard_then_repush(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap(compact_ratio=1.0)  # never compact: keep the stale slot
    h.push("a", 9)
    h.push("b", 5)
    assert h.discard("a") is True
    assert h.discard("a") is False
    h.push("a", 1)
    assert len(h) == 2 and h.priority_of("a") == 1
    h._check()
    assert drain(h) == ["b", "a"]  # the stale priority-9 slot never comes back
    with pytest.raises(IndexError):
        h.pop()


def test_heap_stale_slot_never_returns_after_key_index_reuse(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap(compact_ratio=1.0)
    h.push("x", 100)
    h.discard("x")
    h.push("y", 1)  # reuses x's freed key index
    h.push("x", 0)
    assert h.peek() == "y"
    assert drain(h) == ["y", "x"]


def test_heap_seq_restores_admission_order(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap()
    h.push("c", 1, seq=7)
    h.push("a", 1, seq=3)
    h.push("b", 1, seq=5)
    h.push("d", 1)  # the counter moved to 8
    h.push("z", 1, lifo=True, seq=2)
    h.push("y", 1, lifo=True)  # seq 9: newest LIFO
    assert drain(h) == ["y", "z", "a", "b", "c", "d"]


def test_heap_equal_explicit_seq_breaks_ties_by_push_order(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap()
    for k in "pqr":
        h.push(k, 0, seq=4)
    assert drain(h) == ["p", "q", "r"]


def test_heap_clear_keeps_admission_counter(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap()
    h.push("x", 1, seq=10)
    h.clear()
    assert len(h) == 0 and "x" not in h
    h.push("a", 1)  # seq 11
    h.push("b", 1, seq=10)
    assert drain(h) == ["b", "a"]


def test_heap_len_counts_live_entries_only(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap(compact_ratio=1.0)
    for i in range(10):
        h.push(i, i)
    for i in range(0, 10, 2):
        h.discard(i)
    assert len(h) == 5
    assert [k for k in range(10) if k in h] == [1, 3, 5, 7, 9]
    h._check()


def test_heap_compaction_runs_when_ratio_exceeded(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap(compact_ratio=0.0)
    for i in range(200):
        h.push(i, i % 7)
    for i in range(199):
        h.discard(i)
        h._check()  # includes "stale slots <= ratio * slots"
    assert drain(h) == [199]


def test_heap_extreme_priorities_keep_their_order(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap()
    prios = [0, 2**63 - 1, -(2**63), -1, 2**62, -(2**63) + 1, 1]
    for i, p in enumerate(prios):
        h.push(i, p)
    assert h.priority_of(2) == -(2**63) and h.priority_of(1) == 2**63 - 1
    assert [prios[k] for k in drain(h)] == sorted(prios, reverse=True)


def test_heap_errors(impl: SimpleNamespace) -> None:
    h = impl.heap.IndexedHeap()
    with pytest.raises(IndexError):
        h.pop()
    with pytest.raises(IndexError):
        h.peek()
    with pytest.raises(KeyError):
        h.priority_of("nope")
    h.push("a", 1)
    with pytest.raises(ValueError):
        h.push("a", 2)
    for bad_seq in (-1, 2**63 - 1):
        with pytest.raises(ValueError):
            h.push("b", 1, seq=bad_seq)
    with pytest.raises(OverflowError):
        h.push("b", 2**63)
    with pytest.raises(TypeError):
        h.push("b", 1.5)
    with pytest.raises(TypeError):
        h.push(["unhashable"], 1)
    assert len(h) == 1 and "b" not in h
    h._check()  # failed pushes leave no trace
    h.push("b", -(2**63), seq=2**63 - 2)
    with pytest.raises(OverflowError):
        h.push("c", 0)  # admission counter exhausted
    for ratio in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError):
            impl.heap.IndexedHeap(ratio)


def test_heap_is_subscriptable_for_annotations(impl: SimpleNamespace) -> None:
    assert impl.heap.IndexedHeap[str] is not None


class HeapMachine(KeyedHeapMachine):
    """IndexedHeap against a dict sorted by the documented order."""

    heap_class = "IndexedHeap"
    value_of = "priority_of"

    @rule(
        key=KEYS,
        priority=st.integers(-2, 2),
        lifo=st.booleans(),
        seq=st.none() | st.integers(0, 30),
    )
    def push(self, key: object, priority: int, lifo: bool, seq: int | None) -> None:
        s = self.admit(key, seq, lambda: self.heap.push(key, priority, lifo=lifo, seq=seq))
        if s is not None:
            # Documented order: priority desc; LIFO before FIFO; LIFO seq
            # desc, FIFO seq asc; then push order.
            self.model[key] = (-priority, 0 if lifo else 1, -s if lifo else s, self.pushes)

    def returned(self, key: object) -> object:
        return key

    def value(self, key: object) -> object:
        return -self.model[key][0]


def test_heap_matches_model(impl: SimpleNamespace) -> None:
    run_state_machine_as_test(lambda: HeapMachine(impl.heap))
