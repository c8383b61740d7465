"""Reference SkipList: a sorted list of ``(score, seq, key)`` kept with ``bisect``.

It has no levels at all; ``max_level`` and ``seed`` are validated and
otherwise ignored, since node heights are invisible through the API.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar, final

from ._conv import as_float, checked_limit

K = TypeVar("K", bound=Hashable)


def _score(item: tuple[float, int, object]) -> float:
    return item[0]


@final
class SkipList(Generic[K]):
    """Ordered index of unique hashable keys by ``(score, insertion order)``.

    Keys with equal scores stay in insertion order (a removed and re-inserted
    key goes last among its equals); keys themselves are never compared
    (seqs are unique). ``len`` counts keys.

    >>> s = SkipList()
    >>> s.insert("b", 2.0); s.insert("a", 1.0); s.insert("c", 2.0)
    >>> list(s), s.rank("c"), s.range_by_score(1.5, 9.0)
    (['a', 'b', 'c'], 2, [('b', 2.0), ('c', 2.0)])
    """

    __slots__ = ("_index", "_items", "_seq")

    def __init__(self, max_level: int = 16, seed: int = 0x2545F491) -> None:
        level, s = operator.index(max_level), operator.index(seed)
        if not 1 <= level <= 32:
            raise ValueError(f"max_level must be in [1, 32], got {level!r}")
        if not 1 <= s < 2**32:
            raise ValueError(f"seed must be in range(1, 2**32), got {s!r}")
        self._items: list[tuple[float, int, K]] = []  # sorted; seq unique
        self._index: dict[K, tuple[float, int]] = {}
        self._seq = 0

    def insert(self, key: K, score: float) -> None:
        """Add ``key``; ``ValueError`` if present or ``score`` is NaN."""
        sc = as_float(score)
        if sc != sc:
            raise ValueError("score must not be NaN")
        if key in self._index:
            raise ValueError(f"key already in skip list: {key!r}")
        self._index[key] = (sc, self._seq)
        bisect.insort(self._items, (sc, self._seq, key))
        self._seq += 1

    def remove(self, key: K) -> bool:
        """Remove ``key``; return whether it was present."""
        pos = self._index.pop(key, None)
        if pos is None:
            return False
        del self._items[bisect.bisect_left(self._items, pos)]
        return True

    def score_of(self, key: K) -> float:
        """Return the score of ``key``; ``KeyError`` if absent."""
        pos = self._index.get(key)
        if pos is None:
            raise KeyError(key)
        return pos[0]

    def rank(self, key: K) -> int:
        """Return the 0-based position of ``key``; ``KeyError`` if absent."""
        pos = self._index.get(key)
        if pos is None:
            raise KeyError(key)
        return bisect.bisect_left(self._items, pos)

    def range_by_score(
        self, lo: float, hi: float, limit: int | None = None
    ) -> list[tuple[K, float]]:
        """Return ``(key, score)`` with ``lo <= score <= hi`` ascending, at most ``limit``."""
        lo, hi = as_float(lo), as_float(hi)
        if lo != lo or hi != hi:
            raise ValueError("bounds must not be NaN")
        lim = checked_limit(limit)
        out: list[tuple[K, float]] = []
        for sc, _, key in self._items[bisect.bisect_left(self._items, lo, key=_score) :]:
            if sc > hi or len(out) == lim:
                break
            out.append((key, sc))
        return out

    def range_by_rank(self, start: int, stop: int) -> list[tuple[K, float]]:
        """Return ``(key, score)`` of 0-based ranks ``start <= rank < stop``, ascending."""
        lo, hi = operator.index(start), operator.index(stop)
        if lo < 0 or hi < 0:
            raise ValueError(f"ranks must be >= 0, got {start!r}, {stop!r}")
        return [(key, sc) for sc, _, key in self._items[lo:hi]]

    def pop_min(self) -> tuple[K, float]:
        """Remove and return the first ``(key, score)``; ``IndexError`` if empty."""
        if not self._items:
            raise IndexError("pop from an empty SkipList")
        sc, _, key = self._items.pop(0)
        del self._index[key]
        return (key, sc)

    def peek_min(self) -> tuple[K, float]:
        """Return the first ``(key, score)``; ``IndexError`` if empty."""
        if not self._items:
            raise IndexError("peek into an empty SkipList")
        return (self._items[0][2], self._items[0][0])

    def clear(self) -> None:
        """Remove every key."""
        self._items.clear()
        self._index.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[K]:
        """Iterate over a snapshot of the keys in ascending order."""
        return iter([key for _, _, key in self._items])

    def _check(self) -> None:
        """Verify the invariants; ``AssertionError`` on a violation."""
        for a, b in zip(self._items, self._items[1:], strict=False):
            if not a[:2] < b[:2]:
                raise AssertionError(f"order violated between {a!r} and {b!r}")
        if len(self._items) != len(self._index):
            raise AssertionError("index and items differ in length")
        for sc, seq, key in self._items:
            if self._index.get(key) != (sc, seq):
                raise AssertionError(f"index disagrees for {key!r}")
