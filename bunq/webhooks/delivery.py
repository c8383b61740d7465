"""Delivering webhooks off the hot path: a bounded queue, a sender thread, retries.

:meth:`Dispatcher.dispatch` is what an event source calls (the server's event
hub today; the library's event feed can call it the same way): it finds the
matching webhooks in a snapshot and appends one delivery per webhook to a
bounded queue, then returns. It never blocks and never does I/O: when the queue
is full the oldest delivery is dropped and counted (``dropped``).

The sender thread POSTs each delivery (JSON, signed: :mod:`.signing`) to the
address the target guard checked, with a timeout. A connection error, a
timeout, 408, 429 or a 5xx answer is retried after ``backoff_ms * 2**(n-1)``
(capped at ``max_backoff_ms``) until ``attempts`` are spent; another 4xx, or a
redirect, fails at once. Every attempt is written to a bounded delivery log
(:meth:`deliveries`). Deliveries are not durable: those still queued when the
process stops are lost (the log says what was delivered).
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import json
import logging
import random
import ssl
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..errors import BunqError, UnsupportedError, ValidationError, WebhookTargetRefused
from .guard import TargetGuard
from .model import WEBHOOK_EVENT_OF, Webhook
from .signing import sign
from .store import Webhooks
from .transport import post

log = logging.getLogger("bunq.webhooks")
Outcome = Literal["delivered", "retrying", "failed", "refused"]
RETRY_STATUSES = frozenset({408, 425, 429})
_RESERVED = frozenset({"eventType", "queue", "jobId", "timestamp"})


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    """One attempt at one delivery (``id`` is the delivery's, the same on each retry)."""

    id: str
    webhook_id: str
    event: str
    queue: str
    job_id: str | None
    attempt: int
    outcome: Outcome
    status: int | None
    error: str | None
    at: int
    duration_ms: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class _Pending:
    id: str
    hook: Webhook
    event: str
    queue: str
    doc: dict[str, Any]
    attempt: int = 0
    body: bytes | None = None


@dataclass(slots=True)
class _Stats:
    succeeded: int = 0
    failed: int = 0
    last_triggered: int | None = None


@dataclass(slots=True)
class _Snapshot:
    """The enabled webhooks, by event name; ``queues``: queues any of them listens to
    (``every``: one listens to all)."""

    by_event: dict[str, list[Webhook]] = field(default_factory=dict)
    queues: frozenset[str] = frozenset()
    every: bool = False
    ids: frozenset[str] = frozenset()


class Dispatcher:
    """Sends matching events to webhooks (see the module docstring).

    :param webhooks: where the webhooks are stored (re-read every ``refresh_s``).
    :param guard: checks each delivery's resolved addresses (default: the store's).
    :param max_pending: deliveries queued (and, apart, retries waiting) at most.
    :param attempts: tries per delivery; ``backoff_ms``: the first retry's delay.
    """

    def __init__(self, webhooks: Webhooks, *, guard: TargetGuard | None = None,
                 max_pending: int = 10_000, attempts: int = 5, backoff_ms: int = 1000,
                 max_backoff_ms: int = 300_000, timeout_s: float = 10.0, log_size: int = 1000,
                 refresh_s: float = 2.0, tls: ssl.SSLContext | None = None) -> None:  # fmt: skip
        if max_pending < 1 or attempts < 1 or log_size < 1:
            raise ValidationError("max_pending, attempts and log_size must be >= 1")
        self.webhooks, self.guard = webhooks, guard or webhooks.guard
        self.max_pending, self.attempts = max_pending, attempts
        self.backoff_ms, self.max_backoff_ms = backoff_ms, max_backoff_ms
        self.timeout_s, self.refresh_s = timeout_s, refresh_s
        self._tls = tls or ssl.create_default_context()
        self._cond = threading.Condition()
        self._ready: deque[_Pending] = deque()
        self._retry: list[tuple[float, int, _Pending]] = []
        self._seq = itertools.count()
        self._log: deque[DeliveryRecord] = deque(maxlen=log_size)
        self._stats: dict[str, _Stats] = {}
        self._snap = _Snapshot()
        self._listeners: list[Callable[[], None]] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        self._reading = threading.Lock()
        self.dropped = 0
        self.delivered = 0
        self.failed = 0
        webhooks.on_change(self.refresh)
        self.refresh()

    # -- the event side (any thread, never blocks) ------------------------------------
    @property
    def active(self) -> bool:
        """Whether any enabled webhook exists (else :meth:`dispatch` does nothing)."""
        return bool(self._snap.by_event)

    def wants(self, queue: str) -> bool:
        """Whether an enabled webhook listens to ``queue``."""
        snap = self._snap
        return snap.every or queue in snap.queues

    def listened(self) -> tuple[frozenset[str], bool]:
        """The queues enabled webhooks name, and whether one listens to every queue."""
        snap = self._snap
        return snap.queues, snap.every

    def on_change(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` (from the sender thread) when the set of webhooks changed."""
        self._listeners.append(fn)

    def dispatch(self, event: str, queue: str, payload: Mapping[str, Any]) -> int:
        """Queue ``event`` of ``queue`` for every matching webhook; return how many.

        ``event``: a job-event name (``completed``, bunqueue's ``pushed``/``pulled``...)
        or a webhook event (``job.completed``); ``payload``: the event's fields
        (``jobId``, ``data``, ``error``...), sent beside ``event``, ``timestamp``, ``queue``.
        A terminal ``failed`` (``terminal: true``) is also ``job.dead``.
        """
        name = WEBHOOK_EVENT_OF.get(event)
        if name is None or not self._snap.by_event:
            return 0
        n = self._queue(name, queue, payload)
        if name == "job.failed" and payload.get("terminal"):
            n += self._queue("job.dead", queue, payload)
        return n

    def _queue(self, name: str, queue: str, payload: Mapping[str, Any]) -> int:
        hooks = [h for h in self._snap.by_event.get(name, ()) if h.queue in (None, queue)]
        if not hooks:
            return 0
        doc = {"event": name, "timestamp": int(time.time() * 1000), "queue": queue,
               "jobId": payload.get("jobId"),
               **{k: v for k, v in payload.items() if k not in _RESERVED}}  # fmt: skip
        with self._cond:
            if self._closed:
                return 0
            for hook in hooks:
                if len(self._ready) >= self.max_pending:
                    self._ready.popleft()
                    self.dropped += 1
                self._ready.append(_Pending(uuid.uuid4().hex, hook, name, queue, doc))
            self._cond.notify()
        return len(hooks)

    # -- reading back -----------------------------------------------------------------
    def deliveries(self, webhook_id: str | None = None, limit: int = 100) -> list[DeliveryRecord]:
        """The latest attempts, newest first (of one webhook, or all)."""
        with self._cond:
            items = list(self._log)
        items.reverse()
        if webhook_id is not None:
            items = [r for r in items if r.webhook_id == webhook_id]
        return items[: max(limit, 0)]

    def stats(self, webhook_id: str) -> dict[str, Any]:
        """This process's delivery counts of one webhook."""
        s = self._stats.get(webhook_id) or _Stats()
        return {"succeeded": s.succeeded, "failed": s.failed, "last_triggered": s.last_triggered}

    def pending(self) -> int:
        with self._cond:
            return len(self._ready) + len(self._retry)

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> Dispatcher:
        """Start the sender thread; return self."""
        self._thread = threading.Thread(target=self._run, name="bunq-webhooks", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop the sender (deliveries still queued are dropped); idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> Dispatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def refresh(self) -> None:
        """Re-read the webhooks from the store (the sender does this every ``refresh_s``;
        a change made through :attr:`webhooks` does it at once, on the changer's thread)."""
        with self._reading:  # one reader at a time: a later read is never overwritten
            try:
                hooks = self.webhooks.list()
            except UnsupportedError:  # no shared records (SQS): no webhooks, nothing to read
                self.refresh_s = 24 * 3600.0
                return
            except BunqError as exc:
                log.warning("cannot read webhooks: %s", exc)
                return
            self._install(hooks)

    def _install(self, hooks: list[Webhook]) -> None:
        by_event: dict[str, list[Webhook]] = {}
        for h in hooks:
            if h.enabled:
                for e in h.events:
                    by_event.setdefault(e, []).append(h)
        live = [h for h in hooks if h.enabled]
        snap = _Snapshot(by_event, frozenset(h.queue for h in live if h.queue is not None),
                         any(h.queue is None for h in live),
                         frozenset(h.id for h in live))  # fmt: skip
        changed = snap != self._snap
        self._snap = snap
        if changed:
            for fn in self._listeners:
                fn()

    # -- the sender thread ------------------------------------------------------------
    def _run(self) -> None:
        next_refresh = time.monotonic() + self.refresh_s
        while True:
            item: _Pending | None = None
            with self._cond:
                while item is None:
                    if self._closed:
                        return
                    now = time.monotonic()
                    if now >= next_refresh:
                        break
                    if self._retry and self._retry[0][0] <= now:
                        item = heapq.heappop(self._retry)[2]
                    elif self._ready:
                        item = self._ready.popleft()
                    else:
                        due = min(next_refresh, self._retry[0][0] if self._retry else next_refresh)
                        self._cond.wait(max(due - now, 0.001))
            if item is None:
                next_refresh = time.monotonic() + self.refresh_s
                self.refresh()
                continue
            try:
                self._deliver(item)
            except Exception as exc:  # a bug must not stop every later delivery: log, go on
                log.exception("webhook delivery %s failed", item.id)
                self._finish(
                    item, "failed", None, f"{type(exc).__name__}: {exc}", time.perf_counter()
                )

    def _deliver(self, p: _Pending) -> None:
        if p.hook.id not in self._snap.ids:  # removed or disabled since it was queued
            self._finish(p, "failed", None, "webhook removed or disabled", time.perf_counter())
            return
        if p.body is None:
            p.body = json.dumps(p.doc, default=str, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "bunq-webhooks",
                   "X-Webhook-Event": p.event, "X-Webhook-Id": p.id,
                   "X-Webhook-Attempt": str(p.attempt + 1),
                   **sign(p.hook.secret, p.body)}  # fmt: skip
        start = time.perf_counter()
        status: int | None = None
        error: str | None = None
        retry = False
        try:
            status = post(self.guard, p.hook.url, headers, p.body, self.timeout_s, self._tls)
            if not 200 <= status < 300:
                error = f"HTTP {status}"
                retry = status >= 500 or status in RETRY_STATUSES
        except WebhookTargetRefused as exc:
            self._finish(p, "refused", None, str(exc), start)
            return
        except (OSError, http.client.HTTPException, ValidationError) as exc:
            error, retry = f"{type(exc).__name__}: {exc}", True
        p.attempt += 1
        if error is None:
            self._finish(p, "delivered", status, None, start)
        elif retry and p.attempt < self.attempts:
            self._finish(p, "retrying", status, error, start)
            pause = min(self.backoff_ms * 2 ** (p.attempt - 1), self.max_backoff_ms)
            due = time.monotonic() + pause * (0.9 + random.random() * 0.2) / 1000
            with self._cond:
                if len(self._retry) >= self.max_pending:
                    self.dropped += 1
                    return
                heapq.heappush(self._retry, (due, next(self._seq), p))
        else:
            self._finish(p, "failed", status, error, start)

    def _finish(self, p: _Pending, outcome: Outcome, status: int | None, error: str | None,
                start: float) -> None:  # fmt: skip
        now = int(time.time() * 1000)
        rec = DeliveryRecord(p.id, p.hook.id, p.event, p.queue, p.doc.get("jobId"),
                             max(p.attempt, 1), outcome, status, error, now,
                             int((time.perf_counter() - start) * 1000))  # fmt: skip
        stats = self._stats.setdefault(p.hook.id, _Stats())
        if outcome == "delivered":
            stats.succeeded += 1
            stats.last_triggered = now
            self.delivered += 1
        elif outcome != "retrying":
            stats.failed += 1
            self.failed += 1
            fields = {"webhook_id": p.hook.id, "event": p.event, "queue": p.queue}
            log.warning("webhook delivery %s failed: %s", p.id, error, extra=fields)
        with self._cond:
            self._log.append(rec)
