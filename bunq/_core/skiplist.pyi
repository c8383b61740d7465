"""Skip list of unique keys ordered by (score, insertion) with O(log n) rank (compiled)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from types import GenericAlias
from typing import Any, Generic, TypeVar, final

_K = TypeVar("_K", bound=Hashable)

@final
class SkipList(Generic[_K]):
    @classmethod
    def __class_getitem__(cls, item: Any, /) -> GenericAlias: ...
    # ValueError unless 1 <= max_level <= 32 and 1 <= seed < 2**32.
    def __init__(self, max_level: int = 16, seed: int = 0x2545F491) -> None: ...
    def insert(self, key: _K, score: float) -> None: ...  # ValueError if present or NaN
    def remove(self, key: _K) -> bool: ...  # False if absent
    def score_of(self, key: _K) -> float: ...  # KeyError if absent
    def rank(self, key: _K) -> int: ...  # KeyError if absent
    # ValueError if a bound is NaN or limit < 0.
    def range_by_score(
        self, lo: float, hi: float, limit: int | None = None
    ) -> list[tuple[_K, float]]: ...
    # ValueError if a bound is negative; stop is clamped to len.
    def range_by_rank(self, start: int, stop: int) -> list[tuple[_K, float]]: ...
    def pop_min(self) -> tuple[_K, float]: ...  # IndexError if empty
    def peek_min(self) -> tuple[_K, float]: ...  # IndexError if empty
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __iter__(self) -> Iterator[_K]: ...  # snapshot, ascending
    def _check(self) -> None: ...  # AssertionError on a broken invariant
