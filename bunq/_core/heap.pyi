"""Indexed 4-ary max-priority heap with O(1) lazy discard (compiled)."""

from __future__ import annotations

from collections.abc import Hashable
from types import GenericAlias
from typing import Any, Generic, TypeVar, final

_K = TypeVar("_K", bound=Hashable)

@final
class IndexedHeap(Generic[_K]):
    @classmethod
    def __class_getitem__(cls, item: Any, /) -> GenericAlias: ...
    # ValueError unless 0 <= compact_ratio <= 1.
    def __init__(self, compact_ratio: float = 0.2) -> None: ...
    # ValueError if key is live or seq outside range(0, 2**63 - 1);
    # OverflowError if priority does not fit int64.
    def push(self, key: _K, priority: int, lifo: bool = False, seq: int | None = None) -> None: ...
    def pop(self) -> _K: ...  # IndexError if empty
    def peek(self) -> _K: ...  # IndexError if empty
    def discard(self, key: _K) -> bool: ...  # False if absent
    def priority_of(self, key: _K) -> int: ...  # KeyError if absent
    def clear(self) -> None: ...
    def __len__(self) -> int: ...  # live keys only
    def __contains__(self, key: object, /) -> bool: ...
    def _check(self) -> None: ...  # AssertionError on a broken invariant
