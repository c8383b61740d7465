"""Settling outcomes: the one path from "the handler returned" to the backend.

:func:`settle_batch` records a batch under each lease's fence: completions in
one ``complete_many`` (each result encoded once, by the backend), failures one
by one through the retry/DLQ policy (:mod:`bunq.policy`). A result the backend
refuses to store fails its attempt as unrecoverable (retrying would be refused
again). A call that meets :class:`~bunq.errors.BackendUnavailable` is retried
briefly; one that never succeeds leaves the job *unsettled*: its lease expires
and it runs again. :func:`give_back` returns leased, unstarted jobs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

from ..backends.base import Backend
from ..backends.eventlog import publish, wants
from ..errors import (
    BackendUnavailable,
    BunqError,
    DelayedError,
    Retry,
    UnrecoverableError,
    ValidationError,
)
from ..job import FailureReason, Job, Lease, Settle
from ..jobevents import EventKind, JobEvent, failed_events
from ..policy import FailDecision, decide_failure
from ..stacks import frames, with_stack
from .context import forget_cancel
from .observe import Observer, notify_given_back, notify_settled
from .run import Outcome

T = TypeVar("T")
Kind = Literal["succeeded", "failed", "stale", "unsettled"]
SETTLE_RETRIES = (0.01, 0.05)  # seconds between settle attempts on BackendUnavailable
log = logging.getLogger("bunq.jobs")


@dataclass(frozen=True, slots=True)
class Settled:
    """How one settle went.

    ``answer``: the backend's (None: it never took the outcome). ``failed``: the
    attempt was a failure; ``dead``: it was dead-lettered.
    """

    answer: Settle | None
    failed: bool = False
    dead: bool = False

    @property
    def kind(self) -> Kind:
        if self.answer is None:
            return "unsettled"
        if self.answer is Settle.STALE:
            return "stale"
        return "failed" if self.failed else "succeeded"


_COMPLETED = {a: Settled(a) for a in (Settle.OK, Settle.STALE, None)}  # one per answer, shared
SUCCEEDED = _COMPLETED[Settle.OK]  # what a batch of completions mostly answers


def decision_for(job: Job, outcome: Outcome, now: int) -> FailDecision:
    """Route a failed outcome through the retry/DLQ policy."""
    err = outcome.error
    if outcome.cancelled:  # queue.cancel(): not a failure to retry
        return FailDecision("dlq", now, FailureReason.CANCELLED)
    if outcome.timed_out:
        return decide_failure(job, now, reason=FailureReason.TIMEOUT)
    if isinstance(err, UnrecoverableError):
        return decide_failure(job, now, unrecoverable=True)
    if isinstance(err, DelayedError):
        return decide_failure(job, now, delay_ms=err.delay_ms, give_back_attempt=True)
    if isinstance(err, Retry):
        return decide_failure(job, now, delay_ms=err.delay_ms)
    return decide_failure(job, now)


def describe(err: BaseException | None) -> str | None:
    if err is None:
        return None
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def failure_text(err: BaseException | None, stack_limit: int) -> str | None:
    """What a failed attempt records: the error, then its traceback (throw site first,
    at most ``stack_limit`` lines) in :mod:`bunq.stacks`' one representation."""
    text = describe(err)
    if err is None or text is None:
        return text
    return with_stack(text, frames(err, text), stack_limit)


def settle_batch(backend: Backend, done: Sequence[tuple[Lease, Outcome]],
                 observer: Observer | None = None) -> list[Settled]:  # fmt: skip
    """Settle a batch (one :class:`Settled` per item, in order): completions share
    one transaction, failures go one by one. ``observer`` sees the batch settled."""
    out = _settle_batch(backend, done)
    notify_settled(observer, done, out)
    return out


def _settle_batch(backend: Backend, done: Sequence[tuple[Lease, Outcome]]) -> list[Settled]:
    oks = [(lease, o.result) for lease, o in done if o.ok]
    try:
        got = retrying(partial(backend.complete_many, oks)) if oks else []
    except ValidationError:  # a result the backend cannot store: find it, one by one
        return [_settle_one(backend, lease, o) for lease, o in done]
    answers: Sequence[Settle | None] = [None] * len(oks) if got is None else got
    if oks and got is not None and wants(backend, EventKind.COMPLETED, oks[0][0].job.queue):
        _completed_events(backend, oks, answers)
    if len(oks) == len(done):
        return [_COMPLETED[a] for a in answers]
    it = iter(answers)
    return [_COMPLETED[next(it)] if o.ok else settle_failure(backend, lease, o)
            for lease, o in done]  # fmt: skip


def _completed_events(backend: Backend, oks: Sequence[tuple[Lease, Any]],
                      answers: Sequence[Settle | None]) -> None:  # fmt: skip
    now = backend.clock()
    publish(backend, [JobEvent(EventKind.COMPLETED, lease.job.queue, lease.job.id, now,
                               {"result": result})
                      for (lease, result), a in zip(oks, answers, strict=True)
                      if a is Settle.OK])  # fmt: skip


