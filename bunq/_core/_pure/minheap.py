"""Reference MinHeap: ``heapq`` entries plus a dict of live keys."""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Generic, TypeVar, final

from ._conv import MAX_SEQ, as_float, checked_limit, checked_seq

K = TypeVar("K", bound=Hashable)

Entry = tuple[float, int, int, K]  # (run_at, seq, stamp, key); stamps are unique


@final
class MinHeap(Generic[K]):
    """Min-queue of unique hashable keys by ``(run_at, seq)``, O(1) discard.

    Pop order: ``run_at`` ascending, then ``seq`` ascending (admission order
    by default), then push order. ``len`` counts live keys only.

    Complexity: push/pop O(log n), discard O(1) amortised.

    >>> t = MinHeap()
    >>> t.push("b", 20.0); t.push("a", 10.0); t.push("c", 30.0)
    >>> t.pop_due(25.0)
    [('a', 10.0), ('b', 20.0)]
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
        self._live: dict[K, tuple[int, float]] = {}  # key -> (stamp, run_at) of its live entry

    def push(self, key: K, run_at: float, seq: int | None = None) -> None:
        """Add ``key`` due at ``run_at``; ``ValueError`` if present, NaN or bad seq."""
        at = as_float(run_at)
        if at != at:
            raise ValueError("run_at must not be NaN")
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
        self._live[key] = (self._stamp, at)
        heapq.heappush(self._entries, (at, s, self._stamp, key))

    def pop(self) -> tuple[K, float]:
        """Remove and return the earliest ``(key, run_at)``; ``IndexError`` if empty."""
        self._drop_stale_top()
        if not self._entries:
            raise IndexError("pop from an empty MinHeap")
        item = self._take()
        self._maybe_compact()
        return item

    def peek(self) -> tuple[K, float]:
        """Return the earliest ``(key, run_at)``; ``IndexError`` if empty."""
        self._drop_stale_top()
        if not self._entries:
            raise IndexError("peek into an empty MinHeap")
        return (self._entries[0][3], self._entries[0][0])

    def pop_due(self, now: float, limit: int | None = None) -> list[tuple[K, float]]:
        """Pop up to ``limit`` entries with ``run_at <= now``, earliest first."""
        now = as_float(now)
        lim = checked_limit(limit)
        out: list[tuple[K, float]] = []
        while len(out) != lim:
            self._drop_stale_top()
            if not self._entries or not self._entries[0][0] <= now:
                break
            out.append(self._take())
        self._maybe_compact()
        return out

    def discard(self, key: K) -> bool:
        """Forget ``key`` (its entry becomes a tombstone); return whether it was live."""
        if self._live.pop(key, None) is None:
            return False
        self._maybe_compact()
        return True

    def run_at_of(self, key: K) -> float:
        """Return the ``run_at`` of ``key``; ``KeyError`` if absent."""
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

    def _take(self) -> tuple[K, float]:
        at, _, _, key = heapq.heappop(self._entries)
        del self._live[key]
        return (key, at)

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
