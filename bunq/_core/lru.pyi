"""LRU cache and FIFO-bounded set over a slot chain (compiled)."""

from __future__ import annotations

from collections.abc import Hashable
from types import GenericAlias
from typing import Any, Generic, TypeVar, final

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")

@final
class LRUCache(Generic[_K, _V]):
    @classmethod
    def __class_getitem__(cls, item: Any, /) -> GenericAlias: ...
    def __init__(self, maxsize: int) -> None: ...  # ValueError if maxsize < 1
    def get(self, key: _K, default: _V | None = None) -> _V | None: ...  # marks used
    def put(self, key: _K, value: _V) -> None: ...  # may evict the oldest
    def pop(self, key: _K, default: _V | None = None) -> _V | None: ...
    def peek(self, key: _K, default: _V | None = None) -> _V | None: ...  # no recency change
    def keys(self) -> list[_K]: ...  # oldest -> newest
    def clear(self) -> None: ...
    @property
    def evictions(self) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: object, /) -> bool: ...
    def _check(self) -> None: ...  # AssertionError on a broken invariant

@final
class BoundedSet(Generic[_K]):
    @classmethod
    def __class_getitem__(cls, item: Any, /) -> GenericAlias: ...
    # ValueError if maxsize < 1 or evict_fraction outside [0, 1].
    def __init__(self, maxsize: int, evict_fraction: float = 0.1) -> None: ...
    def add(self, key: _K) -> None: ...  # may evict a batch of the oldest
    def discard(self, key: _K) -> bool: ...  # False if absent
    def clear(self) -> None: ...
    @property
    def evictions(self) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: object, /) -> bool: ...
    def _check(self) -> None: ...  # AssertionError on a broken invariant
