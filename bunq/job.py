"""The job model: states, failure reasons, options, jobs and leases.

Times are integer milliseconds since the Unix epoch; durations are integer
milliseconds. These enums' values are what backends persist and what goes on
the wire, so they never change.
"""

from __future__ import annotations

import enum
import itertools
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from .errors import ValidationError

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


class FailureReason(str, enum.Enum):
    """Why a job ended up in the dead-letter queue (or why an attempt ended)."""

    EXPLICIT_FAIL = "explicit_fail"
    MAX_ATTEMPTS_EXCEEDED = "max_attempts_exceeded"
    TIMEOUT = "timeout"
    STALLED = "stalled"
    TTL_EXPIRED = "ttl_expired"
    WORKER_LOST = "worker_lost"
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
        self._cache = (-1, "")  # (ms, its formatted part): one attribute, read atomically

    def next(self) -> JobId:
        ms = time.time_ns() // 1_000_000
        c = next(self._count)
        cached = self._cache
        if cached[0] != ms:  # the formatted time part is reused within a millisecond
            cached = self._cache = (ms, f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-7")
        return (
            f"{cached[1]}{(c >> 28) & 0xFFF:03x}-{0x8000 | ((c >> 14) & 0x3FFF):04x}-"
            f"{((c & 0x3FFF) << 34) | self._node:012x}"
        )


new_job_id = _IdSource().next


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
            return value
        if isinstance(value, bool):
            raise ValidationError("backoff must be a number of ms or a mapping", field="backoff")
        if isinstance(value, int):
            return cls("fixed", _non_negative("backoff", value))
        if isinstance(value, Mapping):
            unknown = set(value) - {"type", "delay", "cap", "jitter"}
            if unknown:
                raise ValidationError(f"unknown backoff fields {sorted(unknown)}", field="backoff")
            kind = value.get("type", "exponential")
            if kind not in ("fixed", "exponential"):
                raise ValidationError(f"backoff type {kind!r} is not fixed|exponential")
            jitter = value.get("jitter", 0.0)
            if not isinstance(jitter, (int, float)) or not 0.0 <= jitter <= 1.0:
                raise ValidationError("backoff jitter must be in [0, 1]", field="backoff")
            cap = value.get("cap")
            return cls(
                kind,
                _non_negative("backoff.delay", value.get("delay", 1000)),
                None if cap is None else _non_negative("backoff.cap", cap),
                float(jitter),
            )
        raise ValidationError("backoff must be a number of ms or a mapping", field="backoff")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "delay": self.delay, "cap": self.cap, "jitter": self.jitter}


def _non_negative(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{name} must be a non-negative integer (ms)", field=name)
    return value


def _opt_str(name: str, value: object, max_len: int = 256) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise ValidationError(f"{name} must be a non-empty string of at most {max_len}", field=name)
    return value


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

    @classmethod
    def parse(cls, opts: Mapping[str, Any]) -> JobOptions:
        """Validate keyword options; raise ValidationError naming the bad one."""
        if not opts:
            return DEFAULT_OPTIONS
        unknown = set(opts) - _OPTION_NAMES
        if unknown:
            raise ValidationError(f"unknown job options {sorted(unknown)}", options=sorted(unknown))
        o = dict(opts)
        prio = o.get("priority", 0)
        if isinstance(prio, bool) or not isinstance(prio, int) or abs(prio) > 2**31:
            raise ValidationError("priority must be an integer in ±2**31", field="priority")
        attempts = o.get("attempts", 3)
        if (
            isinstance(attempts, bool)
            or not isinstance(attempts, int)
            or not 1 <= attempts <= 10_000
        ):
            raise ValidationError("attempts must be an integer in [1, 10000]", field="attempts")
        for name in ("lifo", "remove_on_complete", "remove_on_fail", "durable"):
            if not isinstance(o.get(name, False), bool):
                raise ValidationError(f"{name} must be a bool", field=name)
        deps = o.get("depends_on", ())
        if isinstance(deps, str) or not isinstance(deps, Sequence):
            raise ValidationError("depends_on must be a list of job ids", field="depends_on")
        try:
            strategy = UniqueStrategy(o.get("unique_strategy", UniqueStrategy.REJECT))
        except ValueError:
            raise ValidationError("unique_strategy must be reject|extend|replace") from None
        return cls(
            priority=prio,
            delay=_non_negative("delay", o.get("delay", 0)),
            attempts=attempts,
            backoff=Backoff.parse(o.get("backoff", Backoff())),
            job_id=_opt_str("job_id", o.get("job_id")),
            unique_key=_opt_str("unique_key", o.get("unique_key"), 1024),
            unique_strategy=strategy,
            unique_ttl=None
            if o.get("unique_ttl") is None
            else _non_negative("unique_ttl", o["unique_ttl"]),
            lifo=o.get("lifo", False),
            ttl=None if o.get("ttl") is None else _non_negative("ttl", o["ttl"]),
            timeout=None if o.get("timeout") is None else _non_negative("timeout", o["timeout"]),
            depends_on=tuple(_opt_str("depends_on[]", d) or "" for d in deps),
            remove_on_complete=o.get("remove_on_complete", False),
            remove_on_fail=o.get("remove_on_fail", False),
            group=_opt_str("group", o.get("group")),
            durable=o.get("durable", False),
            parent_id=_opt_str("parent_id", o.get("parent_id")),
        )

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
        }  # fmt: skip


DEFAULT_OPTIONS = JobOptions()
_OPTION_NAMES = frozenset(f.name for f in fields(JobOptions))

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


@dataclass(frozen=True, slots=True)
class Job:
    """A snapshot of a job as its backend knows it."""

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
