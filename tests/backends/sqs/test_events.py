"""Lambda SQS event-source records: bunq's policy inside the partial-batch contract.

The records are built the way the event-source mapping builds them, from a
real ReceiveMessage on moto, so bodies, receipt handles and attributes are
SQS's own.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from bunq.backends.sqs import decode_record, prepare_record, url_for_arn
from bunq.backends.sqs.codec import REASON
from bunq.errors import DelayedError, UnrecoverableError
from bunq.job import JobState
from bunq.queue import new_job
from bunq.sqs_events import run_record

pytestmark = pytest.mark.sqs


def records(sqs: Any, client: Any, queue: str = "q", vis: int = 30) -> list[dict[str, Any]]:
    """Receive like the event-source mapping does; return Lambda-shaped records."""
    info = sqs.api.info(queue)
    got = client.receive_message(QueueUrl=info.url, MaxNumberOfMessages=10, VisibilityTimeout=vis,
                                 AttributeNames=["All"],
                                 MessageAttributeNames=["All"]).get("Messages", [])  # fmt: skip
    return [{
        "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
        "attributes": m["Attributes"], "eventSource": "aws:sqs", "eventSourceARN": info.arn,
        "awsRegion": "us-east-1", "md5OfBody": m["MD5OfBody"],
        "messageAttributes": {k: {"stringValue": v["StringValue"], "dataType": v["DataType"]}
                              for k, v in (m.get("MessageAttributes") or {}).items()},
    } for m in got]  # fmt: skip


def add(sqs: Any, data: Any = None, **opts: Any) -> Any:
    return sqs.add([new_job("q", "job", data, opts)])[0]


def dead_reasons(sqs: Any, client: Any) -> list[str]:
    out = client.receive_message(QueueUrl=sqs.api.info("q").dlq_url, MaxNumberOfMessages=10,
                                 MessageAttributeNames=["All"]).get("Messages", [])  # fmt: skip
    return sorted(m["MessageAttributes"][REASON]["StringValue"] for m in out)


def test_success_is_not_reported_and_the_job_decodes(sqs: Any, client: Any) -> None:
    job = add(sqs, {"k": b"\x01"}, attempts=4)
    [rec] = records(sqs, client)
    got = decode_record(rec)
    assert (got.id, got.data, got.attempts, got.max_attempts) == (job.id, {"k": b"\x01"}, 1, 4)
    assert run_record(sqs, rec, lambda j: "ok") is False


def test_a_handler_taking_a_context_gets_one_without_a_lease(sqs: Any, client: Any) -> None:
    from bunq.errors import UnsupportedError

    add(sqs, {"n": 1})
    [rec] = records(sqs, client)
    seen: list[Any] = []

    def handle(job: Any, ctx: Any) -> str:
        seen.append((ctx.job_id == job.id, bool(ctx.cancelled)))
        with pytest.raises(UnsupportedError):
            ctx.extend_lease()
        return "ok"

    assert run_record(sqs, rec, handle) is False and seen == [(True, False)]


def test_failure_with_retries_left_is_reported_and_hidden_for_the_backoff(
        sqs: Any, client: Any) -> None:  # fmt: skip
    add(sqs, attempts=3, backoff=1_500)
    [rec] = records(sqs, client, vis=1)

    def boom(job: Any) -> None:
        raise ValueError("boom")

    assert run_record(sqs, rec, boom) is True
    time.sleep(1.2)  # past the queue's visibility, not past the backoff
    assert records(sqs, client) == []
    time.sleep(1.0)
    [again] = records(sqs, client)
    assert decode_record(again).attempts == 2


def test_dead_jobs_go_to_the_dlq_with_a_reason_and_are_not_reported(
        sqs: Any, client: Any) -> None:  # fmt: skip
    add(sqs, attempts=1)
    add(sqs, attempts=5)

    def handler(job: Any) -> None:
        if job.max_attempts == 5:
            raise UnrecoverableError("poison")
        raise ValueError("last try")

    assert [run_record(sqs, r, handler) for r in records(sqs, client)] == [False, False]
    assert dead_reasons(sqs, client) == ["explicit_fail", "max_attempts_exceeded"]


def test_a_sync_handler_past_its_timeout_fails_with_reason_timeout(
        sqs: Any, client: Any) -> None:  # fmt: skip
    add(sqs, attempts=1, timeout=10)  # as under tick() and the Worker: one execution core
    [rec] = records(sqs, client)
    assert run_record(sqs, rec, lambda job: time.sleep(0.05)) is False
    assert dead_reasons(sqs, client) == ["timeout"]


def test_delayed_error_sends_a_copy_with_the_attempt_given_back(sqs: Any, client: Any) -> None:
    add(sqs, attempts=1)
    [rec] = records(sqs, client)

    def later(job: Any) -> None:
        raise DelayedError(1_000)

    assert run_record(sqs, rec, later) is False  # Lambda deletes the original
    client.delete_message(QueueUrl=sqs.api.info("q").url, ReceiptHandle=rec["receiptHandle"])
    time.sleep(1.1)
    [copy] = records(sqs, client)
    assert decode_record(copy).attempts == 1


def test_records_that_must_not_run_now(sqs: Any, client: Any) -> None:
    url = sqs.api.info("q").url
    client.send_message(QueueUrl=url, MessageBody="garbage")
    add(sqs, ttl=1)
    time.sleep(0.01)
    verdicts = {}
    for rec in records(sqs, client):
        prepared = prepare_record(sqs, rec)
        assert prepared.job is None
        verdicts[rec["body"] == "garbage"] = prepared.report
    assert verdicts == {True: False, False: False}  # both dead-lettered, Lambda deletes them
    assert dead_reasons(sqs, client) == ["ttl_expired", "unknown"]
    assert sqs.counts("q")[JobState.FAILED] == 2  # in flight in the DLQ still count


def test_a_succeeding_record_costs_no_api_call(sqs: Any, client: Any) -> None:
    add(sqs, "x")
    [rec] = records(sqs, client)
    fresh = type(sqs).from_url(url_for_arn(rec["eventSourceARN"]),
                               endpoint=sqs.cfg.endpoint)  # fmt: skip
    calls: list[str] = []
    fresh.api.client.meta.events.register("before-call.sqs", lambda model, **_: calls.append(
        model.name))  # fmt: skip
    try:
        assert run_record(fresh, rec, lambda job: job.data) is False and calls == []
    finally:
        fresh.close()


def test_url_for_arn() -> None:
    assert url_for_arn("arn:aws:sqs:eu-west-1:123456789012:jobs.fifo") == \
        "sqs://sqs.eu-west-1.amazonaws.com/123456789012/jobs.fifo"  # fmt: skip
