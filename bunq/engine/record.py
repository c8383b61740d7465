"""The compact job record the engine stores, and the Job snapshots built from it.

A job lives in the engine as one :class:`Rec` (a ``__slots__`` object, no
dict): its payload is the msgpack bytes validated at admission, its options
the caller's (shared, frozen) :class:`~bunq.job.JobOptions`. Public
:class:`~bunq.job.Job` objects are built only when a caller asks for one
(lease, get, list): no dataclass is created or copied on internal transitions.

``state`` holds :class:`~bunq.job.JobState` members; waiting and delayed jobs
share ``WAITING`` (as in the SQL backends) and a job is *delayed* while
``run_at > now``. ``PAUSED`` is never stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from ..codec import unpack
from ..job import Attempt, FailureReason, Job, JobOptions, JobState, Lease

WAITING = JobState.WAITING
DELAYED = JobState.DELAYED
ACTIVE = JobState.ACTIVE
COMPLETED = JobState.COMPLETED
FAILED = JobState.FAILED
CHILDREN = JobState.WAITING_CHILDREN
LIVE = frozenset((WAITING, ACTIVE, CHILDREN))


class Rec:
    """One job as the engine keeps it (mutable; guarded by its shard's lock).

    ``seq`` is the admission number (time-ordered, as in the SQL backends);
    ``eseq`` is the number given when the job last entered a ready lane, which
    is what orders ready jobs of equal priority. ``history`` is ``None`` until
    the first finished attempt. ``saved`` says whether the write-behind store
    already holds the row (so later changes can be written as updates).
    """

    __slots__ = (
        "id", "queue", "name", "data", "opts", "state", "priority", "lifo", "group", "seq",
        "eseq", "run_at", "created_at", "started_at", "finished_at", "attempts", "stalls",
        "token", "owner", "lease_until", "expire_at", "pending", "progress", "error",
        "reason", "dlq_at", "dlq_retries", "history", "saved",
    )  # fmt: skip

    def __init__(self, id: str, queue: str, name: str, data: bytes, opts: JobOptions,
                 seq: int, now: int, run_at: int) -> None:  # fmt: skip
        self.id = id
        self.queue = queue
        self.name = name
        self.data = data
        self.opts = opts
        self.state = WAITING
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
        self.expire_at: int | None = None if opts.ttl is None else now + opts.ttl
        self.pending = 0
        self.progress = 0
        self.error: str | None = None
        self.reason: FailureReason | None = None
        self.dlq_at: int | None = None
        self.dlq_retries = 0
        self.history: list[Attempt] | None = None
        self.saved = False

    def __repr__(self) -> str:
        return f"Rec({self.id!r}, {self.queue!r}, {self.state.value}, attempts={self.attempts})"

    def add_attempt(self, attempt: Attempt) -> None:
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


def _factory(cls: type[Any]) -> Callable[..., Any]:
    """Build a positional constructor for the frozen, slotted dataclass ``cls``.

    A frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``; setting the slots through their member descriptors
    builds an equal object in about half the time, and the engine builds one
    Job (and Lease) per job leased or added. The field list is read from the
    dataclass, so a field added to :class:`~bunq.job.Job` cannot be missed
    (``tests/engine`` checks equality with the real constructor).
    """
    names = [f.name for f in fields(cls)]
    body = "".join(f"    _set_{n}(obj, {n})\n" for n in names)
    src = f"def make({', '.join(names)}):\n    obj = _new(_cls)\n{body}    return obj\n"
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    scope.update({f"_set_{n}": getattr(cls, n).__set__ for n in names})
    exec(src, scope)  # generated from the dataclass's own field names
    make: Callable[..., Any] = scope["make"]
    make.__doc__ = f"Build a {cls.__name__} from all its fields, positionally."
    return make


#: ``make_job(id, queue, name, data, state, opts, attempts, created_at, run_at,
#: started_at, finished_at, progress, result, error, reason, history, stalls)``
make_job: Callable[..., Job] = _factory(Job)
#: ``make_lease(job, token, attempt, expires_at, owner)``
make_lease: Callable[..., Lease] = _factory(Lease)


def snapshot(rec: Rec, now: int, result: Any = None, history: bool = False) -> Job:
    """Return the public view of ``rec`` (delayed derived from ``run_at > now``).

    :param result: the decoded result (completed jobs only).
    :param history: include the attempt history (get_job, DLQ listings).
    """
    state = rec.state
    if state is WAITING and rec.run_at > now:
        state = DELAYED
    hist = tuple(rec.history) if history and rec.history else ()
    return make_job(rec.id, rec.queue, rec.name,
                    unpack(rec.data), state, rec.opts,
                    rec.attempts, rec.created_at, rec.run_at, rec.started_at, rec.finished_at,
                    rec.progress, result, rec.error, rec.reason, hist, rec.stalls)  # fmt: skip
