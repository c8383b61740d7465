"""handlers.aws_lambda.sqs_handler end to end on moto: bunq's policy per record.

Jobs are added with bunq's own SQSBackend (base64 msgpack bodies), received
the way the event-source mapping receives them, and handed to the Lambda
entry point with a fake context. Needs the handlers change in the SQS issue
report (``Runtime.sqs_backend``); skipped, with that reason, until it lands.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from backends.sqs.test_events import records

from bunq.backends.sqs import decode_record
from bunq.backends.sqs.codec import REASON
from bunq.queue import new_job

pytestmark = pytest.mark.sqs
common = pytest.importorskip("handlers._common")
if not hasattr(common.Runtime, "sqs_backend"):
    pytest.skip("handlers/_common.py predates the SQS-policy change (see the SQS report)",
                allow_module_level=True)  # fmt: skip

JOBS = """
calls = []

def handle(job):
    calls.append((job.data, job.attempts))
    if job.data == "flaky":
        raise ValueError("try again")
    if job.data == "doomed":
        raise ValueError("no luck")
    return "ok"
"""


class Context:
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@pytest.fixture
def lambda_env(sqs: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from handlers import aws_lambda

    module = f"bunq_sqs_jobs_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(JOBS)
    monkeypatch.syspath_prepend(str(tmp_path))
    url = f"sqs://?endpoint={sqs.cfg.endpoint}&region=us-east-1&prefix={sqs.cfg.prefix}"
    monkeypatch.setenv("BUNQ_BACKEND", url)
    monkeypatch.setenv("BUNQ_HANDLER", f"{module}:handle")
    monkeypatch.setenv("BUNQ_QUEUE", "q")
    aws_lambda.runtime.cache_clear()
    yield module
    aws_lambda.runtime().backend.close()
    aws_lambda.runtime.cache_clear()


def test_sqs_handler_applies_backoff_and_dead_letters_with_a_reason(
        sqs: Any, client: Any, lambda_env: str) -> None:  # fmt: skip
    from handlers import aws_lambda

    sqs.add([new_job("q", "job", d, {"attempts": a, "backoff": 1_000})
             for d, a in [("fine", 3), ("flaky", 3), ("doomed", 1)]])  # fmt: skip
    batch = records(sqs, client)
    out = aws_lambda.sqs_handler(cast(Any, {"Records": batch}), Context())
    flaky = next(r["messageId"] for r in batch if decode_record(r).data == "flaky")
    assert out["batchItemFailures"] == [{"itemIdentifier": flaky}]
    reported = flaky
    assert sorted(sys.modules[lambda_env].calls) == [("doomed", 1), ("fine", 1), ("flaky", 1)]
    for rec in batch:  # what Lambda does: delete the records not reported
        if rec["messageId"] != reported:
            client.delete_message(QueueUrl=sqs.api.info("q").url,
                                  ReceiptHandle=rec["receiptHandle"])  # fmt: skip
    dead = client.receive_message(QueueUrl=sqs.api.info("q").dlq_url,
                                  MessageAttributeNames=["All"])["Messages"]  # fmt: skip
    assert [m["MessageAttributes"][REASON]["StringValue"] for m in dead] == [
        "max_attempts_exceeded"]  # fmt: skip
    assert records(sqs, client) == []  # flaky waits out its 1 s backoff
    time.sleep(1.1)
    again = records(sqs, client)
    out = aws_lambda.sqs_handler(cast(Any, {"Records": again}), Context())
    assert sys.modules[lambda_env].calls[-1] == ("flaky", 2)
    assert [f["itemIdentifier"] for f in out["batchItemFailures"]] == [again[0]["messageId"]]
