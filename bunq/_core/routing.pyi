"""FNV-1a 32-bit hashing and power-of-two shard routing (compiled)."""

from __future__ import annotations

from typing import Any

# Capsules of the cdef functions in routing.pxd, for `cimport bunq._core.routing`.
__pyx_capi__: dict[str, Any]

def fnv1a_32(data: str | bytes) -> int: ...  # TypeError for other types
def shard_count(cpus: int) -> int: ...  # ValueError if cpus < 1

# ValueError unless shards is a power of two in [1, 64].
def shard_for(name: str | bytes, shards: int) -> int: ...
