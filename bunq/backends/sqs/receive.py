"""The receive side of SQSBackend: leases, long polls, and what a receive finds.

A lease is ReceiveMessage (10 per call, several calls for more). A message
received by :meth:`Receiver.wait` is kept for the next lease (its visibility
extended to that lease's length when needed), so a Worker's ``lease`` then
``wait`` costs no extra receive. A received message that must not run now is
dealt with here: not yet due (a delay past 900 s) is hidden again or re-sent,
past its TTL or out of attempts (its last lease lapsed) goes to the DLQ, and
a body that is not a bunq job goes to the DLQ with reason ``unknown``.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ...errors import BackendError, ValidationError
from ...job import FailureReason, JobState, Lease, now_ms
from ..base import Clock, check_queue_name
from .client import Api, QueueInfo
from .codec import BASE, DUE, Envelope, decode_body, read_number
from .config import SqsConfig
from .fences import Fences, Held
from .moves import MAX_VISIBILITY_S, Copy, Mover, copy_attrs, dead_attrs, delay_split

log = logging.getLogger("bunq.sqs")
CACHE_MARGIN_MS = 1_000  # a message received by wait() is handed out only with this much left
CACHE_KEEP = 0.8  # ... and as it is while it has this share of the lease asked for left
# Asked with ``AttributeNames``: deprecated in favour of MessageSystemAttributeNames but still
# served, and the one every emulator (moto, LocalStack, ElasticMQ) and boto3 >= 1.34 knows.
RECEIVE_ATTRS = ["ApproximateReceiveCount", "SentTimestamp"]
Cached = tuple[dict[str, Any], int, int]  # message, received at (ms), visibility (s)


def visibility(lease_ms: int) -> int:
    """Return the VisibilityTimeout (whole seconds, at least 1, at most 12 h) for a lease."""
    return min(max(1, math.ceil(lease_ms / 1000)), MAX_VISIBILITY_S)


class Receiver:
    """Leases and long polls over SQS (a part SQSBackend holds and delegates to).

    Messages received by :meth:`wait` are kept per queue until a
    lease takes them or :meth:`close` gives them back.
    """

    def __init__(self, cfg: SqsConfig, clock: Clock, api: Api, moves: Mover,
                 fences: Fences) -> None:  # fmt: skip
        self.cfg, self.clock, self.api, self.moves, self.fences = cfg, clock, api, moves, fences
        self._lock = threading.Lock()
        self._cache: dict[str, deque[Cached]] = {}
        self._vis: dict[str, int] = {}  # queue -> visibility of its last lease (for wait)

    def forget(self, queue: str) -> None:
        """Drop what :meth:`wait` kept for ``queue`` (the queue is gone)."""
        with self._lock:
            self._cache.pop(queue, None)

    def close(self) -> None:
        """Give back messages received by :meth:`wait` and not leased."""
        with self._lock:
            cached, self._cache = self._cache, {}
        for queue, items in cached.items():
            try:
                self._give_back(self.api.info(queue), [m for m, _, _ in items])
            except Exception as exc:  # closing must not raise; SQS redelivers them
                log.warning("%s: could not give back %d messages: %s", queue, len(items), exc)

    # -- leases ------------------------------------------------------------------------
    def lease(self, queue: str, n: int, lease_ms: int, owner: str = "") -> list[Lease]:
        """Receive up to ``n`` jobs (messages received by :meth:`wait` first).

        Messages that are not due (long delays), past their TTL, or whose
        previous attempt was lost with no attempts left are handled here and
        not returned.
        """
        check_queue_name(queue)
        if n <= 0:
            return []
        info = self.api.info(queue)
        vis = visibility(lease_ms)
        self._vis[queue] = vis
        out = self._from_cache(info, n, vis, owner)
        first = True
        while len(out) < n:
            ask = min(10, n - len(out))
            at = self.clock()
            msgs = self._receive(info, ask, vis, self.cfg.lease_wait if first and not out else 0)
            first = False
            out += [ls for m in msgs if (ls := self._admit(info, m, at, at + vis * 1000, owner))]
            if len(msgs) < ask:
                break
        return out

    def wait(self, queue: str, timeout_ms: int) -> bool:
        """Long-poll (WaitTimeSeconds, whole seconds up to 20) and keep what arrives.

        Messages received here are handed out by the next :meth:`lease` (their
        visibility extended to that lease's length if needed); :meth:`close`
        gives back any left.
        """
        info = self.api.info(check_queue_name(queue))
        with self._lock:
            if self._cache.get(queue):
                return True
        secs = min(20, max(0, math.ceil(timeout_ms / 1000)))
        vis = self._vis.get(queue, info.visibility_s)
        at = self.clock()
        msgs = self._receive(info, 10, vis, secs)
        if msgs:
            with self._lock:
                self._cache.setdefault(queue, deque()).extend((m, at, vis) for m in msgs)
        return bool(msgs)

    def _receive(self, info: QueueInfo, n: int, vis: int, wait_s: int) -> list[dict[str, Any]]:
        out = self.api.call("receive_message", info.name, QueueUrl=info.url,
                            MaxNumberOfMessages=n, VisibilityTimeout=vis, WaitTimeSeconds=wait_s,
                            AttributeNames=RECEIVE_ATTRS,
                            MessageAttributeNames=["All"])  # fmt: skip
        return list(out.get("Messages") or [])

    def _from_cache(self, info: QueueInfo, n: int, vis: int, owner: str) -> list[Lease]:
        with self._lock:
            cached = self._cache.get(info.queue)
            items = [cached.popleft() for _ in range(min(n, len(cached)))] if cached else []
        now, out = self.clock(), []
        live = [(m, at, v) for m, at, v in items if at + v * 1000 - now >= CACHE_MARGIN_MS]
        if len(live) < len(items):  # lapsed unused: SQS hands them out again (a receive spent)
            log.debug("%s: %d messages from wait() lapsed", info.name, len(items) - len(live))
        want = vis * 1000 * CACHE_KEEP  # less left than this: extend to the full lease first
        short = {m["ReceiptHandle"] for m, at, v in live if at + v * 1000 - now < want}
        extended = self._extend_cached(info, [m for m, _, _ in live if m["ReceiptHandle"] in short],
                                       vis)  # fmt: skip
        for m, at, v in live:
            expires = at + v * 1000
            if m["ReceiptHandle"] in short:
                if m["ReceiptHandle"] not in extended:
                    continue  # SQS refused the extension: it is someone else's now
                expires = now + vis * 1000
            lease = self._admit(info, m, at, expires, owner)
            if lease is not None:
                out.append(lease)
        return out

    def _extend_cached(self, info: QueueInfo, msgs: list[dict[str, Any]], vis: int) -> set[str]:
        done: set[str] = set()
        for start in range(0, len(msgs), 10):
            chunk = msgs[start : start + 10]
            res = self.api.call("change_message_visibility_batch", info.name, QueueUrl=info.url,
                                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"],
                                          "VisibilityTimeout": vis}
                                         for i, m in enumerate(chunk)])  # fmt: skip
            done |= {chunk[int(e["Id"])]["ReceiptHandle"] for e in res.get("Successful") or []}
        return done

    def _admit(self, info: QueueInfo, m: dict[str, Any], received_at: int, expires: int,
               owner: str) -> Lease | None:  # fmt: skip
        """Turn a received message into a lease, or deal with it (park, DLQ) and return None."""
        handle, now = m["ReceiptHandle"], self.clock()
        try:
            env = decode_body(m["Body"], info.queue)
        except ValidationError as exc:
            why = str(exc)
            self._aside(info, m, lambda: self._poison(info, m, why))
            return None
        sys_attrs, attrs = m.get("Attributes") or {}, m.get("MessageAttributes")
        count, base = int(sys_attrs.get("ApproximateReceiveCount", 1)), read_number(attrs, BASE)
        attempt = count + (base or 0)
        if not env.id:
            env = replace(
                env,
                id=m["MessageId"],
                created_at=env.created_at or int(sys_attrs.get("SentTimestamp", 0)),
            )
        due = read_number(attrs, DUE)
        if due is not None:
            self._aside(info, m, lambda: self._park(info, m, env, base or 0, due, now))
            return None
        dead = None
        if env.expire_at is not None and env.expire_at <= now:
            dead = (FailureReason.TTL_EXPIRED, "ttl expired before the job started")
        elif attempt > env.opts.attempts:
            dead = (FailureReason.STALLED, f"lease of attempt {attempt - 1} of "
                    f"{env.opts.attempts} expired without an outcome")  # fmt: skip
        if dead is not None:
            copy = Copy(m["Body"], dead_attrs(dead[0], dead[1], attempt - 1, 0, now), 0,
                        env.opts.group)  # fmt: skip
            self._aside(info, m, lambda: self.moves.dead_letter(info, handle, copy, probe=False))
            return None
        job = env.job(JobState.ACTIVE, attempt, env.created_at + env.opts.delay, now)
        self.fences.remember(handle, Held(attempt, received_at), job.id)
        return Lease(job, handle, attempt, expires, owner)

    def _aside(self, info: QueueInfo, m: dict[str, Any], move: Callable[[], object]) -> None:
        """Run a move for a message that is not handed out; on failure SQS redelivers it."""
        try:
            move()
        except BackendError as exc:
            log.warning("%s: message %s left for redelivery: %s", info.name, m.get("MessageId"),
                        exc)  # fmt: skip

    def _park(self, info: QueueInfo, m: dict[str, Any], env: Envelope, base: int, due: int,
              now: int) -> None:  # fmt: skip
        """Re-hide a message received before its due time, or re-send it when it is due.

        Hiding (ChangeMessageVisibility, up to 12 h) costs one receive each
        time; a fresh copy is sent instead when the delay left fits
        DelaySeconds, when the receive count nears the RedrivePolicy's
        maxReceiveCount, or when the message nears its retention period.
        """
        handle, left_ms = m["ReceiptHandle"], due - now
        if left_ms > 0:
            count = int((m.get("Attributes") or {}).get("ApproximateReceiveCount", 1))
            sent = int((m.get("Attributes") or {}).get("SentTimestamp", 0))
            hide_s = min(math.ceil(left_ms / 1000), MAX_VISIBILITY_S)
            near_redrive = info.max_receives is not None and count + 1 >= info.max_receives
            near_expiry = (
                sent and now_ms() - sent + hide_s * 1000 > (info.retention_s - 3600) * 1000
            )
            if not (near_redrive or near_expiry or left_ms <= 900_000):
                self.moves.hide(info, handle, hide_s)
                return
        delay_s, new_due = delay_split(max(left_ms, 0), now)
        copy = Copy(m["Body"], copy_attrs(base, new_due), delay_s, env.opts.group)
        self.moves.replace(info, handle, copy, probe=False)

    def _poison(self, info: QueueInfo, m: dict[str, Any], why: str) -> None:
        log.error("%s: message %s is not a bunq job (%s)", info.name, m.get("MessageId"), why)
        if info.dlq_url is None:  # leave it to SQS; come back in 12 h
            self.moves.hide(info, m["ReceiptHandle"], MAX_VISIBILITY_S)
            return
        copy = Copy(m["Body"], dead_attrs(FailureReason.UNKNOWN, why, 0, 0, self.clock()))
        self.moves.dead_letter(info, m["ReceiptHandle"], copy, probe=False)

    def _give_back(self, info: QueueInfo, msgs: list[dict[str, Any]]) -> None:
        items = []
        for m in msgs:
            count = int((m.get("Attributes") or {}).get("ApproximateReceiveCount", 1))
            attrs = m.get("MessageAttributes")
            base = count + (read_number(attrs, BASE) or 0) - 1
            group = None
            if info.fifo:
                try:
                    group = decode_body(m["Body"]).opts.group
                except ValidationError:
                    pass
            items.append(
                (
                    m["ReceiptHandle"],
                    Copy(m["Body"], copy_attrs(base, read_number(attrs, DUE)), 0, group),
                )
            )
        self.moves.give_back(info, items)
