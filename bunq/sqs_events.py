"""The Lambda SQS event-source driver: run each record's job under bunq's policy.

Under an event-source mapping, Lambda receives and deletes the messages: a
record reported in ``batchItemFailures`` stays in the queue, the others are
deleted when the function returns. :func:`run_record` keeps bunq's semantics
inside that contract, with the execution core every driver shares
(:mod:`bunq.execution`: the handler call, the retry/DLQ decision) and the
backend's record handling (:mod:`bunq.backends.sqs.events`):

| outcome | what bunq does | reported as failed |
| --- | --- | --- |
| succeeded | nothing (Lambda deletes it) | no |
| failed, retries left | ChangeMessageVisibility to the backoff | **yes** (back after it) |
| failed, retry delay past the 12 h cap | a copy carrying its due time is sent | no |
| DelayedError (standard queue) | a copy with the attempt given back | no |
| dead (attempts spent, UnrecoverableError, TTL) | a copy to the DLQ, with reason, error | no |
| not due yet (delay past 900 s) | hidden again until due | yes |
| not a bunq job | to the DLQ (reason unknown); without a DLQ left to SQS | no / yes |

Importing this module imports boto3 (the ``sqs`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import tracing
from .backends.sqs import SQSBackend, apply_decision, prepare_record
from .execution import (
    Handler,
    JobContext,
    Outcome,
    decision_for,
    describe,
    log_failure,
    run_sync,
    takes_context,
)
from .job import Job, Settle

__all__ = ["Tally", "run_record", "settle_record"]

MAX_DURATIONS = 100  # CloudWatch EMF takes at most 100 values per metric and line


@dataclass(slots=True)
class Tally:
    """What :func:`run_record` did over a batch (the SQS handler's EMF metrics):
    jobs run, how they ended, dead-lettered ones, and the first 100 run times (ms)."""

    ran: int = 0
    succeeded: int = 0
    failed: int = 0
    moved_to_dlq: int = 0
    unsettled: int = 0
    durations: list[int] = field(default_factory=list)


def settle_record(backend: SQSBackend, record: Mapping[str, Any], job: Job,
                  outcome: Outcome, tally: Tally | None = None) -> bool:  # fmt: skip
    """Apply bunq's retry/DLQ policy to a run record; return True to report it as failed.

    A failure is logged as every driver logs it (``bunq.jobs``: what happens next).
    """
    if outcome.ok:
        return False
    now = backend.clock()
    decision = decision_for(job, outcome, now)
    report = apply_decision(backend, record, job, decision, describe(outcome.error),
                            outcome.duration_ms, now)  # fmt: skip
    log_failure(job, outcome, decision, Settle.OK, now)
    if tally is not None and decision.is_dead:
        tally.moved_to_dlq += 1
    return report


def run_record(backend: SQSBackend, record: Mapping[str, Any], handler: Handler,
               tally: Tally | None = None) -> bool:  # fmt: skip
    """Prepare, run and settle one record; return True to report it in batchItemFailures.

    ``tally``: counts the run (and its outcome) into it.
    """
    prepared = prepare_record(backend, record)
    if prepared.job is None:
        return prepared.report
    job = prepared.job
    ctx = JobContext(job, None) if takes_context(handler) else None  # no lease: SQS owns it
    outcome = run_sync(tracing.traced(handler), job, None, ctx, ctx is not None)
    if tally is not None:
        tally.ran += 1
        if outcome.ok:
            tally.succeeded += 1
        else:
            tally.failed += 1
        if len(tally.durations) < MAX_DURATIONS:
            tally.durations.append(outcome.duration_ms)
    return settle_record(backend, record, job, outcome, tally)
