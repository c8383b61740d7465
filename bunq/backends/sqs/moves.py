"""Moving messages: re-sent copies, dead letters, parked delays, given-back leases.

SQS messages are immutable, so anything that must change what a message
says (attempts given back, a due time past SQS's limits, a DLQ reason) is a
*copy*: send the new message, then delete the old one. The copy is sent
first, so a crash in between duplicates a job rather than losing it (SQS is
at-least-once anyway); when the old receipt handle may be stale, a
ChangeMessageVisibility probe checks the fence first and keeps the message
hidden while it is moved.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import BackendError, BackendUnavailable
from ...job import FailureReason, Settle
from .client import Api, QueueInfo, Stale
from .codec import (
    ATTEMPT,
    BASE,
    DUE,
    DURATION,
    ERROR,
    FAILED_AT,
    REASON,
    Attributes,
    message_size,
    number,
    string,
)  # fmt: skip

log = logging.getLogger("bunq.sqs")
MAX_DELAY_S = 900  # SQS DelaySeconds limit
MAX_VISIBILITY_S = 43_200  # 12 h, counted from the receive
PROBE_S = 30  # visibility a probe sets while a message is being moved
DEFAULT_GROUP = "default"
MAX_BATCH_BYTES = 1_048_576  # SendMessageBatch: all entries together
DEDUP_OK = re.compile(r"^[!-~]{1,128}$")  # printable ASCII, no space


@dataclass(frozen=True, slots=True)
class Copy:
    """A message to send: body, attributes, delay, FIFO group."""

    body: str
    attrs: Attributes
    delay_s: int = 0
    group: str | None = None
    dedup: str | None = None  # FIFO deduplication key (default: a fresh one)


def delay_split(delay_ms: int, now: int) -> tuple[int, int | None]:
    """Return (DelaySeconds, due): delays past 900 s carry their due time instead.

    Delays are rounded up to whole seconds, so a job never runs early.
    """
    if delay_ms <= 0:
        return 0, None
    secs = math.ceil(delay_ms / 1000)
    if secs <= MAX_DELAY_S:
        return secs, None
    return MAX_DELAY_S, now + delay_ms


def copy_attrs(base: int, due: int | None) -> Attributes:
    attrs: Attributes = {}
    if base:
        attrs[BASE] = number(base)
    if due is not None:
        attrs[DUE] = number(due)
    return attrs


def dead_attrs(reason: FailureReason, error: str | None, attempt: int, duration_ms: int,
               now: int) -> Attributes:  # fmt: skip
    attrs: Attributes = {REASON: string(reason.value), FAILED_AT: number(now),
                         ATTEMPT: number(attempt), DURATION: number(duration_ms)}  # fmt: skip
    if error:
        attrs[ERROR] = string(error)
    return attrs


def dedup_id(key: str) -> str:
    """Return ``key`` if SQS accepts it as a MessageDeduplicationId, else its SHA-256."""
    if DEDUP_OK.match(key):
        return key
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def entry(i: int, c: Copy, fifo: bool) -> dict[str, Any]:
    """Return one SendMessageBatch entry (FIFO: group id and a fresh dedup id)."""
    e: dict[str, Any] = {"Id": str(i), "MessageBody": c.body}
    if c.attrs:
        e["MessageAttributes"] = c.attrs
    if fifo:
        e["MessageGroupId"] = c.group or DEFAULT_GROUP
        e["MessageDeduplicationId"] = dedup_id(c.dedup) if c.dedup else uuid.uuid4().hex
    elif c.delay_s:
        e["DelaySeconds"] = c.delay_s
    return e


def batches(copies: Sequence[Copy]) -> list[Sequence[Copy]]:
    """Split copies into SendMessageBatch calls: at most 10 and 1 MiB each."""
    out: list[Sequence[Copy]] = []
    start, size = 0, 0
    for i, c in enumerate(copies):
        n = message_size(c.body, c.attrs)
        if i > start and (i - start == 10 or size + n > MAX_BATCH_BYTES):
            out.append(copies[start:i])
            start, size = i, 0
        size += n
    if start < len(copies):
        out.append(copies[start:])
    return out


class Mover:
    """Copies and deletes over one :class:`Api`."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def send(self, url: str, fifo: bool, copies: Sequence[Copy], what: str) -> None:
        """Send copies in batches (10 and 1 MiB per call); BackendError if any is refused."""
        for chunk in batches(copies):
            out = self.api.call(
                "send_message_batch",
                what,
                QueueUrl=url,
                Entries=[entry(i, c, fifo) for i, c in enumerate(chunk)],
            )
            failed = out.get("Failed") or []
            if failed:
                raise BackendError(f"SQS SendMessageBatch {what}: {failed[0].get('Code')}: "
                                   f"{failed[0].get('Message')}", failed=len(failed))  # fmt: skip

    def delete(self, info: QueueInfo, handles: Sequence[str]) -> set[str]:
        """Delete messages by receipt handle; return the handles SQS refused (stale).

        Entries SQS fails on its side are retried twice, then BackendUnavailable.
        """
        refused: set[str] = set()
        for start in range(0, len(handles), 10):
            chunk = handles[start : start + 10]
            for attempt in range(3):
                out = self.api.call("delete_message_batch", info.name, QueueUrl=info.url,
                                    Entries=[{"Id": str(i), "ReceiptHandle": h}
                                             for i, h in enumerate(chunk)])  # fmt: skip
                failed = out.get("Failed") or []
                refused |= {chunk[int(f["Id"])] for f in failed if f.get("SenderFault")}
                chunk = [chunk[int(f["Id"])] for f in failed if not f.get("SenderFault")]
                if not chunk:
                    break
                if attempt == 2:
                    raise BackendUnavailable(
                        f"SQS DeleteMessageBatch {info.name}: {len(chunk)} "
                        "entries failed on SQS's side",
                        failed=len(chunk),
                    )
                time.sleep(0.05 * (attempt + 1))
        return refused

    def probe(self, info: QueueInfo, handle: str) -> bool:
        """Hide the message a little longer; False if SQS refuses the handle (stale)."""
        try:
            self.api.call(
                "change_message_visibility",
                info.name,
                stale=True,
                QueueUrl=info.url,
                ReceiptHandle=handle,
                VisibilityTimeout=PROBE_S,
            )
        except Stale:
            return False
        return True

    def hide(self, info: QueueInfo, handle: str, seconds: int) -> bool:
        """ChangeMessageVisibility; False if the handle is stale."""
        try:
            self.api.call("change_message_visibility", info.name, stale=True, QueueUrl=info.url,
                          ReceiptHandle=handle, VisibilityTimeout=max(0, seconds))  # fmt: skip
        except Stale:
            return False
        return True

    def replace(self, info: QueueInfo, handle: str, copy: Copy, *, probe: bool,
                delete: bool = True) -> Settle:  # fmt: skip
        """Send ``copy`` to the same queue and delete the original."""
        if probe and not self.probe(info, handle):
            return Settle.STALE
        self.send(info.url, info.fifo, [copy], info.name)
        if delete and self.delete(info, [handle]):
            log.warning("%s: original message was already gone after re-sending it", info.name)
            return Settle.STALE
        return Settle.OK

    def dead_letter(self, info: QueueInfo, handle: str, copy: Copy, *, probe: bool,
                    delete: bool = True) -> Settle:  # fmt: skip
        """Move a message to the queue's DLQ with ``copy``'s attributes (reason, error)."""
        if info.dlq_url is None:
            log.error(
                "%s: job dead (%s) but the queue has no DLQ (no RedrivePolicy, no dlq=);"
                " it is dropped",
                info.name,
                copy.attrs.get(REASON, {}).get("StringValue"),
            )
            if not delete:
                return Settle.OK
            return Settle.STALE if self.delete(info, [handle]) else Settle.OK
        if probe and not self.probe(info, handle):
            return Settle.STALE
        self.send(info.dlq_url, info.dlq_fifo, [copy], f"{info.name} DLQ")
        if delete and self.delete(info, [handle]):
            log.warning("%s: moved to the DLQ, but the original was already settled", info.name)
            return Settle.STALE
        return Settle.OK

    def give_back(self, info: QueueInfo, items: Sequence[tuple[str, Copy]]) -> None:
        """Return received, unstarted messages without spending their attempt.

        Standard queues get a copy whose ``bunq-base`` keeps the attempt count;
        FIFO queues keep the message's place in its group instead (visibility
        0), which SQS counts as a receive: the job loses one attempt.
        """
        if not items:
            return
        if info.fifo:
            for start in range(0, len(items), 10):
                chunk = items[start : start + 10]
                self.api.call("change_message_visibility_batch", info.name, QueueUrl=info.url,
                              Entries=[{"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                                       for i, (h, _) in enumerate(chunk)])  # fmt: skip
            return
        self.send(info.url, False, [c for _, c in items], info.name)
        self.delete(info, [h for h, _ in items])
