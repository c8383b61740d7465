"""What the Lambda and Google Cloud adapters share: runtime, event options, logging.

The adapters stay thin: each validates its platform's event shape, computes
the deadline from what the platform tells it, and calls :func:`run_tick`
(:func:`bunq.tick.tick`, looping while a tick fills its batch) or
:func:`run_records` (an SQS batch).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypedDict, cast

from bunq import logs
from bunq.backends import connect
from bunq.backends.base import Backend, check_queue_name
from bunq.errors import BunqError, ConfigError
from bunq.execution import Handler
from bunq.settings import Settings
from bunq.tick import TickResult, load_handler, tick

if TYPE_CHECKING:
    from bunq.backends.sqs import SQSBackend

log = logging.getLogger("bunq.handler")
DEFAULT_MAX = 100
# CloudWatch embedded metric format: the tick's result line is also a set of metrics
# (namespace bunq, dimension queue) that alarms can watch without a PutMetricData call.
EMF_METRICS = (("succeeded", "Count"), ("failed", "Count"), ("moved_to_dlq", "Count"),
               ("unsettled", "Count"), ("stale", "Count"),
               ("duration_ms", "Milliseconds"))  # fmt: skip
# The SQS event-source handler's batch line: records (``failed``: those reported back to
# SQS), what the jobs did, and each job's run time (a list: CloudWatch computes statistics).
SQS_EMF_METRICS = (("records", "Count"), ("failed", "Count"), ("ran", "Count"),
                   ("succeeded", "Count"), ("jobs_failed", "Count"), ("moved_to_dlq", "Count"),
                   ("unsettled", "Count"), ("duration_ms", "Milliseconds"),
                   ("job_duration_ms", "Milliseconds"))  # fmt: skip
DEFAULT_SAFETY_MS = 3000
# The EventBridge rule envelope and Scheduler context attributes: accepted, not used.
ENVELOPE = frozenset({"version", "id", "detail-type", "source", "account", "time", "region",
                      "resources", "detail", "scheduled_time", "execution_id", "attempt",
                      "schedule_arn"})  # fmt: skip


class TickEvent(TypedDict, total=False):
    """A scheduled tick's options (the schedule's ``Input``); every key is optional."""

    queue: str  # default BUNQ_QUEUE
    max: int  # jobs leased per tick (default 100)
    lease_ms: int  # lease per job (default BUNQ_LEASE_MS)
    concurrency: int  # jobs at once (default 1)
    loop: bool  # tick again while each tick fills its batch (default true)
    safety_ms: int  # stop leasing this long before the platform's deadline (default 3000)
    budget_ms: int  # the time budget where the platform does not tell it (Google Cloud)
    scheduled_time: str  # EventBridge Scheduler <aws.scheduler.scheduled-time>, logged


class TickResponse(TypedDict):
    """:class:`bunq.tick.TickResult` as a dict, plus the queue."""

    queue: str
    leased: int
    succeeded: int
    failed: int
    stale: int
    unsettled: int
    moved_to_dlq: int
    may_have_more: bool
    queue_depth: int | None
    released: int
    cron_fired: int
    swept: int
    stopped: str
    duration_ms: int
    ticks: int


class SqsRecord(TypedDict, total=False):
    """One record of an SQS event-source batch (the fields bunq reads)."""

    messageId: str
    body: str  # a job: base64 msgpack (bunq's SQSBackend.add) or JSON {"name", "data", "opts"}
    receiptHandle: str
    attributes: dict[str, str]  # ApproximateReceiveCount, SentTimestamp, MessageGroupId (FIFO)
    messageAttributes: dict[str, dict[str, str]]  # bunq-base, bunq-due
    eventSourceARN: str


class SqsEvent(TypedDict):
    """An SQS event-source batch (up to the mapping's BatchSize records)."""

    Records: list[SqsRecord]


class BatchItemFailure(TypedDict):
    itemIdentifier: str


class SqsResponse(TypedDict):
    """The partial-batch answer (needs ``FunctionResponseTypes: [ReportBatchItemFailures]``)."""

    batchItemFailures: list[BatchItemFailure]


class Runtime:
    """What a container builds once: settings, the imported handler, the backend.

    The backend opens on first use; the SQS handler opens an SQS backend per
    event-source queue instead (unless BUNQ_BACKEND is ``sqs://``).
    """

    def __init__(self, settings: Settings, handler: Handler) -> None:
        self.settings, self.handler = settings, handler
        self._sqs: dict[str, SQSBackend] = {}

    @classmethod
    def from_env(cls) -> Runtime:
        """Read ``BUNQ_*`` and import ``BUNQ_HANDLER``; ConfigError says what is missing."""
        settings = Settings.from_env()
        # One JSON line per record on stdout: Lambda and Cloud Logging both parse it.
        logs.setup(settings.log_level, "json", sys.stdout)
        return cls(settings, load_handler(settings.handler))

    @cached_property
    def backend_url(self) -> str:
        """BUNQ_BACKEND, else the secret BUNQ_BACKEND_SECRET names (read once per container)."""
        if self.settings.backend is None and self.settings.backend_secret:
            return secret_value(self.settings.backend_secret)
        return self.settings.library_backend()

    @cached_property
    def backend(self) -> Backend:
        return connect(self.backend_url)

    def sqs_backend(self, arn: str) -> SQSBackend:
        """The SQS backend of an event-source queue, opened once per queue.

        BUNQ_BACKEND when it is an ``sqs://`` URL (its endpoint and prefix
        apply), else the queue the ARN names. Opening makes no network call.
        """
        if self.backend_url.startswith("sqs://"):
            return cast("SQSBackend", self.backend)
        backend = self._sqs.get(arn)
        if backend is None:
            from bunq.backends.sqs import url_for_arn

            backend = self._sqs[arn] = cast("SQSBackend", connect(url_for_arn(arn)))
        return backend


def secret_value(ref: str) -> str:
    """The backend URL kept in AWS: a Secrets Manager secret (ARN or name; its string, or
    the ``url`` of a JSON secret) or, as ``ssm:/name``, an SSM SecureString parameter.

    :raises ConfigError: the secret cannot be read or holds no URL (never its value).
    """
    import boto3  # the Lambda runtime has it; elsewhere the sqs extra brings it
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        if ref.startswith("ssm:"):
            param = boto3.client("ssm").get_parameter(Name=ref[4:], WithDecryption=True)
            value = str(param["Parameter"]["Value"])
        else:
            value = str(boto3.client("secretsmanager").get_secret_value(SecretId=ref)
                        .get("SecretString") or "")  # fmt: skip
    except (BotoCoreError, ClientError) as exc:
        raise ConfigError(f"cannot read the backend URL from {ref} ({type(exc).__name__}: "
                          f"{exc})") from None  # fmt: skip
    if value.lstrip().startswith("{"):
        try:
            value = str(json.loads(value).get("url") or "")
        except (ValueError, AttributeError):
            value = ""
    if "://" not in value:
        raise ConfigError(f"{ref} holds no backend URL (a string like postgresql://..., "
                          'or JSON {"url": "postgresql://..."})')  # fmt: skip
    return value.strip()


@dataclass(frozen=True, slots=True)
class TickOptions:
    queue: str
    max: int = DEFAULT_MAX
    lease_ms: int = 30_000
    concurrency: int = 1
    loop: bool = True
    safety_ms: int = DEFAULT_SAFETY_MS
    budget_ms: int | None = None


def tick_options(event: object, settings: Settings) -> TickOptions:
    """Validate a tick event up front.

    :raises ValueError: not an object, an unknown key, a bad value, or no queue
        (with what to put where).
    """
    if event is None:
        event = {}
    if not isinstance(event, Mapping):
        raise ValueError(f"the tick event must be a JSON object, got {type(event).__name__}")
    unknown = set(event) - set(TickEvent.__annotations__) - ENVELOPE
    if unknown:
        raise ValueError(f"unknown tick event keys {sorted(unknown)}; "
                         f"known: {sorted(TickEvent.__annotations__)}")  # fmt: skip
    queue = event.get("queue") or settings.queue
    if not queue:
        raise ValueError(
            'no queue: put {"queue": "<name>"} in the schedule input, or set BUNQ_QUEUE'
        )
    values: dict[str, Any] = {"queue": check_queue_name(queue), "lease_ms": settings.lease_ms}
    for key in ("max", "lease_ms", "concurrency", "safety_ms", "budget_ms"):
        if key in event:
            v, least = event[key], 0 if key == "safety_ms" else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < least:
                raise ValueError(f"tick event {key!r} must be a positive integer, got {v!r}")
            values[key] = v
    if not isinstance(event.get("loop", True), bool):
        raise ValueError(f"tick event 'loop' must be true or false, got {event['loop']!r}")
    return TickOptions(**values, loop=event.get("loop", True))


def log_json(message: str, level: str = "INFO", **fields: Any) -> None:
    """Log one record in bunq's schema (:mod:`bunq.logs`) with ``fields`` beside it."""
    log.log(logging.getLevelName(level), message, extra=fields)


def emf(queue: str, metrics: tuple[tuple[str, str], ...] = EMF_METRICS) -> dict[str, Any]:
    """The ``_aws`` member that makes a log line carry CloudWatch metrics (EMF)."""
    return {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": [{
        "Namespace": "bunq", "Dimensions": [["queue"]],
        "Metrics": [{"Name": name, "Unit": unit} for name, unit in metrics]}]}  # fmt: skip


