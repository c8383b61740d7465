"""Reference machinery shared by the two heap twins: ``heapq`` plus a live-key dict.

Every push appends an entry ``(a, b, stamp, key)`` to a ``heapq`` list, so
the pop order is plain tuple order; stamps are unique, so the comparison
never reaches the key. ``_live`` maps each live key to ``(stamp, value)``,
and an entry is live exactly when its stamp is the one recorded for its key:
``discard`` only forgets the key, and its entry stays behind as a tombstone
until it reaches the top or a compaction drops it.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Generic, TypeVar

from ._conv import MAX_SEQ, as_float, checked_seq

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", int, float)

Entry = tuple[V, int, int, K]  # (a, b, stamp, key)


class KeyedHeap(Generic[K, V]):
    """Min-heap of unique keys by ``(a, b, push order)`` with O(1) discard.

    ``IndexedHeap`` and ``MinHeap`` build their ``push``/``pop``/``peek`` on
    ``_admit``, ``_add``, ``_has_root`` and ``_take``.
    """

    __slots__ = ("_entries", "_live", "_next_seq", "_ratio", "_stamp")

    def __init__(self, compact_ratio: float = 0.2) -> None:
        ratio = as_float(compact_ratio)
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"compact_ratio must be in [0, 1], got {ratio!r}")
        self._ratio = ratio
        self._next_seq = 0
        self._stamp = 0
        self._entries: list[Entry[V, K]] = []
        self._live: dict[K, tuple[int, V]] = {}  # key -> (stamp, value) of its live entry

    def discard(self, key: K) -> bool:
        """Forget ``key`` (its entry becomes a tombstone); return whether it was live."""
        if self._live.pop(key, None) is None:
            return False
        self._maybe_compact()
        return True

    def clear(self) -> None:
        """Remove every entry; the admission counter keeps counting."""
        self._entries.clear()
        self._live.clear()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def _admit(self, seq: int | None) -> int:
        # The seq of the next push; the counter moves only in _add.
        if seq is None:
            if self._next_seq > MAX_SEQ:
                raise OverflowError("admission counter exhausted")
            return self._next_seq
        return checked_seq(seq)

    def _add(self, key: K, a: V, b: int, seq: int, value: V) -> None:
        if key in self._live:
            raise ValueError(f"key already in heap: {key!r}")
        self._next_seq = max(self._next_seq, seq + 1)
        self._stamp += 1
        self._live[key] = (self._stamp, value)
        heapq.heappush(self._entries, (a, b, self._stamp, key))

    def _value(self, key: K) -> V:
        live = self._live.get(key)
        if live is None:
            raise KeyError(key)
        return live[1]

    def _is_live(self, entry: Entry[V, K]) -> bool:
        live = self._live.get(entry[3])
        return live is not None and live[0] == entry[2]

    def _has_root(self) -> bool:
        # Drop tombstones off the top; return whether a live entry remains.
        while self._entries and not self._is_live(self._entries[0]):
            heapq.heappop(self._entries)
        return bool(self._entries)

    def _take(self) -> Entry[V, K]:
        # Pop the live top entry (the caller checked _has_root); no compaction.
        entry = heapq.heappop(self._entries)
        del self._live[entry[3]]
        return entry

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
