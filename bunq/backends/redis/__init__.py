"""The Redis backend (``redis://host:port/db?prefix=bunq``; extra ``redis``).

Modules: :mod:`.config` (URLs), :mod:`.keys` (the cluster-ready key layout),
:mod:`.scripts` (the Lua functions in ``lua/``, one library), :mod:`.backend` (admission,
leases, settles, sweep), :mod:`.admin` (queries, control, DLQ, kv),
:mod:`.rows` (job hashes to model objects), :mod:`.clock` (the server's TIME).
See docs/redis.md.
"""

from __future__ import annotations

from .backend import RedisBackend

__all__ = ["RedisBackend"]
