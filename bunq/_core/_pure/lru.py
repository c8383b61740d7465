"""Reference LRUCache and BoundedSet over ``OrderedDict``."""

from __future__ import annotations

import operator
import sys
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar, final

from ._conv import as_float

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _checked_maxsize(maxsize: int) -> int:
    m = operator.index(maxsize)
    if m < 1:
        raise ValueError(f"maxsize must be >= 1, got {m!r}")
    return min(m, sys.maxsize)


class _Bounded(Generic[K, V]):
    """An ``OrderedDict`` of at most ``maxsize`` keys, oldest first; the shared part."""

    __slots__ = ("_data", "_evictions", "_maxsize")

    def __init__(self, maxsize: int) -> None:
        self._maxsize = _checked_maxsize(maxsize)
        self._evictions = 0
        self._data: OrderedDict[K, V] = OrderedDict()  # oldest first

    def clear(self) -> None:
        """Remove every key (not counted as evictions)."""
        self._data.clear()

    @property
    def evictions(self) -> int:
        """Number of keys evicted for capacity so far."""
        return self._evictions

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def _check(self) -> None:
        """Verify the invariants; ``AssertionError`` on a violation."""
        if len(self._data) > self._maxsize:
            raise AssertionError("more keys than maxsize")


@final
class LRUCache(_Bounded[K, V]):
    """Mapping of at most ``maxsize`` entries that evicts the least recently used.

    ``get`` and ``put`` mark a key most recently used; ``peek``, ``pop`` and
    ``in`` do not. ``evictions`` counts capacity evictions only and survives
    ``clear``.

    >>> c = LRUCache(2)
    >>> c.put("a", 1); c.put("b", 2); _ = c.get("a"); c.put("c", 3)
    >>> c.keys(), c.evictions
    (['a', 'c'], 1)
    """

    __slots__ = ()

    def get(self, key: K, default: V | None = None) -> V | None:
        """Return the value of ``key`` and mark it used, or ``default``."""
        if key not in self._data:
            return default
        self._data.move_to_end(key)
        return self._data[key]

    def put(self, key: K, value: V) -> None:
        """Set ``key`` and mark it used; evict the oldest entry past maxsize."""
        self._data[key] = value
        self._data.move_to_end(key)
        if len(self._data) > self._maxsize:
            self._data.popitem(last=False)
            self._evictions += 1

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key`` and return its value, or ``default`` if absent."""
        return self._data.pop(key, default)

    def peek(self, key: K, default: V | None = None) -> V | None:
        """Return the value of ``key`` (or ``default``) without marking it used."""
        return self._data.get(key, default)

    def keys(self) -> list[K]:
        """Return the keys from least to most recently used."""
        return list(self._data)


@final
class BoundedSet(_Bounded[K, None]):
    """Set of at most ``maxsize`` keys that forgets the oldest in batches.

    FIFO by first insertion (re-adding does not refresh). When an add makes
    ``len > maxsize`` the oldest ``max(1, int(maxsize * evict_fraction))``
    keys go at once; ``evictions`` counts keys.

    >>> s = BoundedSet(4, evict_fraction=0.5)
    >>> for k in "abcde": s.add(k)
    >>> sorted(k for k in "abcde" if k in s), s.evictions
    (['c', 'd', 'e'], 2)
    """

    __slots__ = ("_batch",)

    def __init__(self, maxsize: int, evict_fraction: float = 0.1) -> None:
        super().__init__(maxsize)
        fraction = as_float(evict_fraction)
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"evict_fraction must be in [0, 1], got {fraction!r}")
        self._batch = max(1, int(self._maxsize * fraction))

    def add(self, key: K) -> None:
        """Add ``key`` unless present; evict a batch of the oldest past maxsize."""
        if key in self._data:
            return
        self._data[key] = None
        if len(self._data) > self._maxsize:
            for _ in range(self._batch):
                self._data.popitem(last=False)
            self._evictions += self._batch

    def discard(self, key: K) -> bool:
        """Remove ``key``; return whether it was present."""
        if key not in self._data:
            return False
        del self._data[key]
        return True