def _settle_one(backend: Backend, lease: Lease, o: Outcome) -> Settled:
    """Settle one outcome; a result the backend refuses fails the attempt, unrecoverable."""
    if o.ok:
        try:
            answer = retrying(partial(backend.complete, lease, o.result))
            if answer is Settle.OK and wants(backend, EventKind.COMPLETED, lease.job.queue):
                _completed_events(backend, [(lease, o.result)], [answer])
            return _COMPLETED[answer]
        except ValidationError as exc:
            o = Outcome(False, error=UnrecoverableError(str(exc)), duration_ms=o.duration_ms)
    return settle_failure(backend, lease, o)


def settle_failure(backend: Backend, lease: Lease, outcome: Outcome,
                   observer: Observer | None = None) -> Settled:  # fmt: skip
    """Record one failed attempt under the lease's fence, as the policy decides."""
    try:
        got = retrying(partial(_fail, backend, lease, outcome)) or Settled(None, failed=True)
    except ValidationError as exc:
        log.error("settle failed: %s", exc)
        got = Settled(None, failed=True)
    if observer is not None:
        notify_settled(observer, [(lease, outcome)], [got])
    return got


def _fail(backend: Backend, lease: Lease, outcome: Outcome) -> Settled:
    now = backend.clock()
    decision = decision_for(lease.job, outcome, now)
    error = failure_text(outcome.error, lease.job.opts.stack_trace_limit)
    answer = backend.fail(lease, error, decision, outcome.duration_ms)
    if answer is Settle.OK and wants(backend, EventKind.FAILED, lease.job.queue):
        publish(backend, failed_events(lease.job, error and error.split("\n", 1)[0], decision,
                                       now))  # fmt: skip
    if outcome.cancelled:
        forget_cancel(backend, lease.job)
    log_failure(lease.job, outcome, decision, answer, now)
    return Settled(answer, failed=True, dead=answer is Settle.OK and decision.is_dead)


def retrying(fn: Callable[[], T]) -> T | None:
    """Call ``fn``; retry BackendUnavailable briefly; None (logged) if it never succeeded.

    ValidationError propagates: the caller decides what a refused value means.
    """
    for pause in (*SETTLE_RETRIES, None):
        try:
            return fn()
        except ValidationError:
            raise
        except BunqError as exc:
            if pause is None or not isinstance(exc, BackendUnavailable):
                log.error("settle failed: %s", exc)
                return None
            time.sleep(pause)
    return None  # pragma: no cover


def give_back(backend: Backend, leases: Iterable[Lease],
              reason: FailureReason = FailureReason.UNKNOWN,
              observer: Observer | None = None) -> list[Settle]:  # fmt: skip
    """Return leased-but-unstarted jobs at once, their attempt not spent.

    One answer per lease; a lease the backend could not take back (logged) is left
    to expire, and the sweep recovers it: it counts as given back (OK).
    """
    now, out, given = backend.clock(), [], list(leases)
    for lease in given:
        try:
            out.append(backend.fail(lease, None, FailDecision("delay", now, reason)))
        except BunqError as exc:
            log.warning("could not give back %s: %s", lease.id, exc)
            out.append(Settle.OK)
    notify_given_back(observer, given, out)
    return out


def log_failure(job: Job, outcome: Outcome, decision: FailDecision, answer: Settle,
                now: int) -> None:  # fmt: skip
    """Log a failed attempt: WARNING with what happens next, ERROR when dead-lettered.

    Every field a reader needs to find the job is in the record (``job_id``, ``queue``,
    ``job_name``, ``attempt``, ``error``), and the handler's traceback is attached.
    """
    err = outcome.error
    fields: dict[str, Any] = {
        "job_id": job.id, "queue": job.queue, "job_name": job.name, "attempt": job.attempts,
        "max_attempts": job.max_attempts, "error": describe(err),
        "duration_ms": outcome.duration_ms,
    }  # fmt: skip
    exc_info = (type(err), err, err.__traceback__) if err is not None else None
    wait = max(decision.run_at - now, 0)
    if decision.reason is FailureReason.CANCELLED:
        log.info("job %s cancelled", job.id, extra=fields)
    elif decision.kind == "delay":  # DelayedError: a chosen reschedule, not a failure
        log.info("job %s delayed by its handler for %d ms", job.id, wait, extra=fields)
    elif answer is not Settle.OK:
        log.warning("job %s failed, but its lease was lost: not recorded (%s)", job.id,
                    answer.value, extra=fields, exc_info=exc_info)  # fmt: skip
    elif decision.is_dead:
        log.error("job %s failed and was dead-lettered (%s)", job.id, decision.reason.value,
                  extra={**fields, "reason": decision.reason.value}, exc_info=exc_info)  # fmt: skip
    else:
        log.warning("job %s failed (attempt %d of %d), will run again in %d ms", job.id,
                    job.attempts, job.max_attempts, wait, extra={**fields, "retry_in_ms": wait},
                    exc_info=exc_info)  # fmt: skip
