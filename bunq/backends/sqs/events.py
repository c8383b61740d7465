"""Lambda SQS event-source records, the SQS side: decode, park, dead-letter, move.

What the event-source driver (:mod:`bunq.sqs_events`) needs from the backend:
:func:`prepare_record` decodes a record and deals with the ones that must not
run now (not due, dead, poison); :func:`apply_decision` carries out the retry/DLQ
policy's decision for a failed record through its receipt handle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import ValidationError
from ...job import FailureReason, Job
from ...policy import FailDecision
from .codec import BASE, DUE, decode_record, read_number
from .config import bunq_name, name_of_arn
from .moves import MAX_VISIBILITY_S, Copy, copy_attrs, dead_attrs, delay_split

if TYPE_CHECKING:
    from .backend import SQSBackend


@dataclass(frozen=True, slots=True)
class Prepared:
    """A record made ready: the job to run, or None and how to report the record."""

    job: Job | None
    report: bool = False  # True: put it in batchItemFailures (keep it in the queue)


def record_queue(backend: SQSBackend, record: Mapping[str, Any]) -> str:
    """Return the bunq queue a record came from (by its eventSourceARN; no API call)."""
    _, name = name_of_arn(str(record.get("eventSourceARN", "")))
    return bunq_name(backend.cfg, name) or name


def url_for_arn(arn: str) -> str:
    """Return the ``sqs://`` URL of the queue an event-source ARN names.

    What a handler opens for a mapping's queue: ``connect(url_for_arn(arn))``.
    """
    partition, region = arn.split(":")[1], arn.split(":")[3]
    account, name = name_of_arn(arn)
    domain = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return f"sqs://sqs.{region}.{domain}/{account}/{name}"


def prepare_record(backend: SQSBackend, record: Mapping[str, Any]) -> Prepared:
    """Decode a record; deal with the ones that must not run now (not due, dead, poison).

    A record that runs costs no API call here; the others cost one or two.
    """
    queue, now = record_queue(backend, record), backend.clock()
    body, handle = str(record.get("body", "")), str(record.get("receiptHandle", ""))
    try:
        job = decode_record(record, queue, now)
    except ValidationError as exc:
        info = backend.api.info(queue)
        if info.dlq_url is None:
            return Prepared(None, report=True)
        copy = Copy(body, dead_attrs(FailureReason.UNKNOWN, str(exc), 0, 0, now))
        backend.moves.dead_letter(info, handle, copy, probe=False, delete=False)
        return Prepared(None)
    attrs = record.get("messageAttributes")
    base, due = read_number(attrs, BASE) or 0, read_number(attrs, DUE)
    if due is not None:
        info = backend.api.info(queue)
        if due - now > 900_000:
            backend.moves.hide(info, handle, min(math.ceil((due - now) / 1000), MAX_VISIBILITY_S))
            return Prepared(None, report=True)
        delay_s, _ = delay_split(max(due - now, 0), now)
        copy = Copy(body, copy_attrs(base, None), delay_s, job.opts.group)
        backend.moves.send(info.url, info.fifo, [copy], info.name)
        return Prepared(None)
    ttl = job.opts.ttl
    if ttl is not None and job.created_at + ttl <= now:
        dead = (FailureReason.TTL_EXPIRED, "ttl expired before the job started")
    elif job.attempts > job.opts.attempts:
        dead = (FailureReason.STALLED, f"attempt {job.attempts - 1} ended without an outcome")
    else:
        return Prepared(job)
    copy = Copy(body, dead_attrs(dead[0], dead[1], job.attempts - 1, 0, now), 0, job.opts.group)
    backend.moves.dead_letter(backend.api.info(queue), handle, copy, probe=False, delete=False)
    return Prepared(None)


def apply_decision(backend: SQSBackend, record: Mapping[str, Any], job: Job,
                   decision: FailDecision, error: str | None, duration_ms: int,
                   now: int) -> bool:  # fmt: skip
    """Carry out a failed record's decision with SQS moves; return True to report it.

    Dead: a copy to the DLQ (unless ``remove_on_fail``). Retry: hidden until its
    backoff ends (reported), or past the 12 h cap a copy carrying its due time. A
    given-back attempt (DelayedError) on a standard queue: a copy, attempt unspent.
    """
    info = backend.api.info(record_queue(backend, record))
    body, handle = str(record.get("body", "")), str(record.get("receiptHandle", ""))
    if decision.kind == "dlq":
        if not job.opts.remove_on_fail:
            attrs = dead_attrs(decision.reason, error, job.attempts, duration_ms, now)
            backend.moves.dead_letter(info, handle, Copy(body, attrs, 0, job.opts.group),
                                      probe=False, delete=False)  # fmt: skip
        return False
    wait_ms = max(decision.run_at - now, 0)
    base = job.attempts - 1 if decision.kind == "delay" else job.attempts
    if decision.kind == "retry" or info.fifo:
        try:
            backend.moves.hide(info, handle, math.ceil(wait_ms / 1000))
            return True
        except ValidationError:  # past the 12 h cap: a copy carries the due time
            if info.fifo:
                return True
    delay_s, due = delay_split(wait_ms, now)
    backend.moves.send(
        info.url, info.fifo, [Copy(body, copy_attrs(base, due), delay_s, job.opts.group)], info.name
    )
    return False
