"""The job model: states, failure reasons, options, jobs and leases.

Times are integer milliseconds since the Unix epoch; durations are integer
milliseconds. These enums' values are what backends persist and what goes on
the wire, so they never change.
"""

from __future__ import annotations

import enum
import itertools
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from . import validate as v
from .errors import DetachedJob, JobNotFound, UnsupportedError, ValidationError
from .stacks import DEFAULT_STACK_LIMIT, MAX_STACK_LIMIT

JobId = str


class JobState(str, enum.Enum):
    """Where a job is in its life."""

    WAITING = "waiting"
    DELAYED = "delayed"
    ACTIVE = "active"
    COMPLETED = "completed"
    FAILED = "failed"  # in the dead-letter queue
    WAITING_CHILDREN = "waiting-children"
    PAUSED = "paused"  # waiting, in a paused queue (reported, never stored)

    @classmethod
    def parse(cls, value: object) -> JobState:
        """Return the state named by ``value`` (a JobState or its value), else ValidationError."""
        if isinstance(value, JobState):
            return value
        if type(value) is str and value in cls._value2member_map_:
            return cls(value)
        names = ", ".join(s.value for s in cls)
        raise ValidationError(f"unknown job state {value!r} (one of {names})", field="state")


class FailureReason(str, enum.Enum):
    """Why a job ended up in the dead-letter queue (or why an attempt ended)."""

    EXPLICIT_FAIL = "explicit_fail"
    MAX_ATTEMPTS_EXCEEDED = "max_attempts_exceeded"
    TIMEOUT = "timeout"
    STALLED = "stalled"
    TTL_EXPIRED = "ttl_expired"
    WORKER_LOST = "worker_lost"
    DEPENDENCY_FAILED = "dependency_failed"  # a flow child failed (fail_parent_on_failure)
    CANCELLED = "cancelled"  # queue.cancel() of an active job: settled by its worker, not retried
    UNKNOWN = "unknown"


class UniqueStrategy(str, enum.Enum):
    """What adding a job whose unique key is held by a live job does."""

    REJECT = "reject"  # raise DuplicateJob
    EXTEND = "extend"  # keep the live job, push the key's expiry out by its ttl
    REPLACE = "replace"  # remove the live job (if not active) and admit the new one


class Settle(str, enum.Enum):
    """Answer of complete / fail / extend under a fence."""

    OK = "ok"
    STALE = "stale"  # the fence no longer matches; nothing was changed


def now_ms() -> int:
    """Return the wall clock in epoch milliseconds (drivers only; logic takes `now`)."""
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------- ids


class _IdSource:
    """UUIDv7-shaped, time-ordered ids: 48-bit ms, a 40-bit counter, a 34-bit node.

    Lexicographic order is creation order within a process (the counter never
    resets, and ``itertools.count`` is atomic under the GIL, so no lock) and
    millisecond order across processes. A forked child draws a new node and
    counter start, so it never repeats its parent's ids.
    """

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._node = int.from_bytes(os.urandom(5), "big") & 0x3FFFFFFFF
        self._count = itertools.count(int.from_bytes(os.urandom(3), "big"))
        self._cache = (-1, -1, "")  # (ms, count >> 14, the id up to its last group)
        self._ends = [hex(_LAST_GROUP_BIT | k << 34 | self._node)[-9:] for k in range(4)]

    def next(self) -> JobId:
        ms = time.time_ns() // 1_000_000
        c = next(self._count)
        hi = c >> 14
        cached = self._cache  # one attribute, read atomically
        if cached[0] != ms or cached[1] != hi:  # all but the last group is reused
            cached = self._cache = (ms, hi, _head(ms, hi))
        # the last group joined from strings made once, as in _format
        return f"{cached[2]}{_HEX[c >> 10 & 0xF]}{_BYTE_HEX[c >> 2 & 0xFF]}{self._ends[c & 3]}"

    def take(self, n: int) -> list[JobId]:
        """``n`` ids as :meth:`next` makes them, for one bulk call, in one step: the clock
        is read once (all share the millisecond the call began in), the counter values
        are drawn by one ``islice`` (each draw atomic, as in :meth:`next`), and the ids
        are formatted by one comprehension, with no Python call per id."""
        ms = time.time_ns() // 1_000_000
        counts = list(itertools.islice(self._count, n))
        if not counts or counts[0] >> 14 == counts[-1] >> 14:  # one head for all
            return self._format(ms, counts)
        out: list[JobId] = []
        for _, run in itertools.groupby(counts, lambda c: c >> 14):
            out += self._format(ms, list(run))
        return out

    def _format(self, ms: int, counts: list[int]) -> list[JobId]:
        """The ids of ``counts``, which share their head (``c >> 14``).

        The last group's 12 digits are built from strings made once, not formatted per
        id: its first digit is bits 10-13 of the counter (one of 16 heads, made here),
        the next two bits 2-9 (``_BYTE_HEX``), and the last nine the counter's bits 0-1
        beside the node's 34 bits (``_ends``, 4 strings per node). Per id that is one
        string built from three, instead of ``hex()``, a slice and a concatenation
        (~1,000 fewer instructions per id under callgrind).
        """
        if not counts:
            return []
        head = _head(ms, counts[0] >> 14)
        heads = [head + d for d in _HEX]
        ends = self._ends
        return [f"{heads[c >> 10 & 0xF]}{_BYTE_HEX[c >> 2 & 0xFF]}{ends[c & 3]}" for c in counts]


