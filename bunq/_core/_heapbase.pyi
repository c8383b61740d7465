"""The 4-ary indexed heap engine under IndexedHeap and MinHeap (compiled).

Private: ``bunq._core.heap`` and ``bunq._core.minheap`` subclass it, and
their stubs restate the inherited methods with their own key types.
"""

from __future__ import annotations

from collections.abc import Hashable
from types import GenericAlias
from typing import Any

from typing_extensions import disjoint_base

@disjoint_base  # a C struct layout: no second such base can be mixed in
class HeapBase:
    @classmethod
    def __class_getitem__(cls, item: Any, /) -> GenericAlias: ...
    # ValueError unless 0 <= compact_ratio <= 1; TypeError unless a subclass.
    def __init__(self, compact_ratio: float = 0.2) -> None: ...
    def discard(self, key: Hashable) -> bool: ...  # False if absent
    def clear(self) -> None: ...
    def __len__(self) -> int: ...  # live keys only
    def __contains__(self, key: object, /) -> bool: ...
    def _check(self) -> None: ...  # AssertionError on a broken invariant
