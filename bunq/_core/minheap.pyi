"""Indexed 4-ary min-heap of keys by (run_at, seq) for timers (compiled)."""

from __future__ import annotations

from collections.abc import Hashable
from types import GenericAlias
from typing import Any, Generic, TypeVar, final

_K = TypeVar("_K", bound=Hashable)

@final
class MinHeap(Generic[_K]):
    @classmethod
    def __class_getitem__(cls, item: Any, /) -> GenericAlias: ...
    # ValueError unless 0 <= compact_ratio <= 1.
    def __init__(self, compact_ratio: float = 0.2) -> None: ...
    # ValueError if key is present, run_at is NaN or seq outside range(0, 2**63 - 1).
    def push(self, key: _K, run_at: float, seq: int | None = None) -> None: ...
    def pop(self) -> tuple[_K, float]: ...  # IndexError if empty
    def peek(self) -> tuple[_K, float]: ...  # IndexError if empty
    # ValueError if limit < 0.
    def pop_due(self, now: float, limit: int | None = None) -> list[tuple[_K, float]]: ...
    def discard(self, key: _K) -> bool: ...  # False if absent
    def run_at_of(self, key: _K) -> float: ...  # KeyError if absent
    def clear(self) -> None: ...
    def __len__(self) -> int: ...  # live keys only
    def __contains__(self, key: object, /) -> bool: ...
    def _check(self) -> None: ...  # AssertionError on a broken invariant