def _head(ms: int, hi: int) -> str:
    """An id up to its last group, for millisecond ``ms`` and counter bits ``hi``:
    ``f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-7{(hi >> 14) & 0xFFF:03x}-{0x8000 | (hi & 0x3FFF):04x}-"``
    as one ``hex()`` of the three fields side by side, cut at the dashes (a third of the
    cost of four format specs; it runs each new millisecond, for every add under a profiler).
    """
    h = hex(_HEAD_BIT | ms << 32 | (0x7000 | (hi >> 14) & 0xFFF) << 16 | 0x8000 | (hi & 0x3FFF))
    return f"{h[3:11]}-{h[11:15]}-{h[15:19]}-{h[19:]}-"


#: ``hex(_LAST_GROUP_BIT | x)[3:]`` is ``f"{x:012x}"`` for the 48-bit last group, faster
_LAST_GROUP_BIT = 1 << 48
_HEX = "0123456789abcdef"
_BYTE_HEX = [f"{b:02x}" for b in range(256)]
_HEAD_BIT = 1 << 80  # the same for _head's 20 digits (ms stays below 2**48 until 10889)
_ids = _IdSource()
new_job_id = _ids.next
new_job_ids = _ids.take


# ----------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before the next attempt: ``fixed`` or ``exponential`` with a cap.

    Exponential is ``min(delay * 2**(attempt-1), cap)``; ``jitter`` in [0, 1]
    scales the delay by a random factor in ``[1 - jitter, 1]`` (0 = deterministic).
    """

    type: Literal["fixed", "exponential"] = "exponential"
    delay: int = 1000
    cap: int | None = None
    jitter: float = 0.0

    @classmethod
    def parse(cls, value: object) -> Backoff:
        """Accept a Backoff, a number of ms (fixed), or a mapping of fields."""
        if isinstance(value, Backoff):
            if value is not DEFAULT_BACKOFF:
                cls.parse(value.to_dict())  # a Backoff built directly is checked too
            return value
        if isinstance(value, bool):
            raise ValidationError("backoff must be a number of ms or a mapping", field="backoff")
        if isinstance(value, int):
            return cls("fixed", v.duration(value, "backoff"))
        if isinstance(value, Mapping):
            unknown = set(value) - {"type", "delay", "cap", "jitter"}
            if unknown:
                raise ValidationError(f"unknown backoff fields {sorted(unknown)}", field="backoff")
            kind = value.get("type", "exponential")
            if kind not in ("fixed", "exponential"):
                raise ValidationError(f"backoff type {kind!r} is not fixed|exponential")
            jitter = value.get("jitter", 0.0)
            if (
                isinstance(jitter, bool)
                or not isinstance(jitter, (int, float))
                or not 0.0 <= jitter <= 1.0
            ):
                raise ValidationError("backoff jitter must be in [0, 1]", field="backoff")
            cap = value.get("cap")
            return cls(
                kind,
                v.duration(value.get("delay", 1000), "backoff.delay"),
                None if cap is None else v.duration(cap, "backoff.cap"),
                float(jitter),
            )
        raise ValidationError("backoff must be a number of ms or a mapping", field="backoff")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "delay": self.delay, "cap": self.cap, "jitter": self.jitter}


def _group_max_size(o: Mapping[str, Any]) -> int | None:
    value = o.get("group_max_size")
    if value is None:
        return None
    if o.get("group") is None:
        raise ValidationError("group_max_size needs a group", field="group_max_size")
    return v.integer(value, "group_max_size", 1, v.MAX_COUNT)


def _opt_duration(o: Mapping[str, Any], name: str) -> int | None:
    value = o.get(name)
    return None if value is None else v.duration(value, name)


@dataclass(frozen=True, slots=True)
class JobOptions:
    """Per-job options, validated once at admission (:meth:`parse`)."""

    priority: int = 0
    delay: int = 0
    attempts: int = 3
    backoff: Backoff = field(default_factory=Backoff)
    job_id: str | None = None
    unique_key: str | None = None
    unique_strategy: UniqueStrategy = UniqueStrategy.REJECT
    unique_ttl: int | None = None
    lifo: bool = False
    ttl: int | None = None
    timeout: int | None = None
    depends_on: tuple[str, ...] = ()
    remove_on_complete: bool = False
    remove_on_fail: bool = False
    group: str | None = None
    durable: bool = False
    parent_id: str | None = None
    stack_trace_limit: int = DEFAULT_STACK_LIMIT  # stack lines a failure keeps (bunq.stacks)
    traceparent: str | None = None  # W3C trace context of the add (OpenTelemetry: bunq.tracing)
    # What a flow child's dead-lettering does to its parent (at most one; bunq.jobrules.FlowFailure)
    fail_parent_on_failure: bool = False
    ignore_dependency_on_failure: bool = False
    remove_dependency_on_failure: bool = False
    continue_parent_on_failure: bool = False
    keep_logs: int | None = None  # keep at most this many log lines (newest), under the store's cap
    group_max_size: int | None = None  # refuse the add when the group has this many pending

    @classmethod
    def parse(cls, opts: Mapping[str, Any]) -> JobOptions:
        """Validate keyword options; raise ValidationError naming the bad one."""
        if not opts:
            return DEFAULT_OPTIONS
        unknown = set(opts) - _OPTION_NAMES
        if unknown:
            raise ValidationError(f"unknown job options {sorted(unknown)}", options=sorted(unknown))
        o = dict(opts)
        prio = v.integer(o.get("priority", 0), "priority", v.MIN_PRIORITY, v.MAX_PRIORITY)
        attempts = v.integer(o.get("attempts", 3), "attempts", 1, v.MAX_ATTEMPTS)
        for name in ("lifo", "remove_on_complete", "remove_on_fail", "durable", *FLOW_POLICIES):
            if not isinstance(o.get(name, False), bool):
                raise ValidationError(f"{name} must be a bool", field=name)
        policies = [name for name in FLOW_POLICIES if o.get(name)]
        if len(policies) > 1:
            raise ValidationError(f"at most one of {', '.join(policies)} may be set",
                                  field=policies[1])  # fmt: skip
        deps = o.get("depends_on", ())
        if isinstance(deps, (str, bytes)) or not isinstance(deps, Sequence):
            raise ValidationError("depends_on must be a list of job ids", field="depends_on")
        if len(deps) > v.MAX_DEPENDENCIES:
            raise ValidationError(f"depends_on holds more than {v.MAX_DEPENDENCIES} ids",
                                  field="depends_on")  # fmt: skip
        strategy = o.get("unique_strategy", UniqueStrategy.REJECT)
        if not isinstance(strategy, UniqueStrategy):
            if type(strategy) is not str or strategy not in _STRATEGIES:
                raise ValidationError("unique_strategy must be reject|extend|replace",
                                      field="unique_strategy")  # fmt: skip
            strategy = _STRATEGIES[strategy]
        out = cls(
            priority=prio,
            delay=v.duration(o.get("delay", 0), "delay"),
            attempts=attempts,
            backoff=Backoff.parse(o.get("backoff", DEFAULT_BACKOFF)),
            job_id=v.optional_text(o.get("job_id"), "job_id"),
            unique_key=v.optional_text(o.get("unique_key"), "unique_key", v.MAX_KEY_BYTES),
            unique_strategy=strategy,
            unique_ttl=_opt_duration(o, "unique_ttl"),
            lifo=o.get("lifo", False),
            ttl=_opt_duration(o, "ttl"),
            timeout=_opt_duration(o, "timeout"),
            depends_on=tuple(v.text(d, "depends_on[]") for d in deps),
            remove_on_complete=o.get("remove_on_complete", False),
            remove_on_fail=o.get("remove_on_fail", False),
            group=v.optional_text(o.get("group"), "group"),
            durable=o.get("durable", False),
            parent_id=v.optional_text(o.get("parent_id"), "parent_id"),
            stack_trace_limit=v.integer(
                o.get("stack_trace_limit", DEFAULT_STACK_LIMIT),
                "stack_trace_limit",
                0,
                MAX_STACK_LIMIT,
            ),
            traceparent=_traceparent(o.get("traceparent")),
            **{name: True for name in policies},
            keep_logs=None
            if o.get("keep_logs") is None
            else v.integer(o["keep_logs"], "keep_logs", 0, MAX_KEEP_LOGS),
            group_max_size=_group_max_size(o),
        )
        _remember_checked(out)
        return out

    def to_dict(self) -> dict[str, Any]:
        """Return the options as plain data (what backends persist)."""
        return {
            "priority": self.priority, "delay": self.delay, "attempts": self.attempts,
            "backoff": self.backoff.to_dict(), "job_id": self.job_id,
            "unique_key": self.unique_key, "unique_strategy": self.unique_strategy.value,
            "unique_ttl": self.unique_ttl, "lifo": self.lifo, "ttl": self.ttl,
            "timeout": self.timeout, "depends_on": list(self.depends_on),
            "remove_on_complete": self.remove_on_complete, "remove_on_fail": self.remove_on_fail,
            "group": self.group, "durable": self.durable, "parent_id": self.parent_id,
            "stack_trace_limit": self.stack_trace_limit,
            "traceparent": self.traceparent,
            **{name: True for name in FLOW_POLICIES if getattr(self, name)},
            **({} if self.keep_logs is None else {"keep_logs": self.keep_logs}),
            **({} if self.group_max_size is None else {"group_max_size": self.group_max_size}),
        }  # fmt: skip

    def changed(self) -> dict[str, Any]:
        """The fields of :meth:`to_dict` that differ from the defaults (a backoff whole)."""
        return {k: v for k, v in self.to_dict().items()
                if k not in _DEFAULT_DICT or v != _DEFAULT_DICT[k]}  # fmt: skip


FLOW_POLICIES = ("fail_parent_on_failure", "ignore_dependency_on_failure",
                 "remove_dependency_on_failure", "continue_parent_on_failure")  # fmt: skip
MAX_KEEP_LOGS = 1_000_000


_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def _traceparent(value: object) -> str | None:
    """A W3C ``traceparent`` header value (``00-<trace id>-<span id>-<flags>``), or None."""
    if value is None:
        return None
    if type(value) is not str or _TRACEPARENT.fullmatch(value) is None or value.startswith("ff"):
        raise ValidationError("traceparent must be a W3C traceparent "
                              "(00-<32 hex>-<16 hex>-<2 hex>)", field="traceparent")  # fmt: skip
    return value


DEFAULT_BACKOFF = Backoff()
DEFAULT_OPTIONS = JobOptions()
_DEFAULT_DICT = DEFAULT_OPTIONS.to_dict()
_OPTION_NAMES = frozenset(f.name for f in fields(JobOptions))
_STRATEGIES = {s.value: s for s in UniqueStrategy}

# Options objects that passed parse(), by identity (holding the object, so an id is
# never reused while cached): jobs share option objects, so a backend re-checking a
# job's options costs one dict lookup.
_CHECKED: dict[int, JobOptions] = {}


def _remember_checked(opts: JobOptions) -> None:
    if len(_CHECKED) >= 4096:
        _CHECKED.clear()
    _CHECKED[id(opts)] = opts


_remember_checked(DEFAULT_OPTIONS)


def check_options(opts: object) -> JobOptions:
    """Return ``opts`` if it is a JobOptions whose every value is within bounds.

    Options built by :meth:`JobOptions.parse` pass at once; one built directly
    (``JobOptions(delay=10**30)``) is checked field by field, as parse would.
    """
    if _CHECKED.get(id(opts)) is opts:
        return opts  # type: ignore[return-value]
    if not isinstance(opts, JobOptions):
        raise ValidationError("job options must be a JobOptions", field="opts")
    if not isinstance(opts.backoff, Backoff):
        raise ValidationError("backoff must be a Backoff", field="backoff")
    JobOptions.parse(opts.to_dict())
    _remember_checked(opts)
    return opts


# -------------------------------------------------------------------------- jobs


@dataclass(frozen=True, slots=True)
class Attempt:
    """One finished attempt, kept in the job's history and in DLQ entries."""

    attempt: int
    error: str | None
    duration_ms: int
    at: int
    reason: FailureReason | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt, "error": self.error, "duration_ms": self.duration_ms,
            "at": self.at, "reason": None if self.reason is None else self.reason.value,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Attempt:
        r = d.get("reason")
        return cls(int(d["attempt"]), d.get("error"), int(d.get("duration_ms", 0)),
                   int(d.get("at", 0)), None if r is None else FailureReason(r))  # fmt: skip


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job about to be admitted: what ``Backend.add`` takes."""

    queue: str
    name: str
    data: Any
    opts: JobOptions
    id: JobId = field(default_factory=new_job_id)


def check_relink(job_id: object, parent_id: object) -> None:
    """Check a ``set_parent`` request: two ids, not the same (ValidationError)."""
    v.text(job_id, "job_id")
    v.text(parent_id, "parent_id")
    if job_id == parent_id:
        raise ValidationError("a flow job cannot be its own parent", field="parent_id")


def check_new_jobs(jobs: Sequence[NewJob]) -> None:
    """Validate what a backend is asked to admit (every backend calls this first).

    Queue names raise ConfigError; the job name, id and options ValidationError.
    The payload is checked where it is encoded (:func:`bunq.codec.pack`). A queue,
    name or options object that is the very object the job before carried (a bulk
    of one shape) is not checked again, nor a queue and name that are the very
    objects the last call ended with (a producer adding jobs one by one; a str
    cannot change, and holding it keeps its identity from being reused).
    """
    global _last_checked
    queue, name = _last_checked
    last: object = _UNSEEN
    for job in jobs:
        if type(job) is not NewJob and not isinstance(job, NewJob):
            raise ValidationError("jobs must be NewJob values", field="jobs")
        if job.queue is not queue:
            queue = v.queue_name(job.queue)
        if job.name is not name:
            name = v.text(job.name, "name")
        jid = job.id  # v.text's test, inlined for the common case (a call per job)
        if not (type(jid) is str and jid.isascii() and 0 < len(jid) <= _MAX_ID
                and "\x00" not in jid):  # fmt: skip
            v.text(jid, "id")
        opts = job.opts
        if opts is not last:
            if _CHECKED.get(id(opts)) is not opts:
                check_options(opts)
            last = opts
    _last_checked = (queue, name)


_UNSEEN = object()
_last_checked: tuple[object, object] = (_UNSEEN, _UNSEEN)  # (queue, name), both valid
_MAX_ID = v.MAX_NAME_BYTES


def refuse_group_max_size(jobs: Sequence[NewJob], backend: str) -> None:
    """UnsupportedError for ``group_max_size`` on a backend that keeps no per-group count
    of pending jobs (without ``Capability.GROUP_MAX_SIZE``: Redis, SQS)."""
    for job in jobs:
        if job.opts.group_max_size is not None:
            raise UnsupportedError(backend, "group_max_size")


class _Handle:
    """The Queue a Job was read through: a slot outside the dataclass's fields, so it
    is not part of the job's value (eq, hash, repr, pickling, ``dataclasses.replace``
    and the fast constructors never see it). Unset means detached."""

    __slots__ = ("_queue",)


def _queue_of(job: Any, method: str) -> Any:
    queue = getattr(job, "_queue", None)
    if queue is None:
        raise DetachedJob(f"this Job was not read through a Queue; use Queue.{method}(job.id)",
                          method=method, job_id=job.id)  # fmt: skip
    return queue


def attach(job: Job, queue: Any) -> Job:
    """Give ``job`` its Queue back-reference (what ``Queue``'s reads call)."""
    _set_handle(job, queue)
    return job


def attach_all(jobs: list[Job], queue: Any) -> list[Job]:
    """:func:`attach` each of ``jobs`` (one slot store per job); return ``jobs``."""
    for job in jobs:
        _set_handle(job, queue)
    return jobs


@dataclass(frozen=True, slots=True)
class Job(_Handle):
    """A snapshot of a job as its backend knows it.

    A Job returned by a Queue also carries that Queue, so the per-job operations can be
    called on it (``job.promote()`` is ``queue.promote(job.id)``; docs/jobs.md). They
    never change this snapshot: :meth:`refresh` reads a new one.
    """

    id: JobId
    queue: str
    name: str
    data: Any
    state: JobState
    opts: JobOptions
    attempts: int = 0  # attempts started so far (the fence of the current lease)
    created_at: int = 0
    run_at: int = 0
    started_at: int | None = None
    finished_at: int | None = None
    progress: int = 0
    result: Any = None
    error: str | None = None
    reason: FailureReason | None = None
    history: tuple[Attempt, ...] = ()
    stalls: int = 0

    @property
    def priority(self) -> int:
        return self.opts.priority

    @property
    def max_attempts(self) -> int:
        return self.opts.attempts

    # -- methods delegating to the Queue the job was read through (DetachedJob without)
    def refresh(self) -> Job:
        """Read the job again; :raises JobNotFound: it is gone."""
        job: Job | None = _queue_of(self, "get_job").get_job(self.id)
        if job is None:
            raise JobNotFound(f"no job {self.id!r}", job_id=self.id)
        return job

    def get_state(self) -> JobState:
        return _queue_of(self, "get_state").get_state(self.id)  # type: ignore[no-any-return]

    def wait(self, timeout: float | None = 30.0) -> Any:
        """Wait until the job finishes and return its result (``Queue.wait``)."""
        return _queue_of(self, "wait").wait(self.id, timeout)

    def remove(self) -> bool:
        return bool(_queue_of(self, "remove").remove(self.id))

    def retry(self) -> None:
        _queue_of(self, "retry").retry(self.id)

    def promote(self) -> None:
        _queue_of(self, "promote").promote(self.id)

    def change_priority(self, priority: int) -> None:
        _queue_of(self, "change_priority").change_priority(self.id, priority)

    def change_delay(self, delay: int) -> None:
        _queue_of(self, "change_delay").change_delay(self.id, delay)

    def update(self, data: Any) -> None:
        """Replace the job's data (this snapshot keeps the old; see :meth:`refresh`)."""
        _queue_of(self, "update").update(self.id, data)

    def discard(self) -> None:
        _queue_of(self, "discard").discard(self.id)

    def cancel(self) -> None:
        _queue_of(self, "cancel").cancel(self.id)

    def update_progress(self, progress: int) -> None:
        _queue_of(self, "update_progress").update_progress(self.id, progress)

    def log(self, line: str) -> None:
        _queue_of(self, "add_log").add_log(self.id, line)

    def get_logs(self) -> list[str]:
        return _queue_of(self, "get_logs").get_logs(self.id)  # type: ignore[no-any-return]

    def clear_logs(self, keep: int = 0) -> None:
        _queue_of(self, "clear_logs").clear_logs(self.id, keep)


_set_handle = _Handle._queue.__set__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Lease:
    """A job handed to one owner until ``expires_at``, guarded by a fence.

    The fence is the pair (``token``, ``attempt``): complete / fail / extend act
    only while both still match the job's record.
    """

    job: Job
    token: str
    attempt: int
    expires_at: int
    owner: str = ""

    @property
    def id(self) -> JobId:
        return self.job.id


@dataclass(frozen=True, slots=True)
class DlqEntry:
    """A job in the dead-letter queue, with why it is there and its attempts."""

    job: Job
    reason: FailureReason
    error: str | None
    history: tuple[Attempt, ...]
    entered_at: int
    auto_retries: int = 0
