"""The engine's per-job record, compiled and untracked by the cyclic GC."""

from __future__ import annotations

from types import GenericAlias
from typing import Any, Generic, Protocol, TypeVar, final

FIELDS: tuple[str, ...]  # the field names, in layout order

# The types _core cannot name: the engine's job options, job state, failure
# reason and attempt (bunq.engine.record.Rec fills them in).
class _Options(Protocol):
    @property
    def priority(self) -> int: ...
    @property
    def lifo(self) -> bool: ...
    @property
    def group(self) -> str | None: ...
    @property
    def ttl(self) -> int | None: ...

class _State(Protocol):
    @property
    def value(self) -> str: ...

_O = TypeVar("_O", bound=_Options)
_S = TypeVar("_S", bound=_State)
_R = TypeVar("_R")
_A = TypeVar("_A")

@final
class Record(Generic[_O, _S, _R, _A]):
    @classmethod
    def __class_getitem__(cls, item: Any, /) -> GenericAlias: ...
    id: str
    queue: str
    name: str
    data: bytes
    opts: _O  # read for priority, lifo, group, ttl
    state: _S
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
    reason: _R | None
    dlq_at: int | None
    dlq_retries: int
    history: list[_A] | None
    saved: bool
    def __init__(self, id: str, queue: str, name: str, data: bytes, opts: _O, state: _S,
                 seq: int, now: int, run_at: int) -> None: ...  # fmt: skip
    def add_attempt(self, attempt: _A) -> None: ...
    def order_key(self) -> tuple[int, int, int]: ...
    def signed_seq(self) -> int: ...
