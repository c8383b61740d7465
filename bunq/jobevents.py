"""Job events: what happened to a job (or a queue), as every backend stores and reads it.

A :class:`JobEvent` is published by the driver that made the change (``Queue``,
``Worker``, ``tick()``, the settler) to the backend's event log and read by
:class:`bunq.QueueEvents` and ``queue.wait()``. Its ``data`` depends on the kind:

=============  ==================================================================
kind           data
=============  ==================================================================
added          ``name``
waiting        —
delayed        ``delay`` (ms from now)
active         ``attempt``
progress       ``progress``
completed      ``result`` (left out when it cannot be encoded)
failed         ``error``, ``reason``, ``will_retry``, ``attempt``
retried        ``run_at``
stalled        —
removed        ``prev`` (the state it left)
cancelled      ``prev`` (``waiting``, ``delayed`` or ``active``)
drained        ``count`` (queue-wide: ``job_id`` is ``""``)
paused         — (queue-wide)
resumed        — (queue-wide)
=============  ==================================================================
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .codec import pack, unpack
from .errors import ValidationError
from .job import FailureReason, Job, JobState, Lease
from .policy import FailDecision


class EventKind(str, enum.Enum):
    ADDED = "added"
    WAITING = "waiting"
    DELAYED = "delayed"
    ACTIVE = "active"
    PROGRESS = "progress"
    COMPLETED = "completed"
    FAILED = "failed"
    RETRIED = "retried"
    STALLED = "stalled"
    REMOVED = "removed"
    CANCELLED = "cancelled"
    DRAINED = "drained"
    PAUSED = "paused"
    RESUMED = "resumed"


_KINDS = {k.value: k for k in EventKind}
FINAL_KINDS = frozenset({EventKind.COMPLETED, EventKind.CANCELLED, EventKind.REMOVED})


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One event; ``ts`` is epoch ms (the publisher's clock), ``job_id`` ``""`` for a
    queue-wide event (drained, paused, resumed)."""

    kind: EventKind
    queue: str
    job_id: str
    ts: int
    data: dict[str, Any] = field(default_factory=dict)

    def to_blob(self) -> bytes:
        """Encode for an event log; a value that cannot be encoded is left out."""
        try:
            return pack([self.kind.value, self.job_id, self.ts, self.data], "event")
        except ValidationError:
            data = {k: v for k, v in self.data.items() if k != "result"}
            return pack([self.kind.value, self.job_id, self.ts, data], "event")

    @classmethod
    def from_blob(cls, queue: str, blob: bytes) -> JobEvent | None:
        """Decode an event of ``queue``; None for one this version does not know."""
        try:
            kind, job_id, ts, data = unpack(blob)
        except (ValidationError, ValueError, TypeError):
            return None
        k = _KINDS.get(kind)
        return None if k is None else cls(k, queue, str(job_id), int(ts), dict(data or {}))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{event, queue, job_id, ts, **data}``."""
        return {"event": self.kind.value, "queue": self.queue, "job_id": self.job_id,
                "ts": self.ts, **self.data}  # fmt: skip


def added_events(jobs: Sequence[Job], now: int) -> list[JobEvent]:
    """``added`` then ``waiting`` or ``delayed`` for each job an add stored."""
    out = []
    for j in jobs:
        out.append(JobEvent(EventKind.ADDED, j.queue, j.id, now, {"name": j.name}))
        if j.state is JobState.DELAYED:
            out.append(JobEvent(EventKind.DELAYED, j.queue, j.id, now,
                                {"delay": max(j.run_at - now, 0)}))  # fmt: skip
        elif j.state is JobState.WAITING:
            out.append(JobEvent(EventKind.WAITING, j.queue, j.id, now))
    return out


def active_events(leases: Sequence[Lease], now: int) -> list[JobEvent]:
    return [JobEvent(EventKind.ACTIVE, x.job.queue, x.job.id, now, {"attempt": x.job.attempts})
            for x in leases]  # fmt: skip


def failed_events(job: Job, error: str | None, decision: FailDecision, now: int) -> list[JobEvent]:
    """A recorded failure: ``failed`` (+ ``retried`` when it runs again); a reschedule
    that gives the attempt back (DelayedError) is ``delayed``."""
    q = job.queue
    if decision.kind == "delay":
        return [JobEvent(EventKind.DELAYED, q, job.id, now,
                         {"delay": max(decision.run_at - now, 0)})]  # fmt: skip
    will_retry = not decision.is_dead
    data = {"error": error, "reason": decision.reason.value, "will_retry": will_retry,
            "attempt": job.attempts}  # fmt: skip
    if decision.reason is FailureReason.CANCELLED:
        return [JobEvent(EventKind.CANCELLED, q, job.id, now, {"prev": "active"})]
    out = [JobEvent(EventKind.FAILED, q, job.id, now, data)]
    if will_retry:
        out.append(JobEvent(EventKind.RETRIED, q, job.id, now, {"run_at": decision.run_at}))
    return out
