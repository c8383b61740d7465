"""Reference IndexedHeap: ``heapq`` entries plus a dict of live keys."""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Generic, TypeVar, final

from ._conv import MAX_SEQ, as_float, as_int64, checked_seq

K = TypeVar("K", bound=Hashable)

Entry = tuple[int, int, int, K]  # (-priority, order, stamp, key); stamps are unique


@final
class IndexedHeap(Generic[K]):
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

    __slots__ = ("_entries", "_live", "_next_seq", "_ratio", "_stamp")

    def __init__(self, compact_ratio: float = 0.2) -> None:
        ratio = as_float(compact_ratio)
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"compact_ratio must be in [0, 1], got {ratio!r}")
        self._ratio = ratio
        self._next_seq = 0
        self._stamp = 0
        self._entries: list[Entry[K]] = []
        self._live: dict[K, tuple[int, int]] = {}  # key -> (stamp, priority) of its live entry

    def push(self, key: K, priority: int, lifo: bool = False, seq: int | None = None) -> None:
        """Add ``key``; ``ValueError`` if live or ``seq`` out of range. O(log n)."""
        prio = as_int64(priority)
        if seq is None:
            if self._next_seq > MAX_SEQ:
                raise OverflowError("admission counter exhausted")
            s = self._next_seq
        else:
            s = checked_seq(seq)
        if key in self._live:
            raise ValueError(f"key already in heap: {key!r}")
        self._next_seq = max(self._next_seq, s + 1)
        self._stamp += 1
        self._live[key] = (self._stamp, prio)
        heapq.heappush(self._entries, (-prio, -1 - s if lifo else s, self._stamp, key))

    def pop(self) -> K:
        """Remove and return the first key; ``IndexError`` if empty. O(log n)."""
        self._drop_stale_top()
        if not self._entries:
            raise IndexError("pop from an empty IndexedHeap")
        key = heapq.heappop(self._entries)[3]
        del self._live[key]
        self._maybe_compact()
        return key

    def peek(self) -> K:
        """Return the first key; ``IndexError`` if empty. O(1) amortised."""
        self._drop_stale_top()
        if not self._entries:
            raise IndexError("peek into an empty IndexedHeap")
        return self._entries[0][3]

    def discard(self, key: K) -> bool:
        """Forget ``key`` (its entry becomes a tombstone); return whether it was live."""
        if self._live.pop(key, None) is None:
            return False
        self._maybe_compact()
        return True

    def priority_of(self, key: K) -> int:
        """Return the priority of ``key``; ``KeyError`` if absent. O(1)."""
        live = self._live.get(key)
        if live is None:
            raise KeyError(key)
        return live[1]

    def clear(self) -> None:
        """Remove every entry; the admission counter keeps counting."""
        self._entries.clear()
        self._live.clear()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def _is_live(self, entry: Entry[K]) -> bool:
        live = self._live.get(entry[3])
        return live is not None and live[0] == entry[2]

    def _drop_stale_top(self) -> None:
        while self._entries and not self._is_live(self._entries[0]):
            heapq.heappop(self._entries)

    def _maybe_compact(self) -> None:
        if len(self._entries) - len(self._live) > self._ratio * len(self._entries):
            self._entries = [e for e in self._entries if self._is_live(e)]
            heapq.heapify(self._entries)

    def _check(self) -> None:
        """Verify the invariants; ``AssertionError`` on a violation. O(n)."""
        es = self._entries
        for i in range(1, len(es)):
            if es[i] < es[(i - 1) // 2]:
                raise AssertionError(f"heap order violated at {i}")
        live = [e[3] for e in es if self._is_live(e)]
        if len(live) != len(self._live) or set(live) != self._live.keys():
            raise AssertionError("live entries disagree with the live map")
        if len(es) - len(live) > self._ratio * len(es):
            raise AssertionError("compaction overdue")
