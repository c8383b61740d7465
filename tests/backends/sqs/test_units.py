"""URLs, the message codec, delays and error translation: no server needed."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from bunq.backends.sqs import decode_record, parse_url, translate_errors
from bunq.backends.sqs.codec import (
    BASE,
    Envelope,
    check_size,
    decode_body,
    encode_body,
    message_size,
    number,
    xml_safe,
)  # fmt: skip
from bunq.backends.sqs.config import sqs_name
from bunq.backends.sqs.moves import Copy, batches, dedup_id, delay_split
from bunq.errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    PayloadTooLarge,
    ValidationError,
)  # fmt: skip
from bunq.job import JobOptions

pytestmark = pytest.mark.sqs


def test_url_queue_url_form_takes_region_and_account_from_the_host() -> None:
    cfg = parse_url("sqs://sqs.eu-west-1.amazonaws.com/123456789012/emails?dlq=emails-dead")
    assert cfg.region == "eu-west-1" and cfg.home == "emails" and cfg.endpoint is None
    assert cfg.base_url == "https://sqs.eu-west-1.amazonaws.com/123456789012"
    assert cfg.dlq == "emails-dead"


def test_url_local_host_is_http_and_its_own_endpoint() -> None:
    cfg = parse_url("sqs://127.0.0.1:4566/000000000000/jobs.fifo?region=us-east-1")
    assert cfg.endpoint == "http://127.0.0.1:4566" and cfg.home == "jobs.fifo"
    assert cfg.base_url == "http://127.0.0.1:4566/000000000000"


def test_url_name_and_namespace_forms() -> None:
    cfg = parse_url("sqs://emails?region=us-east-2&endpoint=http://127.0.0.1:5000&create=1"
                    "&max_receives=5&lease_wait=1&max_attempts=3")  # fmt: skip
    assert (cfg.home, cfg.region, cfg.endpoint, cfg.create) == (
        "emails",
        "us-east-2",
        "http://127.0.0.1:5000",
        True,
    )
    assert (cfg.max_receives, cfg.lease_wait, cfg.max_attempts) == (5, 1, 3)
    cfg = parse_url("sqs://?prefix=prod-")
    assert cfg.home is None and cfg.prefix == "prod-"


@pytest.mark.parametrize("url", [
    "sqs://q?bogus=1", "sqs://q?create=maybe", "sqs://q?max_receives=0", "sqs://q?lease_wait=21",
    "sqs://host/notanaccount/q", "sqs://a/b/c/d", "sqs://bad:name?region=x",
    "sqs://other?prefix=p-", "http://q",
])  # fmt: skip
def test_bad_urls_raise_config_error(url: str) -> None:
    with pytest.raises(ConfigError):
        parse_url(url)


def test_queue_names_map_through_the_prefix() -> None:
    cfg = parse_url("sqs://?prefix=p-")
    assert sqs_name(cfg, "orders.fifo") == "p-orders.fifo"
    for bad in ("a:b", "a.b", "x" * 80):
        with pytest.raises(ConfigError, match="SQS"):
            sqs_name(cfg, bad)


def test_body_roundtrips_msgpack_types_and_options() -> None:
    opts = JobOptions.parse({"attempts": 7, "backoff": 250, "ttl": 5_000})
    env = Envelope("id1", "q", "send", {"b": b"\x00\xff", 1: [1, 2.5, None]}, opts, 123, 5123)
    body = encode_body(env)
    assert body.isascii() and not body.startswith("{")
    assert decode_body(body) == env


def test_json_body_from_another_producer() -> None:
    env = decode_body('{"name": "hello", "data": {"x": 1}, "opts": {"attempts": 2}}', "q")
    assert (env.name, env.data, env.queue, env.opts.attempts, env.id) == (
        "hello",
        {"x": 1},
        "q",
        2,
        "",
    )


@pytest.mark.parametrize("body", ["", "not base64 !", "e30=", '{"data": 1}', "[1, 2]"])
def test_foreign_bodies_raise_validation_error(body: str) -> None:
    with pytest.raises(ValidationError):
        decode_body(body, "q")


def test_unserialisable_data_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        encode_body(Envelope("i", "q", "n", {"f": object()}, JobOptions(), 0))


def test_size_counts_body_and_attributes() -> None:
    attrs = {BASE: number(3)}
    assert message_size("abcd", attrs) == 4 + len(BASE) + len("Number") + 1
    assert check_size("abcd", {}, 4) == 4
    with pytest.raises(PayloadTooLarge) as err:
        check_size("abcde", {}, 4)
    assert err.value.data == {"size": 5, "limit": 4} and err.value.code == "payload_too_large"


def test_xml_unsafe_characters_are_replaced_and_text_cut() -> None:
    assert xml_safe("a\x00b\ud800c", 10) == "a\ufffdb\ufffdc"
    assert len(xml_safe("x" * 5000)) == 4000


def test_delays_round_up_to_seconds_and_long_ones_carry_a_due_time() -> None:
    assert delay_split(0, 1000) == (0, None)
    assert delay_split(1, 1000) == (1, None)
    assert delay_split(1500, 1000) == (2, None)
    assert delay_split(900_000, 1000) == (900, None)
    assert delay_split(900_001, 1000) == (900, 901_001)


def test_dedup_ids_are_kept_or_hashed() -> None:
    assert dedup_id("order-7") == "order-7"
    assert len(dedup_id("k" * 200)) == 64 and dedup_id("with space") != "with space"


def test_send_batches_hold_ten_messages_and_one_mib() -> None:
    small = [Copy("x", {}) for _ in range(25)]
    assert [len(b) for b in batches(small)] == [10, 10, 5]
    big = [Copy("x" * 400_000, {}) for _ in range(5)]
    assert [len(b) for b in batches(big)] == [2, 2, 1]


def test_decode_record_counts_attempts_from_receive_count_and_base() -> None:
    env = Envelope("j1", "q", "send", [1], JobOptions.parse({"attempts": 5}), 99)
    record = {"messageId": "m1", "body": encode_body(env),
              "attributes": {"ApproximateReceiveCount": "2", "SentTimestamp": "100"},
              "messageAttributes": {BASE: {"stringValue": "3", "dataType": "Number"}}}  # fmt: skip
    job = decode_record(record)
    assert (job.id, job.attempts, job.data, job.max_attempts) == ("j1", 5, [1], 5)
    foreign = decode_record({"messageId": "m2", "body": '{"name": "x"}',
                             "attributes": {"SentTimestamp": "7"}}, "q")  # fmt: skip
    assert (foreign.id, foreign.created_at, foreign.attempts) == ("m2", 7, 1)


def _client_error(code: str, status: int, query: str | None = None) -> ClientError:
    err: dict[str, Any] = {"Code": code, "Message": "m"}
    if query:
        err["QueryErrorCode"] = query
    return ClientError(
        {"Error": err, "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": 3}},
        "ReceiveMessage",
    )


@pytest.mark.parametrize(("exc", "kind"), [
    (_client_error("ThrottlingException", 400, "RequestThrottled"), BackendUnavailable),
    (_client_error("InternalError", 500), BackendUnavailable),
    (_client_error("Whatever", 503), BackendUnavailable),
    (_client_error("AWS.SimpleQueueService.NonExistentQueue", 400, "QueueDoesNotExist"),
     ConfigError),
    (_client_error("InvalidParameterValue", 400), ValidationError),
    (_client_error("AccessDenied", 403), BackendError),
    (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), BackendUnavailable),
    (NoCredentialsError(), ConfigError),
])  # fmt: skip
def test_botocore_errors_are_translated_once_from_the_cause(exc: Exception, kind: type) -> None:
    with pytest.raises(kind) as err, translate_errors("ReceiveMessage q"):
        raise exc
    assert type(err.value) is kind and err.value.__cause__ is exc
    assert "SQS ReceiveMessage q" in str(err.value)
