"""The dead-letter queue, drain and obliterate: operations that scan a queue.

SQS cannot look messages up, so these receive them: hidden for
``PEEK_S`` seconds, acted on (re-sent, deleted) or released again
(visibility 0) when the scan ends. A DLQ shared by several queues holds
their entries together; every entry names its bunq queue in its body, so a
scan acts only on the queue asked for. Scans are bounded by the queue's
approximate size, so they end even while other consumers keep adding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from ...errors import ConfigError, ValidationError
from ...job import Attempt, DlqEntry, FailureReason, JobId, JobState
from ..base import DlqConfig, check_queue_name
from .client import Api, QueueInfo
from .codec import (
    ATTEMPT,
    DURATION,
    ERROR,
    FAILED_AT,
    REASON,
    Envelope,
    decode_body,
    read_number,
    read_string,
)
from .moves import Copy, Mover
from .refuse import refusal

log = logging.getLogger("bunq.sqs")
PEEK_S = 10  # how long a scan hides the messages it looks at
SCAN_MAX = 10_000  # messages one scan looks at, at most
REDRIVEN = "moved by SQS's RedrivePolicy after maxReceiveCount receives without an outcome"
Action = Literal["list", "retry", "delete"]
Found = tuple[dict[str, Any], Envelope]


def dlq_view(info: QueueInfo) -> QueueInfo:
    """Return ``info``'s DLQ as a QueueInfo (for Mover calls)."""
    assert info.dlq_url is not None
    return replace(info, name=f"{info.name} DLQ", url=info.dlq_url, fifo=info.dlq_fifo,
                   dlq_url=None)  # fmt: skip


def entry_of(m: dict[str, Any], env: Envelope) -> DlqEntry:
    """Build the DlqEntry of a DLQ message (bunq's attributes, or SQS's redrive)."""
    attrs = m.get("MessageAttributes")
    raw = read_string(attrs, REASON)
    try:
        reason = FailureReason(raw) if raw else FailureReason.STALLED
    except ValueError:
        reason = FailureReason.UNKNOWN
    error = read_string(attrs, ERROR) or (None if raw else REDRIVEN)
    at = read_number(attrs, FAILED_AT) or int((m.get("Attributes") or {}).get("SentTimestamp", 0))
    attempt = read_number(attrs, ATTEMPT) or 0
    hist = (Attempt(attempt, error, read_number(attrs, DURATION) or 0, at, reason),)
    job = replace(env.job(JobState.FAILED, attempt, env.created_at, None), finished_at=at,
                  error=error, reason=reason, history=hist)  # fmt: skip
    return DlqEntry(job, reason, error, hist, at)