def run_tick(rt: Runtime, opts: TickOptions, remaining_ms: int | None, *, metrics: bool = False,
             **log_fields: Any) -> TickResponse:  # fmt: skip
    """Tick (looping if asked) until ``remaining_ms - safety_ms``; log and return the result.

    ``metrics``: the result line carries CloudWatch EMF metrics (the Lambda handler).
    """
    budget = remaining_ms if remaining_ms is not None else opts.budget_ms
    deadline = None if budget is None else max(budget - opts.safety_ms, 0)
    try:
        result: TickResult = tick(opts.queue, rt.handler, rt.backend, max=opts.max,
                                  lease_ms=opts.lease_ms, concurrency=opts.concurrency,
                                  deadline_ms=deadline, loop_while_more=opts.loop)  # fmt: skip
    except Exception as exc:
        log_json("bunq tick failed", "ERROR", queue=opts.queue, error=type(exc).__name__,
                 detail=str(exc), **log_fields)  # fmt: skip
        raise
    out = cast(TickResponse, {"queue": opts.queue, **result.to_dict()})
    level = "ERROR" if result.unsettled else "WARNING" if result.stale else "INFO"
    if metrics:
        log_fields["_aws"] = emf(opts.queue)
    log_json("bunq tick", level, **out, **log_fields)
    return out


