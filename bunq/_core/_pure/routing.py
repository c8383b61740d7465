"""Reference FNV-1a 32 hashing and power-of-two shard routing."""

from __future__ import annotations

import operator

_OFFSET = 2166136261
_PRIME = 16777619
_MAX_SHARDS = 64


def fnv1a_32(data: str | bytes) -> int:
    """Return the 32-bit FNV-1a hash of ``data`` (a str is UTF-8 encoded).

    >>> hex(fnv1a_32("a"))
    '0xe40c292c'
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif not isinstance(data, bytes):
        raise TypeError(f"expected str or bytes, got {type(data).__name__}")
    h = _OFFSET
    for byte in data:
        h = ((h ^ byte) * _PRIME) & 0xFFFFFFFF
    return h


def shard_count(cpus: int) -> int:
    """Return the smallest power of two >= ``cpus``, clamped to [1, 64].

    >>> [shard_count(c) for c in (1, 3, 8, 100)]
    [1, 4, 8, 64]
    """
    c = operator.index(cpus)
    if c < 1:
        raise ValueError(f"cpus must be >= 1, got {c!r}")
    n = 1
    while n < c and n < _MAX_SHARDS:
        n *= 2
    return n


def shard_for(name: str | bytes, shards: int) -> int:
    """Return ``fnv1a_32(name) & (shards - 1)``; ``shards`` a power of two in [1, 64].

    >>> shard_for("emails", 8) == fnv1a_32("emails") % 8
    True
    """
    s = operator.index(shards)
    if not 1 <= s <= _MAX_SHARDS or s & (s - 1):
        raise ValueError(f"shards must be a power of two in [1, 64], got {s!r}")
    return fnv1a_32(name) & (s - 1)
