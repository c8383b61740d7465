"""AWS Lambda entry points: a scheduled tick, and an SQS event source.

``handler(event, context)``: target of an EventBridge Scheduler (or rule)
schedule. The event is a :class:`TickEvent` (the schedule's ``Input``, e.g.
``{"queue": "emails", "max": 100}``); BUNQ_BACKEND, BUNQ_HANDLER and
BUNQ_QUEUE come from the environment. Leasing stops ``safety_ms`` (3 s)
before ``context.get_remaining_time_in_millis()`` runs out. Returns a
:class:`TickResponse` and logs it as one JSON line.

``sqs_handler(event, context)``: an SQS event-source mapping with
``ReportBatchItemFailures``. Each record body is a job (bunq's base64
msgpack, or JSON ``{"name", "data", "opts"}``), run under bunq's retry/DLQ
policy (:mod:`bunq.sqs_events`); returns ``{"batchItemFailures":
[{"itemIdentifier": messageId}]}`` for the records SQS must redeliver (retries
after their backoff), while dead jobs go to the DLQ with their reason.

The runtime (settings, imported handler, backend) is built on the first
invocation and reused by the container; importing this module connects to
nothing. Tests reset it with ``runtime.cache_clear()``.
"""

from __future__ import annotations

import functools
from typing import Protocol

from handlers import _common
from handlers._common import Runtime, SqsEvent, SqsResponse, TickEvent, TickResponse

__all__ = ["handler", "runtime", "sqs_handler", "TickEvent", "TickResponse", "SqsEvent",
           "SqsResponse"]  # fmt: skip


class LambdaContext(Protocol):
    """The part of the Lambda context bunq reads."""

    aws_request_id: str

    def get_remaining_time_in_millis(self) -> int: ...


@functools.cache
def runtime() -> Runtime:
    """The container's runtime, built once (ConfigError names a missing BUNQ_* setting)."""
    return Runtime.from_env()


def handler(event: TickEvent, context: LambdaContext) -> TickResponse:
    """Drain the queue until shortly before the invocation's deadline."""
    rt = runtime()
    opts = _common.tick_options(event, rt.settings)
    return _common.run_tick(rt, opts, context.get_remaining_time_in_millis(), metrics=True,
                            request_id=getattr(context, "aws_request_id", None),
                            scheduled_time=(event or {}).get("scheduled_time"))  # fmt: skip


def sqs_handler(event: SqsEvent, context: LambdaContext) -> SqsResponse:
    """Run each record's job; report the failed ones for redelivery."""
    records = _common.sqs_records(event)
    request_id = getattr(context, "aws_request_id", None)
    return _common.run_records(runtime(), records, metrics=True, request_id=request_id)
