"""Argument conversions that match what the compiled modules accept.

Cython converts a C ``double`` argument with ``PyFloat_AsDouble`` (anything
with ``__float__`` or ``__index__``, never a string) and the compiled core
converts integers with ``operator.index``; these helpers do the same so both
implementations raise the same exception types for the same bad input.
"""

from __future__ import annotations

import operator
from typing import SupportsFloat, SupportsIndex

MAX_SEQ = 2**63 - 2
"""Largest accepted seq: ``-1 - seq`` must still fit a signed 64-bit int."""


def as_float(value: SupportsFloat | SupportsIndex) -> float:
    """Convert like a Cython ``double`` argument: ``TypeError`` for strings."""
    if isinstance(value, (str, bytes, bytearray)):
        raise TypeError(f"must be real number, not {type(value).__name__}")
    return float(value)


def as_int64(value: SupportsIndex) -> int:
    """Convert like a C ``long long``: ``operator.index``, ``OverflowError`` outside int64."""
    i = operator.index(value)
    if not -(2**63) <= i < 2**63:
        raise OverflowError("Python int too large to convert to C long long")
    return i


def checked_seq(seq: SupportsIndex) -> int:
    """Return ``seq`` as an int; ``ValueError`` unless ``0 <= seq <= MAX_SEQ``."""
    s = operator.index(seq)
    if s < 0 or s > MAX_SEQ:
        raise ValueError(f"seq must be in range(0, 2**63 - 1), got {s!r}")
    return s


def checked_limit(limit: SupportsIndex | None) -> int:
    """Return ``limit`` as an int, ``-1`` for ``None``; ``ValueError`` if negative."""
    if limit is None:
        return -1
    lim = operator.index(limit)
    if lim < 0:
        raise ValueError(f"limit must be >= 0, got {lim!r}")
    return lim
