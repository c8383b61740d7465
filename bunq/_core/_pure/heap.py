"""Reference IndexedHeap: entries ``(-priority, order, stamp, key)`` in a ``heapq``."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar, final

from ._conv import as_int64
from ._heap import KeyedHeap

K = TypeVar("K", bound=Hashable)


@final
class IndexedHeap(KeyedHeap[K, int]):
    """Max-priority queue of unique hashable keys with O(1) discard.

    Pop order: higher ``priority`` first; at equal priority LIFO entries come
    before FIFO entries; LIFO entries pop newest first (seq descending), FIFO
    entries oldest first (seq ascending); entries equal in all of these (only
    possible with an explicit ``seq``) pop in push order. ``len`` counts live
    keys only.

    Complexity: push/pop O(log n), discard O(1) amortised.

    >>> h = IndexedHeap()
    >>> h.push("a", 1); h.push("b", 5); h.push("c", 5, lifo=True)
    >>> [h.pop() for _ in range(len(h))]
    ['c', 'b', 'a']
    """

    __slots__ = ()

    def push(self, key: K, priority: int, lifo: bool = False, seq: int | None = None) -> None:
        """Add ``key``; ``ValueError`` if live or ``seq`` out of range. O(log n)."""
        prio = as_int64(priority)
        s = self._admit(seq)
        # order: LIFO entries (all negative) first, newest first; then FIFO, oldest first.
        self._add(key, -prio, -1 - s if lifo else s, s, prio)

    def pop(self) -> K:
        """Remove and return the first key; ``IndexError`` if empty. O(log n)."""
        if not self._has_root():
            raise IndexError("pop from an empty IndexedHeap")
        key = self._take()[3]
        self._maybe_compact()
        return key

    def peek(self) -> K:
        """Return the first key; ``IndexError`` if empty. O(1) amortised."""
        if not self._has_root():
            raise IndexError("peek into an empty IndexedHeap")
        return self._entries[0][3]

    def priority_of(self, key: K) -> int:
        """Return the priority of ``key``; ``KeyError`` if absent. O(1)."""
        return self._value(key)
