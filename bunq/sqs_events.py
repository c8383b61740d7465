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
from typing import Any

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

__all__ = ["run_record", "settle_record"]


def settle_record(backend: SQSBackend, record: Mapping[str, Any], job: Job,
                  outcome: Outcome) -> bool:  # fmt: skip
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
    return report


def run_record(backend: SQSBackend, record: Mapping[str, Any], handler: Handler) -> bool:
    """Prepare, run and settle one record; return True to report it in batchItemFailures."""
    prepared = prepare_record(backend, record)
    if prepared.job is None:
        return prepared.report
    job = prepared.job
    ctx = JobContext(job, None) if takes_context(handler) else None  # no lease: SQS owns it
    return settle_record(backend, record, job, run_sync(handler, job, None, ctx, ctx is not None))
