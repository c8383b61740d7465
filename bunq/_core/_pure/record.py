"""Reference job record: a ``__slots__`` class, as the engine kept it before it was compiled."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar


class Options(Protocol):
    """What a record reads of its job's options."""

    @property
    def priority(self) -> int: ...
    @property
    def lifo(self) -> bool: ...
    @property
    def group(self) -> str | None: ...
    @property
    def ttl(self) -> int | None: ...


class State(Protocol):
    """A job state: ``repr`` shows its value."""

    @property
    def value(self) -> str: ...


OptsT = TypeVar("OptsT", bound=Options)  # job options
StateT = TypeVar("StateT", bound=State)  # job state
ReasonT = TypeVar("ReasonT")  # failure reason
AttemptT = TypeVar("AttemptT")  # a finished attempt


class Record(Generic[OptsT, StateT, ReasonT, AttemptT]):
    """One job as the engine keeps it (mutable; guarded by its shard's lock).

    ``seq`` is the admission number (time-ordered, as in the SQL backends);
    ``eseq`` is the number given when the job last entered a ready lane, which
    is what orders ready jobs of equal priority. ``history`` is ``None`` until
    the first finished attempt. ``saved`` says whether the write-behind store
    already holds the row (so later changes can be written as updates).
    ``opts`` is read for ``priority``, ``lifo``, ``group`` and ``ttl``;
    ``state`` is the engine's initial state (``_core`` knows no job states).

    >>> from types import SimpleNamespace
    >>> opts = SimpleNamespace(priority=2, lifo=True, group=None, ttl=50)
    >>> r = Record("j1", "q", "n", b"", opts, "waiting", 7, 100, 120)
    >>> r.order_key(), r.signed_seq(), r.expire_at
    ((-2, -120, -7), -7, 150)
    """

    __slots__ = (
        "id", "queue", "name", "data", "opts", "state", "priority", "lifo", "group", "seq",
        "eseq", "run_at", "created_at", "started_at", "finished_at", "attempts", "stalls",
        "token", "owner", "lease_until", "expire_at", "pending", "progress", "error",
        "reason", "dlq_at", "dlq_retries", "history", "saved",
    )  # fmt: skip

    def __init__(self, id: str, queue: str, name: str, data: bytes, opts: OptsT, state: StateT,
                 seq: int, now: int, run_at: int) -> None:  # fmt: skip
        self.id = id
        self.queue = queue
        self.name = name
        self.data = data
        self.opts = opts
        self.state = state
        self.priority = opts.priority
        self.lifo = opts.lifo
        self.group = opts.group
        self.seq = seq
        self.eseq = 0
        self.run_at = run_at
        self.created_at = now
        self.started_at: int | None = None
        self.finished_at: int | None = None
        self.attempts = 0
        self.stalls = 0
        self.token: str | None = None
        self.owner = ""
        self.lease_until = 0
        ttl = opts.ttl
        self.expire_at: int | None = None if ttl is None else now + ttl
        self.pending = 0
        self.progress = 0
        self.error: str | None = None
        self.reason: ReasonT | None = None
        self.dlq_at: int | None = None
        self.dlq_retries = 0
        self.history: list[AttemptT] | None = None
        self.saved = False

    def __repr__(self) -> str:
        return f"Rec({self.id!r}, {self.queue!r}, {self.state.value}, attempts={self.attempts})"

    def add_attempt(self, attempt: AttemptT) -> None:
        """Append a finished attempt to the history (ordered by time, then number)."""
        if self.history is None:
            self.history = [attempt]
        else:
            self.history.append(attempt)

    def order_key(self) -> tuple[int, int, int]:
        """Sort key of the SQL ready order: priority DESC, ord_at, seq (LIFO negated)."""
        if self.lifo:
            return (-self.priority, -self.run_at, -self.seq)
        return (-self.priority, self.run_at, self.seq)

    def signed_seq(self) -> int:
        """Admission number as the SQL backends store it (negative for LIFO jobs)."""
        return -self.seq if self.lifo else self.seq


FIELDS: tuple[str, ...] = Record.__slots__
