"""Jobs on the wire: bunqueue's job shape, and bunq's own lossless one (``Bq*`` commands).

Pure functions (no I/O, no clock), shared by the server and
:class:`bunq.backends.remote.RemoteBackend`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .errors import ProtocolError
from .job import (
    Attempt,
    Backoff,
    DlqEntry,
    FailureReason,
    Job,
    JobOptions,
    JobState,
    UniqueStrategy,
)
from .protocol import js_safe
from .stacks import split

# --------------------------------------------------------------------- bunqueue job shape


def _n(value: int | None) -> int | float | None:
    """An integer field that may exceed int32: float64 then (the int64 rule)."""
    return value if value is None or -(2**31) <= value <= 2**32 - 1 else float(value)


def _opt_ms(value: int | None) -> float | None:
    return None if value is None else float(value)


def children_ids(data: Any) -> list[str]:
    """A flow parent's children: bunq keeps no list of its own beside ``dependsOn``, so
    this is the ``__childrenIds`` bunqueue's FlowProducers write into the parent's data."""
    ids = data.get("__childrenIds") if type(data) is dict else None
    return [i for i in ids if type(i) is str] if type(ids) is list else []


def _timeline(job: Job) -> list[dict[str, Any]]:
    return [
        {
            "state": "failed",
            "timestamp": float(a.at),
            "error": split(a.error)[0],
            "attempt": a.attempt,
        }
        for a in job.history
    ]


def job_to_wire(job: Job, state: str | None = None, *, with_result: bool = False) -> dict[str, Any]:
    """Return ``job`` with bunqueue's field names; timestamps are float ms.

    The result already follows the int64 rule (user data included), so replies
    made of it can be sent as :class:`~bunq.protocol.Prepared`.

    Fields bunq has no notion of carry bunqueue's neutral values (``tags: []``,
    ``repeat: null`` ...) because its clients read them unconditionally.
    """
    o = job.opts
    b = o.backoff
    reason, stack = split(job.error)
    out: dict[str, Any] = {
        "id": job.id,
        "queue": job.queue,
        "name": job.name,
        "data": js_safe(job.data),
        "priority": o.priority,
        "createdAt": float(job.created_at),
        "runAt": float(job.run_at),
        "startedAt": _opt_ms(job.started_at),
        "completedAt": _opt_ms(job.finished_at),
        # bunqueue counts attempts made before the current run (attemptsMade is 0 on a
        # first run); bunq counts the running attempt too. The fence is in the lock token.
        "attempts": job.attempts - 1 if job.state is JobState.ACTIVE else job.attempts,
        "maxAttempts": o.attempts,
        "backoff": _n(b.delay),
        "backoffConfig": {"type": b.type, "delay": _n(b.delay), "maxDelay": _n(b.cap)},
        "ttl": _n(o.ttl),
        "timeout": _n(o.timeout),
        "uniqueKey": o.unique_key,
        "customId": o.job_id,
        "dependsOn": list(o.depends_on),
        "parentId": o.parent_id,
        "childrenIds": children_ids(job.data),
        "childrenCompleted": 0,
        "tags": [],
        "groupId": o.group,
        "lifo": o.lifo,
        "progress": job.progress,
        "progressMessage": None,
        "stacktrace": stack,  # the last failure's, throw site first
        "removeOnComplete": o.remove_on_complete,
        "removeOnFail": o.remove_on_fail,
        "repeat": None,
        "lastHeartbeat": _opt_ms(job.started_at),
        "stallTimeout": None,
        "stallCount": job.stalls,
        "stackTraceLimit": o.stack_trace_limit,
        "keepLogs": o.keep_logs,
        "sizeLimit": None,
        "failParentOnFailure": o.fail_parent_on_failure,
        "removeDependencyOnFailure": o.remove_dependency_on_failure,
        "continueParentOnFailure": o.continue_parent_on_failure,
        "ignoreDependencyOnFailure": o.ignore_dependency_on_failure,
        "deduplicationTtl": _n(o.unique_ttl),
        "deduplicationExtend": o.unique_strategy is UniqueStrategy.EXTEND,
        "deduplicationReplace": o.unique_strategy is UniqueStrategy.REPLACE,
        "debounceId": None,
        "debounceTtl": None,
        "durable": o.durable,
        "timeline": _timeline(job),
    }
    if state is not None:
        out["state"] = state
    if with_result:
        out["returnvalue"] = js_safe(job.result)
        out["failedReason"] = reason
    return out


# ------------------------------------------------------------ bunq's lossless job shape (Bq*)


def options_to_wire(opts: JobOptions) -> dict[str, Any]:
    """Return the options that differ from the defaults (bunq's own client)."""
    return opts.changed()


def options_from_wire(d: Mapping[str, Any]) -> JobOptions:
    """Validate options sent by a client (raises ValidationError)."""
    return JobOptions.parse(d)


def job_to_bq(job: Job) -> list[Any]:
    """Encode a job for bunq's client: a positional list, lossless."""
    return [
        job.id,
        job.queue,
        job.name,
        job.data,
        job.state.value,
        options_to_wire(job.opts),
        job.attempts,
        job.created_at,
        job.run_at,
        job.started_at,
        job.finished_at,
        job.progress,
        job.result,
        job.error,
        None if job.reason is None else job.reason.value,
        [a.to_dict() for a in job.history],
        job.stalls,
    ]


def _stored_options(d: Mapping[str, Any]) -> JobOptions:
    # Trusted path (the server validated them at admission): skip parse() costs.
    if not d:
        return JobOptions()
    kw = dict(d)
    if "backoff" in kw:
        kw["backoff"] = Backoff(**kw["backoff"])
    if "unique_strategy" in kw:
        kw["unique_strategy"] = UniqueStrategy(kw["unique_strategy"])
    if "depends_on" in kw:
        kw["depends_on"] = tuple(kw["depends_on"])
    return JobOptions(**kw)


def job_from_bq(row: Sequence[Any]) -> Job:
    """Decode :func:`job_to_bq` output (raises ProtocolError on a malformed row)."""
    try:
        (
            jid,
            queue,
            name,
            data,
            state,
            opts,
            attempts,
            created_at,
            run_at,
            started_at,
            finished_at,
            progress,
            result,
            error,
            reason,
            history,
            stalls,
        ) = row
        return Job(
            id=jid,
            queue=queue,
            name=name,
            data=data,
            state=JobState(state),
            opts=_stored_options(opts),
            attempts=attempts,
            created_at=created_at,
            run_at=run_at,
            started_at=started_at,
            finished_at=finished_at,
            progress=progress,
            result=result,
            error=error,
            reason=None if reason is None else FailureReason(reason),
            history=tuple(Attempt.from_dict(a) for a in history),
            stalls=stalls,
        )
    except (TypeError, ValueError, KeyError) as exc:
        raise ProtocolError(f"malformed job in reply: {exc}") from None


def dlq_to_bq(entry: DlqEntry) -> list[Any]:
    return [
        job_to_bq(entry.job),
        entry.reason.value,
        entry.error,
        [a.to_dict() for a in entry.history],
        entry.entered_at,
        entry.auto_retries,
    ]


def dlq_from_bq(row: Sequence[Any]) -> DlqEntry:
    try:
        job, reason, error, history, entered_at, retries = row
        return DlqEntry(
            job_from_bq(job),
            FailureReason(reason),
            error,
            tuple(Attempt.from_dict(a) for a in history),
            entered_at,
            retries,
        )
    except (TypeError, ValueError, KeyError) as exc:
        raise ProtocolError(f"malformed DLQ entry in reply: {exc}") from None
