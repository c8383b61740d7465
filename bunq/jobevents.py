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
from .stacks import split


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

    def row(self) -> list[Any]:
        return [self.kind.value, self.job_id, self.ts, self.data]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{event, queue, job_id, ts, **data}``."""
        return {"event": self.kind.value, "queue": self.queue, "job_id": self.job_id,
                "ts": self.ts, **self.data}  # fmt: skip


def pack_events(events: Sequence[JobEvent]) -> bytes:
    """Encode events of one queue as one record (an event log stores a batch per row);
    a value that cannot be encoded (a result) is left out."""
    try:
        return pack([e.row() for e in events], "event")
    except ValidationError:
        return pack([e.row() for e in (_encodable(e) for e in events)], "event")


def _encodable(e: JobEvent) -> JobEvent:
    try:
        pack(e.data, "event")
        return e
    except ValidationError:
        return JobEvent(e.kind, e.queue, e.job_id, e.ts,
                        {k: v for k, v in e.data.items() if k != "result"})  # fmt: skip


def unpack_events(queue: str, blob: bytes) -> list[JobEvent]:
    """Decode a record of :func:`pack_events` (kinds this version does not know are skipped)."""
    try:
        rows = unpack(blob)
    except (ValidationError, ValueError, TypeError):
        return []
    out = []
    for r in rows if isinstance(rows, list) else ():
        try:
            kind, job_id, ts, data = r
        except (TypeError, ValueError):
            continue
        k = _KINDS.get(kind)
        if k is not None:
            out.append(JobEvent(k, queue, str(job_id), int(ts), dict(data or {})))
    return out


# -- the wire shape: bunqueue's JobEvent, what bunq serve pushes and webhooks are sent --------
# bunqueue's EventType values (src/domain/types/queue.ts)
PUSHED = "pushed"
PULLED = "pulled"
COMPLETED = "completed"
FAILED = "failed"
RETRIED = "retried"
DELAYED = "delayed"
PROGRESS = "progress"
REMOVED = "removed"
DUPLICATED = "duplicated"
WAITING_CHILDREN = "waiting-children"
DRAINED = "drained"
PAUSED = "paused"
RESUMED = "resumed"
STALLED = "stalled"
CANCELLED = "cancelled"  # bunq's (bunqueue has none: a cancelled running job is failed)


def wire_event(kind: str, queue: str, job_id: str, ts: float, **extra: Any) -> dict[str, Any]:
    """bunqueue's ``JobEvent``: ``{eventType, queue, jobId, timestamp, ...extra}``
    (``timestamp``: epoch ms as a float, never an int64 on the wire)."""
    return {"eventType": kind, "queue": queue, "jobId": job_id, "timestamp": ts, **extra}


def to_wire(ev: JobEvent, job_data: Any = None) -> dict[str, Any] | None:
    """A :class:`JobEvent` in the shape ``bunq serve`` gives its subscribers and webhooks
    (:class:`bunq.server.events.EventHub`): ``added`` is ``pushed``, ``active`` is
    ``pulled``, ``completed`` carries ``data`` (the result), ``failed`` carries ``error``
    (without the stack), ``data`` (``job_data``: the job's data, when the caller has it)
    and ``terminal``. None for ``waiting``, which the server does not send (an add is
    ``pushed`` already)."""
    k, q, jid, ts, d = ev.kind, ev.queue, ev.job_id, float(ev.ts), ev.data
    if k is EventKind.ADDED:
        return wire_event(PUSHED, q, jid, ts)
    if k is EventKind.ACTIVE:
        return wire_event(PULLED, q, jid, ts)
    if k is EventKind.COMPLETED:
        return wire_event(COMPLETED, q, jid, ts, data=d.get("result"))
    if k is EventKind.FAILED:
        reason = split(d.get("error"))[0] or "failed"
        return wire_event(FAILED, q, jid, ts, error=reason, data=job_data,
                          terminal=not d.get("will_retry", False))  # fmt: skip
    if k is EventKind.RETRIED:
        return wire_event(RETRIED, q, jid, ts, prev="failed")
    if k is EventKind.DELAYED:
        return wire_event(DELAYED, q, jid, ts, delay=float(d.get("delay") or 0))
    if k is EventKind.PROGRESS:
        value = d.get("progress")
        return wire_event(PROGRESS, q, jid, ts, progress=value,
                          data={"progress": value, "message": d.get("message")})  # fmt: skip
    if k is EventKind.STALLED:
        return wire_event(STALLED, q, jid, ts, prev="active")
    if k in (EventKind.REMOVED, EventKind.CANCELLED):
        return wire_event(k.value, q, jid, ts, prev=d.get("prev"))
    if k in (EventKind.DRAINED, EventKind.PAUSED, EventKind.RESUMED):
        return wire_event(k.value, q, "", ts)
    return None  # waiting


def by_queue(events: Sequence[JobEvent]) -> dict[str, list[JobEvent]]:
    out: dict[str, list[JobEvent]] = {}
    for e in events:
        out.setdefault(e.queue, []).append(e)
    return out


def added_events(jobs: Sequence[Job], now: int) -> list[JobEvent]:
    """``added`` then ``waiting`` or ``delayed`` for each job an add that started at
    ``now`` stored (a live job it returned for its custom id or unique key is no event)."""
    out = []
    for j in jobs:
        if j.created_at < now and (j.opts.job_id is not None or j.opts.unique_key is not None):
            continue
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