def sqs_records(event: object) -> list[SqsRecord]:
    """Return the records of an SQS event; ValueError if it is not one."""
    records = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(records, list) or not all(
        isinstance(r, Mapping) and "messageId" in r and "body" in r for r in records
    ):
        raise ValueError("not an SQS event: expected {'Records': [{'messageId', 'body', ...}]}; "
                         "wire sqs_handler to an SQS event source mapping")  # fmt: skip
    return cast(list[SqsRecord], records)


def run_records(rt: Runtime, records: list[SqsRecord], *, metrics: bool = False,
                **log_fields: Any) -> SqsResponse:  # fmt: skip
    """Run each record's job under bunq's retry/DLQ policy; report what SQS must redeliver.

    A job that fails with attempts left is hidden for its backoff and reported;
    a dead one is moved to the DLQ with its reason and not reported (Lambda
    deletes it); see :mod:`bunq.sqs_events`. On a FIFO queue, once a
    record fails, the rest of its message group is reported unrun (order kept).
    ``metrics``: the batch line carries CloudWatch EMF metrics (the Lambda handler).
    """
    from bunq.sqs_events import Tally  # boto3: on first SQS use

    start, tally = time.perf_counter(), Tally()
    failed: list[BatchItemFailure] = []
    stopped: set[str] = set()  # FIFO groups with a failed record in this batch
    for rec in records:
        group = (rec.get("attributes") or {}).get("MessageGroupId")
        report = group is not None and group in stopped
        if not report:
            report = _run_record(rt, rec, tally)
        if report:
            failed.append({"itemIdentifier": rec["messageId"]})
            if group is not None:
                stopped.add(group)
    fields: dict[str, Any] = {"records": len(records), "failed": len(failed)}
    if metrics:
        queue = str(records[0].get("eventSourceARN", "")).rsplit(":", 1)[-1] if records else ""
        fields = {"queue": queue, "records": len(records), "failed": len(failed),
                  "ran": tally.ran, "succeeded": tally.succeeded, "jobs_failed": tally.failed,
                  "moved_to_dlq": tally.moved_to_dlq, "unsettled": tally.unsettled,
                  "duration_ms": int((time.perf_counter() - start) * 1000),
                  "job_duration_ms": tally.durations,
                  "_aws": emf(queue, SQS_EMF_METRICS)}  # fmt: skip
    level = "ERROR" if tally.unsettled else "INFO"
    log_json("bunq sqs batch", level, **fields, **log_fields)
    return {"batchItemFailures": failed}


def _run_record(rt: Runtime, rec: SqsRecord, tally: Any) -> bool:
    """Prepare, run and settle one record; True: report it (SQS redelivers it)."""
    from bunq.sqs_events import run_record

    try:
        return run_record(rt.sqs_backend(rec.get("eventSourceARN", "")), rec, rt.handler, tally)
    except BunqError as exc:  # SQS unreachable, or a bad ARN: leave it to SQS's redelivery
        tally.unsettled += 1
        log_json("record not settled", "ERROR", message_id=rec["messageId"],
                 error=type(exc).__name__, detail=str(exc))  # fmt: skip
        return True
