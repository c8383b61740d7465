"""The engine's per-job record, compiled and untracked by the cyclic GC."""

from __future__ import annotations

from typing import Any

FIELDS: tuple[str, ...]  # the field names, in layout order

# Final at run time; not marked @final here so that the engine can declare
# (for type checking only) a subclass with its own types for the Any fields.
class Record:
    id: str
    queue: str
    name: str
    data: bytes
    opts: Any  # read for priority, lifo, group, ttl
    state: Any
    priority: int
    lifo: bool
    group: str | None
    seq: int
    eseq: int
    run_at: int
    created_at: int
    started_at: int | None
    finished_at: int | None
    attempts: int
    stalls: int
    token: str | None
    owner: str
    lease_until: int
    expire_at: int | None
    pending: int
    progress: int
    error: str | None
    reason: Any
    dlq_at: int | None
    dlq_retries: int
    history: list[Any] | None
    saved: bool
    def __init__(self, id: str, queue: str, name: str, data: bytes, opts: Any, state: Any,
                 seq: int, now: int, run_at: int) -> None: ...  # fmt: skip
    def add_attempt(self, attempt: Any) -> None: ...
    def order_key(self) -> tuple[int, int, int]: ...
    def signed_seq(self) -> int: ...
