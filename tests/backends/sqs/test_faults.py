"""Throttling and 5xx answers: botocore retries them, then bunq says BackendUnavailable.

Faults are injected with a botocore ``before-send`` hook that answers in
moto's place (a real HTTP response object, parsed by botocore as usual);
everything else reaches moto over HTTP.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from bunq.errors import BackendUnavailable
from bunq.job import Settle
from bunq.queue import new_job
from bunq.tick import tick

pytestmark = pytest.mark.sqs
Fault = tuple[int, dict[str, Any], dict[str, str]]
SQS_ERROR = "com.amazonaws.sqs#"
THROTTLED: Fault = (400, {"__type": SQS_ERROR + "ThrottlingException", "message": "Rate exceeded"},
                    {"x-amzn-query-error": "ThrottlingException;Sender"})  # fmt: skip
UNAVAILABLE: Fault = (503, {"__type": SQS_ERROR + "ServiceUnavailable", "message": "down"}, {})


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


class Faults:
    """Answer the next ``n`` calls of ``operation`` with ``fault`` instead of moto."""

    def __init__(self, backend: Any) -> None:
        self.sent: dict[str, int] = {}
        self.plan: dict[str, tuple[int, tuple[int, dict[str, Any], dict[str, str]]]] = {}
        backend.api.client.meta.events.register("before-send.sqs", self.before_send)

    def fail(self, operation: str, n: int, fault: tuple[int, dict[str, Any], dict[str, str]]
             ) -> None:  # fmt: skip
        self.plan[operation] = (n, fault)

    def before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        op = request.headers.get("X-Amz-Target", b"").decode().rsplit(".", 1)[-1]
        self.sent[op] = self.sent.get(op, 0) + 1
        left, (status, body, headers) = self.plan.get(op, (0, UNAVAILABLE))
        if left <= 0:
            return None
        self.plan[op] = (left - 1, (status, body, headers))
        return AWSResponse(
            request.url,
            status,
            {"Content-Type": "application/x-amz-json-1.0", **headers},
            _Raw(json.dumps(body).encode()),
        )


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep botocore's retry decisions, shorten its sleeps (throttling backs off ~1-2 s)."""
    from botocore.retries import standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, ctx: 0.01)


@pytest.fixture
def faulty(make_sqs: Callable[..., Any], fast_retries: None) -> tuple[Any, Faults]:
    sqs = make_sqs(max_attempts=3)
    sqs.add([new_job("q", "job", i, {}) for i in range(3)])  # creates the queue, no faults yet
    return sqs, Faults(sqs)


@pytest.mark.parametrize("fault", [THROTTLED, UNAVAILABLE], ids=["throttled", "503"])
def test_transient_faults_are_retried(faulty: tuple[Any, Faults], fault: Any) -> None:
    sqs, faults = faulty
    faults.fail("ReceiveMessage", 2, fault)
    leases = sqs.lease("q", 3, 30_000)
    assert len(leases) == 3 and faults.sent["ReceiveMessage"] == 3  # 2 faults, then moto
    faults.fail("DeleteMessageBatch", 1, fault)
    assert sqs.complete_many([(ls, None) for ls in leases]) == [Settle.OK] * 3


@pytest.mark.parametrize("fault", [THROTTLED, UNAVAILABLE], ids=["throttled", "503"])
def test_persistent_faults_become_backend_unavailable(faulty: tuple[Any, Faults],
                                                      fault: Any) -> None:  # fmt: skip
    sqs, faults = faulty
    faults.fail("ReceiveMessage", 100, fault)
    with pytest.raises(BackendUnavailable) as err:
        sqs.lease("q", 3, 30_000)
    assert faults.sent["ReceiveMessage"] == 3  # max_attempts=3, no more
    assert isinstance(err.value.__cause__, ClientError)
    assert err.value.data["status"] == fault[0] and err.value.data["retries"] == 2
    assert "ReceiveMessage" in str(err.value) and err.value.code == "backend_unavailable"


def test_unreachable_endpoint_is_backend_unavailable(fast_retries: None) -> None:
    import socket

    from bunq.backends import connect

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = connect(f"sqs://q?endpoint=http://127.0.0.1:{port}&region=us-east-1&max_attempts=2")
    try:
        with pytest.raises(BackendUnavailable, match="GetQueueUrl|GetQueueAttributes"):
            backend.lease("q", 1, 30_000)
    finally:
        backend.close()


def test_tick_counts_unsettled_when_deletes_keep_failing(faulty: tuple[Any, Faults]) -> None:
    sqs, faults = faulty
    faults.fail("DeleteMessageBatch", 100, UNAVAILABLE)
    r = tick("q", lambda job: None, sqs, max=10)
    assert r.leased == 3 and r.unsettled == 3 and r.succeeded == 0


def test_tick_raises_when_it_cannot_lease(faulty: tuple[Any, Faults]) -> None:
    sqs, faults = faulty
    faults.fail("ReceiveMessage", 100, UNAVAILABLE)
    with pytest.raises(BackendUnavailable):
        tick("q", lambda job: None, sqs, max=10)


def test_a_failed_move_during_a_lease_does_not_lose_the_batch(
        make_sqs: Callable[..., Any], fast_retries: None) -> None:  # fmt: skip
    sqs = make_sqs(max_attempts=2)
    sqs.add([new_job("q", "job", "dies", {"attempts": 1})])
    sqs.lease("q", 1, 1_000)  # attempt 1 lapses: the next receive dead-letters it
    sqs.add([new_job("q", "job", "runs", {})])
    time.sleep(1.1)
    faults = Faults(sqs)
    faults.fail("SendMessageBatch", 100, UNAVAILABLE)  # the DLQ move cannot happen
    [lease] = sqs.lease("q", 10, 30_000)
    assert lease.job.data == "runs" and sqs.complete(lease) is Settle.OK