class Scans:
    """DLQ list / retry / purge / size / remove / config, drain and obliterate
    (a part SQSBackend holds and delegates to)."""

    def __init__(self, api: Api, moves: Mover) -> None:
        self.api, self.moves = api, moves

    def approx(self, url: str, what: str) -> dict[str, str]:
        """The queue's approximate counts (waiting, in flight, delayed), as SQS gives them."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                 "ApproximateNumberOfMessagesDelayed"]  # fmt: skip
        out = self.api.call("get_queue_attributes", what, QueueUrl=url, AttributeNames=names)
        return dict(out.get("Attributes") or {})

    def dlq_count(self, info: QueueInfo) -> int:
        """Every message in ``info``'s DLQ, approximately."""
        assert info.dlq_url is not None
        return sum(int(v) for v in self.approx(info.dlq_url, f"{info.name} DLQ").values())

    def _dlq_info(self, queue: str) -> QueueInfo:
        info = self.api.info(check_queue_name(queue))
        if info.dlq_url is None:
            raise refusal("dlq", f"SQS queue {info.name!r} has no DLQ: give it a RedrivePolicy "
                          "(template.yaml) or pass dlq=<queue>")  # fmt: skip
        return info

    def _scan(self, info: QueueInfo, want: Callable[[Envelope], bool], action: Action,
              limit: int) -> list[Found]:  # fmt: skip
        """Receive from ``info``'s DLQ; act on up to ``limit`` wanted entries; release the rest."""
        found: list[Found] = []
        keep: list[str] = []
        dlq = dlq_view(info)
        budget = min(self.dlq_count(info) + 20, SCAN_MAX)
        seen = 0
        try:
            while seen < budget and len(found) < limit:
                out = self.api.call("receive_message", dlq.name, QueueUrl=dlq.url,
                                    MaxNumberOfMessages=10, VisibilityTimeout=PEEK_S,
                                    AttributeNames=["All"],
                                    MessageAttributeNames=["All"])  # fmt: skip
                msgs = out.get("Messages") or []
                if not msgs:
                    break
                seen += len(msgs)
                take: list[Found] = []
                for m in msgs:
                    env = _decode(m, info.queue)
                    if env is not None and want(env) and len(found) + len(take) < limit:
                        take.append((m, env))
                    else:
                        keep.append(m["ReceiptHandle"])
                self._act(info, dlq, take, action, keep)
                found += take
        finally:
            self._release(dlq, keep)
        return found

    def _act(self, info: QueueInfo, dlq: QueueInfo, take: list[Found], action: Action,
             keep: list[str]) -> None:  # fmt: skip
        handles = [m["ReceiptHandle"] for m, _ in take]
        if action == "list":
            keep += handles
            return
        if action == "retry" and take:  # fresh attempts: no bunq-base
            self.moves.send(info.url, info.fifo,
                            [Copy(m["Body"], {}, 0, env.opts.group) for m, env in take],
                            info.name)  # fmt: skip
        if take:
            self.moves.delete(dlq, handles)

    def _release(self, dlq: QueueInfo, handles: list[str]) -> None:
        for start in range(0, len(handles), 10):
            chunk = handles[start : start + 10]
            try:
                self.api.call("change_message_visibility_batch", dlq.name, QueueUrl=dlq.url,
                              Entries=[{"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                                       for i, h in enumerate(chunk)])  # fmt: skip
            except Exception as exc:  # they reappear after PEEK_S anyway
                log.warning("%s: could not release %d peeked messages: %s", dlq.name,
                            len(chunk), exc)  # fmt: skip

    # -- the Backend DLQ operations -----------------------------------------------------
    def dlq_list(self, queue: str, limit: int = 100, offset: int = 0) -> list[DlqEntry]:
        """Peek at the queue's dead letters (hidden ``PEEK_S`` s, then released), newest first.

        One scan sees at most ``offset + limit`` of this queue's entries.
        """
        info = self._dlq_info(queue)
        found = self._scan(info, lambda env: env.queue == queue, "list",
                           max(offset, 0) + max(limit, 0))  # fmt: skip
        entries = sorted((entry_of(m, env) for m, env in found), key=lambda e: -e.entered_at)
        return entries[max(offset, 0) : max(offset, 0) + max(limit, 0)]

    def dlq_retry(self, queue: str, job_id: JobId | None = None) -> int:
        """Send dead letters back to the queue with fresh attempts; return how many."""
        info = self._dlq_info(queue)
        found = self._scan(info, lambda env: env.queue == queue and job_id in (None, env.id),
                           "retry", 1 if job_id is not None else SCAN_MAX)  # fmt: skip
        return len(found)

    def dlq_purge(self, queue: str) -> int:
        """Delete the queue's dead letters (a receive-and-delete scan, not PurgeQueue)."""
        info = self._dlq_info(queue)
        return len(self._scan(info, lambda env: env.queue == queue, "delete", SCAN_MAX))

    def dlq_size(self, queue: str) -> int:
        """The DLQ's approximate size (every queue's entries, if it is shared)."""
        return self.dlq_count(self._dlq_info(queue))

    def dlq_remove(self, queue: str, job_id: JobId) -> bool:
        info = self._dlq_info(queue)
        return bool(self._scan(info, lambda env: env.queue == queue and env.id == job_id,
                               "delete", 1))  # fmt: skip

    def dlq_config(self, queue: str, config: DlqConfig | None = None) -> DlqConfig:
        """Return what SQS does: entries kept for the DLQ's retention period, no auto retry.

        :raises UnsupportedError: asked for anything else (auto retry, bounds).
        """
        info = self._dlq_info(queue)
        out = self.api.call("get_queue_attributes", info.name, QueueUrl=info.dlq_url,
                            AttributeNames=["MessageRetentionPeriod"])  # fmt: skip
        current = DlqConfig(max_age=int(out["Attributes"]["MessageRetentionPeriod"]) * 1000,
                            max_entries=SCAN_MAX)  # fmt: skip
        if config is not None and config != current:
            raise refusal("dlq", "SQS keeps dead letters for the DLQ's MessageRetentionPeriod; "
                          "auto retry and bounds are not available")  # fmt: skip
        return current

    # -- drain and obliterate -----------------------------------------------------------
    def drain(self, queue: str) -> int:
        """Delete the waiting jobs (receive and delete); return how many.

        Jobs still inside SQS's DelaySeconds cannot be received and stay
        (logged); active jobs stay.
        """
        info = self.api.info(check_queue_name(queue))
        budget = int(self.approx(info.url, info.name).get("ApproximateNumberOfMessages", 0)) + 20
        gone = seen = 0
        while seen < budget:
            out = self.api.call("receive_message", info.name, QueueUrl=info.url,
                                MaxNumberOfMessages=10, VisibilityTimeout=30)  # fmt: skip
            handles = [m["ReceiptHandle"] for m in out.get("Messages") or []]
            if not handles:
                break
            seen += len(handles)
            gone += len(handles) - len(self.moves.delete(info, handles))
        delayed = int(self.approx(info.url, info.name).get("ApproximateNumberOfMessagesDelayed", 0))
        if delayed:
            log.warning("%s: drain left %d delayed messages (SQS cannot receive them before "
                        "their DelaySeconds ends)", info.name, delayed)  # fmt: skip
        return gone

    def obliterate(self, queue: str, force: bool = False) -> None:
        """Delete the SQS queue and this queue's dead letters (refused while jobs are active)."""
        info = self.api.info(check_queue_name(queue))
        active = int(
            self.approx(info.url, info.name).get("ApproximateNumberOfMessagesNotVisible", 0)
        )
        if active and not force:
            raise ConfigError(f"queue {queue!r} has {active} active jobs; obliterate(force=True)")
        if info.dlq_url is not None:
            self._scan(info, lambda env: env.queue == queue, "delete", SCAN_MAX)
        self.api.call("delete_queue", info.name, QueueUrl=info.url)
        self.api.forget(queue)


def _decode(m: dict[str, Any], queue: str) -> Envelope | None:
    try:
        env = decode_body(m["Body"], queue)
    except ValidationError:
        return None
    return env if env.id else replace(env, id=m["MessageId"])
