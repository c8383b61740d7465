"""Job events over ``bunq://``: the server's ``SubscribeEvents`` push, read as JobEvents.

Each reader opens a connection of its own (a subscription is per connection, one
queue each), subscribes, and turns the pushed bunqueue-shaped events into
:class:`~bunq.jobevents.JobEvent` (``pushed`` → added, ``pulled`` → active, a
``failed`` whose error is a cancellation → cancelled, the rest by name). The server
publishes what it performs itself, for every client; drivers' own publications over
``bunq://`` are therefore not sent (``publish_events`` does nothing). A connection
that drops is reopened and resubscribed by the next read; events pushed while it was
down are not replayed (the server keeps no log: docs/events.md).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from ..client_link import Link
from ..errors import BunqError
from ..jobevents import EventKind, JobEvent
from .eventlog import READ_BATCH

_NAMES = {
    "pushed": EventKind.ADDED, "pulled": EventKind.ACTIVE, "active": EventKind.ACTIVE,
    "waiting": EventKind.WAITING, "delayed": EventKind.DELAYED,
    "progress": EventKind.PROGRESS, "completed": EventKind.COMPLETED,
    "failed": EventKind.FAILED, "retried": EventKind.RETRIED, "stalled": EventKind.STALLED,
    "removed": EventKind.REMOVED, "drained": EventKind.DRAINED, "paused": EventKind.PAUSED,
    "resumed": EventKind.RESUMED, "cancelled": EventKind.CANCELLED,
}  # fmt: skip
EVENT_BUFFER = 10_000  # events held for a reader that has not read them


def from_wire(ev: dict[str, Any]) -> JobEvent | None:
    """A bunqueue ``JobEvent`` map as a :class:`JobEvent` (None: a kind bunq does not map)."""
    kind = _NAMES.get(str(ev.get("eventType")))
    if kind is None:
        return None
    data: dict[str, Any] = {}
    if kind is EventKind.COMPLETED:
        data["result"] = ev.get("data")
    elif kind is EventKind.FAILED:
        error = ev.get("error")
        if isinstance(error, str) and error.startswith("JobCancelled"):
            kind, data = EventKind.CANCELLED, {"prev": "active"}
        else:
            data = {"error": error, "will_retry": not ev.get("terminal", False)}
    elif kind is EventKind.PROGRESS:
        data["progress"] = ev.get("progress")
    elif kind is EventKind.DELAYED:
        data["delay"] = int(ev.get("delay") or 0)
    elif kind is EventKind.REMOVED:
        data["prev"] = ev.get("prev")
    ts = ev.get("timestamp")
    return JobEvent(kind, str(ev.get("queue", "")), str(ev.get("jobId", "")),
                    int(ts) if isinstance(ts, (int, float)) else 0, data)  # fmt: skip


class RemoteEventReader:
    def __init__(self, like: Link, queue: str) -> None:
        self.queue, self.missed = queue, 0
        self.link = Link(like.host, like.port, like.token, timeout=like.timeout,
                         ping_interval=like.ping_interval, tls=like.tls)  # fmt: skip
        self.cond = threading.Condition()
        self.buf: deque[JobEvent] = deque()
        self.link.on_push = self._pushed
        self.gen = -1
        self._subscribe()

    def _pushed(self, msg: dict[str, Any]) -> None:
        ev = msg.get("event")
        got = from_wire(ev) if isinstance(ev, dict) else None
        if got is None:
            return
        with self.cond:
            if len(self.buf) >= EVENT_BUFFER:
                self.buf.popleft()
                self.missed += 1
            self.buf.append(got)
            self.cond.notify_all()

    def _subscribe(self) -> None:
        conn = self.link._conn
        if conn is not None and not conn.dead and self.gen == self.link.generation:
            return
        self.link.call({"cmd": "SubscribeEvents", "queue": self.queue}, idempotent=True)
        self.gen = self.link.generation

    def read(self, timeout_ms: int) -> list[JobEvent]:
        try:
            self._subscribe()
        except BunqError:
            pass  # the server is away: wait, try again on the next read
        with self.cond:
            self.cond.wait_for(lambda: bool(self.buf), max(timeout_ms, 0) / 1000)
            n = min(len(self.buf), READ_BATCH)
            return [self.buf.popleft() for _ in range(n)]

    def close(self) -> None:
        self.link.close()
