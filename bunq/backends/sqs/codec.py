"""Jobs as SQS messages: the body, the ``bunq-*`` attributes and their sizes.

The body is ``base64(msgpack(envelope))``: SQS bodies are XML-safe text, and
msgpack keeps bytes, ints and map keys exactly as the other backends do
(JSON would not). A body that starts with ``{`` is read as a JSON job
``{"name", "data", "opts", "id"?, "queue"?}`` (what another language or the
AWS console can send); base64 never starts with ``{``.

Message attributes carry what changes between copies of a message (a copy
is re-sent when attempts must be given back or a delay outlives SQS's limits):

| attribute | type | meaning |
| --- | --- | --- |
| ``bunq-base`` | Number | attempts spent before this copy (attempt = receive count + base) |
| ``bunq-due`` | Number | epoch ms before which the job must not run (delays past 900 s) |
| ``bunq-reason`` | String | DLQ copies: the FailureReason |
| ``bunq-error`` | String | DLQ copies: the last error (XML-safe, at most 4000 chars) |
| ``bunq-failed-at`` | Number | DLQ copies: epoch ms of the move |
| ``bunq-attempt`` | Number | DLQ copies: the attempt that failed |
| ``bunq-duration`` | Number | DLQ copies: how long that attempt ran (ms) |
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ...codec import ExtraData, packb, unpackb
from ...errors import PayloadTooLarge, ValidationError
from ...job import DEFAULT_OPTIONS, Job, JobOptions, JobState

BASE, DUE, REASON, ERROR = "bunq-base", "bunq-due", "bunq-reason", "bunq-error"
FAILED_AT, ATTEMPT, DURATION = "bunq-failed-at", "bunq-attempt", "bunq-duration"
MAX_ERROR = 4000
_XML_UNSAFE = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
Attributes = dict[str, dict[str, str]]


@dataclass(frozen=True, slots=True)
class Envelope:
    """The job a message body carries (what never changes between copies)."""

    id: str
    queue: str
    name: str
    data: Any
    opts: JobOptions
    created_at: int
    expire_at: int | None = None

    def job(self, state: JobState, attempts: int, run_at: int, started_at: int | None) -> Job:
        return Job(id=self.id, queue=self.queue, name=self.name, data=self.data, state=state,
                   opts=self.opts, attempts=attempts, created_at=self.created_at,
                   run_at=run_at, started_at=started_at)  # fmt: skip


def encode_body(env: Envelope) -> str:
    """Return the message body of ``env``; ValidationError if its data cannot be packed."""
    doc: dict[str, Any] = {"v": 1, "id": env.id, "q": env.queue, "n": env.name, "d": env.data,
                           "c": env.created_at}  # fmt: skip
    if env.opts != DEFAULT_OPTIONS:
        doc["o"] = _opts_blob(env.opts)
    if env.expire_at is not None:
        doc["x"] = env.expire_at
    try:
        packed: bytes = packb(doc, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(f"job data is not serialisable: {exc}", field="data") from None
    return base64.b64encode(packed).decode("ascii")


def decode_body(body: str, queue: str | None = None) -> Envelope:
    """Decode a message body; ValidationError if it is not a bunq job.

    :param queue: the bunq queue to assume for a JSON job that names none.
    """
    if body.lstrip().startswith("{"):
        return _decode_json(body, queue)
    try:
        doc = unpackb(base64.b64decode(body, validate=True), raw=False,
                              strict_map_key=False)  # fmt: skip
        if not isinstance(doc, dict) or doc.get("v") != 1:
            raise ValueError("not a version-1 envelope")
        blob = doc.get("o")
        return Envelope(str(doc["id"]), str(doc["q"]), str(doc["n"]), doc.get("d"),
                        DEFAULT_OPTIONS if blob is None else _opts(bytes(blob)),
                        int(doc["c"]), doc.get("x"))  # fmt: skip
    except (ValueError, KeyError, TypeError, binascii.Error, ExtraData) as exc:
        raise ValidationError(f"message body is not a bunq job: {exc}") from None


def _decode_json(body: str, queue: str | None) -> Envelope:
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise ValidationError(f"message body is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not doc["name"]:
        raise ValidationError('a JSON job is an object with a "name" (and "data", "opts")')
    q = doc.get("queue") or queue
    if not isinstance(q, str):
        raise ValidationError('a JSON job names no "queue" and none was given')
    opts = JobOptions.parse(doc.get("opts") or {})
    return Envelope(str(doc.get("id") or ""), q, doc["name"], doc.get("data"), opts,
                    int(doc.get("created_at") or 0))  # fmt: skip


def _opts_blob(opts: JobOptions) -> bytes:
    return _opts_blob_cached(opts)


@lru_cache(maxsize=1024)
def _opts_blob_cached(opts: JobOptions) -> bytes:
    out: bytes = packb(opts.changed(), use_bin_type=True)
    return out


@lru_cache(maxsize=4096)
def _opts(blob: bytes) -> JobOptions:
    return JobOptions.parse(unpackb(blob, raw=False))


# ------------------------------------------------------------------ attributes


def xml_safe(text: str, limit: int = MAX_ERROR) -> str:
    """Return ``text`` cut to ``limit`` chars with characters SQS refuses replaced."""
    return _XML_UNSAFE.sub("\ufffd", text[:limit])


def number(value: int) -> dict[str, str]:
    return {"DataType": "Number", "StringValue": str(int(value))}


def string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": xml_safe(value)}


def read_number(attrs: Mapping[str, Any] | None, name: str) -> int | None:
    """Read a Number attribute from a ReceiveMessage or a Lambda record (any key case)."""
    item = (attrs or {}).get(name)
    if not isinstance(item, Mapping):
        return None
    value = item.get("StringValue", item.get("stringValue"))
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def read_string(attrs: Mapping[str, Any] | None, name: str) -> str | None:
    item = (attrs or {}).get(name)
    if not isinstance(item, Mapping):
        return None
    value = item.get("StringValue", item.get("stringValue"))
    return None if value is None else str(value)


def message_size(body: str, attrs: Attributes) -> int:
    """Return the size SQS counts: body bytes plus attribute names, types and values."""
    size = len(body.encode("utf-8"))
    for name, a in attrs.items():
        size += len(name.encode()) + len(a["DataType"].encode())
        size += len(a["StringValue"].encode("utf-8"))
    return size


def check_size(body: str, attrs: Attributes, limit: int) -> int:
    """Return the message size; PayloadTooLarge if it exceeds the queue's limit."""
    size = message_size(body, attrs)
    if size > limit:
        raise PayloadTooLarge(
            f"job is {size} bytes as an SQS message (base64 msgpack); the queue's "
            f"MaximumMessageSize is {limit}", size=size, limit=limit)  # fmt: skip
    return size


# ---------------------------------------------------------------- Lambda records


def decode_record(record: Mapping[str, Any], queue: str | None = None,
                  now: int | None = None) -> Job:  # fmt: skip
    """Decode one record of an SQS event-source batch into the Job it carries.

    ``attempts`` is ``ApproximateReceiveCount`` plus the ``bunq-base``
    attribute, as :meth:`SQSBackend.lease` computes it. The job id is the
    body's (the message id for a JSON job without one).

    :param queue: the bunq queue for JSON jobs that name none.
    :raises ValidationError: the body is not a bunq job.
    """
    env = decode_body(str(record.get("body", "")), queue)
    attrs = record.get("attributes") or {}
    base = read_number(record.get("messageAttributes"), BASE) or 0
    try:
        count = int(attrs.get("ApproximateReceiveCount", 1))
        sent = int(attrs.get("SentTimestamp", 0))
    except (TypeError, ValueError):
        count, sent = 1, 0
    job = env.job(JobState.ACTIVE, count + base, env.created_at or sent, now)
    if not env.id:
        from dataclasses import replace

        job = replace(job, id=str(record.get("messageId", "")), created_at=sent)
    return job
