"""The model-based state machine that both indexed heaps share.

``IndexedHeap`` and ``MinHeap`` differ only in their order and in what a pop
returns; the rest of the contract is one: unique keys (``ValueError`` on a
live key), ``IndexError`` on an empty pop or peek, ``KeyError`` from the
value accessor, O(1) ``discard``, ``len`` and ``in`` over live keys only,
``clear`` keeping the admission counter. :class:`KeyedHeapMachine` checks
that contract against a dict ``key -> sort key``, where the smallest sort key
must pop first; a subclass adds the push rule that builds sort keys and says
what the heap returns for a key.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

KEY_POOL = [0, 1, 2, 3, "a", "b", (0, 1), None]
KEYS = st.sampled_from(KEY_POOL)


class KeyedHeapMachine(RuleBasedStateMachine):
    """A keyed heap against ``model: key -> sort key`` (smallest pops first)."""

    heap_class = ""  # class name in the module under test
    value_of = ""  # name of the accessor: priority_of / run_at_of

    def __init__(self, mod: SimpleNamespace) -> None:
        super().__init__()
        self.mod = mod

    @initialize(ratio=st.sampled_from([0.0, 0.01, 0.3, 1.0]))
    def setup(self, ratio: float) -> None:
        self.heap = getattr(self.mod, self.heap_class)(compact_ratio=ratio)
        self.model: dict[object, tuple[Any, ...]] = {}
        self.next_seq = 0
        self.pushes = 0

    def returned(self, key: object) -> object:
        """What pop() and peek() return when ``key`` is first."""
        raise NotImplementedError

    def value(self, key: object) -> object:
        """What the value accessor returns for live ``key``."""
        raise NotImplementedError

    def admit(self, key: object, seq: int | None, push: Callable[[], None]) -> int | None:
        """Call ``push``; return the seq it used, or None after checking the duplicate error."""
        if key in self.model:
            with pytest.raises(ValueError):
                push()
            return None
        push()
        if seq is None:
            seq = self.next_seq
        self.next_seq = max(self.next_seq, seq + 1)
        self.pushes += 1
        return seq

    def first(self) -> object:
        return min(self.model, key=self.model.__getitem__)

    @rule()
    def pop(self) -> None:
        if not self.model:
            with pytest.raises(IndexError):
                self.heap.pop()
            return
        key = self.first()
        assert self.heap.pop() == self.returned(key)
        del self.model[key]

    @rule()
    def peek(self) -> None:
        if not self.model:
            with pytest.raises(IndexError):
                self.heap.peek()
            return
        assert self.heap.peek() == self.returned(self.first())

    @rule(key=KEYS)
    def discard(self, key: object) -> None:
        assert self.heap.discard(key) is (self.model.pop(key, None) is not None)

    @rule(key=KEYS)
    def value_of_key(self, key: object) -> None:
        accessor = getattr(self.heap, self.value_of)
        if key not in self.model:
            with pytest.raises(KeyError):
                accessor(key)
            return
        assert accessor(key) == self.value(key)

    @rule(data=st.data())
    def clear(self, data: st.DataObject) -> None:
        if data.draw(st.integers(0, 9)) == 0:  # rarely, so the heap has time to grow
            self.heap.clear()
            self.model.clear()

    @invariant()
    def agrees(self) -> None:
        self.heap._check()
        assert len(self.heap) == len(self.model)
        for key in KEY_POOL:
            assert (key in self.heap) == (key in self.model)
