"""Compiled data structures; the pure-Python reference sits behind the same names.

The implementation is chosen once, here: ``BUNQ_PUREPYTHON=1`` forces the
pure twins in ``bunq._core._pure``; otherwise the compiled extensions are
used when built, and ``BUNQ_REQUIRE_COMPILED=1`` turns a missing build into
an ``ImportError`` instead of a silent fallback. ``IMPLEMENTATION`` says
which one was loaded. A variable counts as set when it is non-empty and not
``"0"``. Nothing outside ``_core`` and its tests imports the submodules.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, Literal

__all__ = [
    "IMPLEMENTATION",
    "BoundedSet",
    "IndexedHeap",
    "LRUCache",
    "MinHeap",
    "Record",
    "SkipList",
    "SlidingWindow",
    "SlotBuilder",
    "TokenBucket",
    "fnv1a_32",
    "shard_count",
    "shard_for",
]


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _pick() -> Literal["cython", "python"]:
    if _flag("BUNQ_PUREPYTHON"):
        return "python"
    try:
        from . import bucket, heap, lru, minheap, record, routing, skiplist, slots  # noqa: F401
    except ImportError as exc:
        if _flag("BUNQ_REQUIRE_COMPILED"):
            raise ImportError(
                "BUNQ_REQUIRE_COMPILED is set but bunq._core is not compiled "
                "(run `python setup.py build_ext --inplace` or install a wheel)"
            ) from exc
        return "python"
    return "cython"


IMPLEMENTATION: Final[Literal["cython", "python"]] = _pick()

if TYPE_CHECKING or IMPLEMENTATION == "cython":
    from .bucket import SlidingWindow, TokenBucket
    from .heap import IndexedHeap
    from .lru import BoundedSet, LRUCache
    from .minheap import MinHeap
    from .record import Record
    from .routing import fnv1a_32, shard_count, shard_for
    from .skiplist import SkipList
    from .slots import SlotBuilder
else:
    from ._pure.bucket import SlidingWindow, TokenBucket
    from ._pure.heap import IndexedHeap
    from ._pure.lru import BoundedSet, LRUCache
    from ._pure.minheap import MinHeap
    from ._pure.record import Record
    from ._pure.routing import fnv1a_32, shard_count, shard_for
    from ._pure.skiplist import SkipList
    from ._pure.slots import SlotBuilder
