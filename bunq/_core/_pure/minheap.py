"""Reference MinHeap: entries ``(run_at, seq, stamp, key)`` in a ``heapq``."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar, final

from ._conv import as_float, checked_limit
from ._heap import KeyedHeap

K = TypeVar("K", bound=Hashable)


@final
class MinHeap(KeyedHeap[K, float]):
    """Min-queue of unique hashable keys by ``(run_at, seq)``, O(1) discard.

    Pop order: ``run_at`` ascending, then ``seq`` ascending (admission order
    by default), then push order. ``len`` counts live keys only.

    Complexity: push/pop O(log n), discard O(1) amortised.

    >>> t = MinHeap()
    >>> t.push("b", 20.0); t.push("a", 10.0); t.push("c", 30.0)
    >>> t.pop_due(25.0)
    [('a', 10.0), ('b', 20.0)]
    """

    __slots__ = ()

    def push(self, key: K, run_at: float, seq: int | None = None) -> None:
        """Add ``key`` due at ``run_at``; ``ValueError`` if present, NaN or bad seq."""
        at = as_float(run_at)
        if at != at:
            raise ValueError("run_at must not be NaN")
        s = self._admit(seq)
        self._add(key, at, s, s, at)

    def pop(self) -> tuple[K, float]:
        """Remove and return the earliest ``(key, run_at)``; ``IndexError`` if empty."""
        if not self._has_root():
            raise IndexError("pop from an empty MinHeap")
        at, _, _, key = self._take()
        self._maybe_compact()
        return (key, at)

    def peek(self) -> tuple[K, float]:
        """Return the earliest ``(key, run_at)``; ``IndexError`` if empty."""
        if not self._has_root():
            raise IndexError("peek into an empty MinHeap")
        return (self._entries[0][3], self._entries[0][0])

    def pop_due(self, now: float, limit: int | None = None) -> list[tuple[K, float]]:
        """Pop up to ``limit`` entries with ``run_at <= now``, earliest first."""
        now = as_float(now)
        lim = checked_limit(limit)
        out: list[tuple[K, float]] = []
        while len(out) != lim and self._has_root() and self._entries[0][0] <= now:
            at, _, _, key = self._take()
            out.append((key, at))
        self._maybe_compact()
        return out

    def run_at_of(self, key: K) -> float:
        """Return the ``run_at`` of ``key``; ``KeyError`` if absent."""
        return self._value(key)
