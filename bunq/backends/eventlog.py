"""The event part of the Backend contract (``Capability.EVENTS``) and the in-process log.

A backend with :attr:`~bunq.values.Capability.EVENTS` keeps a bounded log of
:class:`~bunq.jobevents.JobEvent` per queue that other processes (and hosts, where the
backend is shared) can read:

- ``publish_events(events)``: append (one write for the batch);
- ``event_reader(queue)``: an :class:`EventReader` that returns the events published
  after it was opened, in order, blocking up to a timeout when there are none.

Each log is a ring: the newest ``EVENT_RING`` events per store (memory: per queue) are
kept, so a reader that falls further behind misses the oldest (``EventReader.missed``
counts what it knows it lost). Where events live per backend: memory — this module's
:class:`MemoryEventLog`; SQLite and PostgreSQL — an events table
(:mod:`bunq.backends.sql.events`); Redis — a capped stream per queue
(:mod:`bunq.backends.redis.events`); ``bunq://`` — the server's ``SubscribeEvents``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from typing import Protocol

from ..errors import BunqError
from ..jobevents import EventKind, JobEvent
from .base import Backend, Capability, require

log = logging.getLogger("bunq.events")
EVENT_RING = 10_000  # events kept per log (memory: per queue)
READ_BATCH = 1000  # most events one read returns
LISTEN_NS = "events:listening"  # kv records: queue -> until when someone reads its events
LISTEN_TTL_MS = 60_000  # a reader's registration lasts this long...
LISTEN_REFRESH_S = 20.0  # ...and is renewed this often while it reads
LISTEN_CACHE_S = 1.0  # how long a publisher trusts what it read about a queue's readers


class EventReader(Protocol):
    """Reads one queue's events in order, from when it was opened."""

    missed: int  # events known to have been dropped by the ring before this reader saw them

    def read(self, timeout_ms: int) -> list[JobEvent]:
        """Return the next events (at most READ_BATCH), waiting up to ``timeout_ms``."""
        ...

    def close(self) -> None: ...


class EventLog(Protocol):
    def publish_events(self, events: Sequence[JobEvent]) -> None: ...
    def event_reader(self, queue: str) -> EventReader: ...


def event_log(backend: Backend) -> EventLog:
    """The backend as an :class:`EventLog`; UnsupportedError without ``Capability.EVENTS``."""
    require(backend, Capability.EVENTS)
    return backend  # type: ignore[return-value]


def register_reader(backend: Backend, queue: str) -> None:
    """Say that someone reads ``queue``'s events (shared stores record events of a queue
    only while someone does: no cost when nobody listens). Call before taking a cursor."""
    until = backend.clock() + LISTEN_TTL_MS
    backend.kv_put(LISTEN_NS, queue, str(until).encode())


def is_listened(value: bytes | None, now: int) -> bool:
    try:
        return value is not None and int(value) > now
    except ValueError:
        return False


class MemoryEventLog:
    """Per-queue rings in this process (the memory engine's log), kept while the queue has
    open readers."""

    def __init__(self, ring: int = EVENT_RING) -> None:
        self.ring = ring
        self.cond = threading.Condition()
        self.logs: dict[str, deque[tuple[int, JobEvent]]] = {}
        self.seq: dict[str, int] = {}
        self.readers: dict[str, int] = {}  # open readers per queue: nobody reads, nothing kept
        self.closed = False

    def publish_events(self, events: Sequence[JobEvent]) -> None:
        if not events:
            return
        with self.cond:
            for ev in events:
                if not self.readers.get(ev.queue):
                    continue
                log = self.logs.get(ev.queue)
                if log is None:
                    log = self.logs[ev.queue] = deque(maxlen=self.ring)
                n = self.seq.get(ev.queue, 0) + 1
                self.seq[ev.queue] = n
                log.append((n, ev))
            self.cond.notify_all()

    def event_reader(self, queue: str) -> _MemoryReader:
        with self.cond:
            self.readers[queue] = self.readers.get(queue, 0) + 1
            return _MemoryReader(self, queue, self.seq.get(queue, 0))

    def has_readers(self, queue: str) -> bool:
        return bool(self.readers.get(queue))

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class _MemoryReader:
    def __init__(self, log: MemoryEventLog, queue: str, after: int) -> None:
        self.log, self.queue, self.after, self.missed = log, queue, after, 0
        self.open = True

    def read(self, timeout_ms: int) -> list[JobEvent]:
        lg = self.log
        with lg.cond:
            lg.cond.wait_for(lambda: lg.closed or lg.seq.get(self.queue, 0) > self.after,
                             max(timeout_ms, 0) / 1000)  # fmt: skip
            ring = lg.logs.get(self.queue)
            if not ring or ring[-1][0] <= self.after:
                return []
            first = ring[0][0]
            if first > self.after + 1:
                self.missed += first - self.after - 1
            start = max(self.after + 1 - first, 0)
            out = [ring[i] for i in range(start, min(len(ring), start + READ_BATCH))]
        self.after = out[-1][0]
        return [ev for _, ev in out]

    def close(self) -> None:
        with self.log.cond:
            if self.open:
                self.open = False
                n = self.log.readers.get(self.queue, 0) - 1
                if n > 0:
                    self.log.readers[self.queue] = n
                else:
                    self.log.readers.pop(self.queue, None)
                    self.log.logs.pop(self.queue, None)  # nobody reads: drop its ring


#: read on every add: on Python 3.11 an attribute of an enum class goes through
#: ``EnumType.__getattr__``'s slot hook (~4x a module global's cost)
_EVENTS = Capability.EVENTS


def wants(backend: Backend, kind: EventKind, queue: str) -> bool:
    """Whether drivers should build and publish events of ``kind`` for ``queue`` (the
    backend keeps events, does not record that kind itself (``own_events``), and, where
    it can tell at once (memory: ``has_readers``), someone reads the queue)."""
    if _EVENTS not in backend.capabilities or kind in getattr(backend, "own_events", ()):
        return False
    has_readers = getattr(backend, "has_readers", None)
    return has_readers is None or bool(has_readers(queue))


def publish(backend: Backend, events: Sequence[JobEvent]) -> None:
    """Publish ``events`` if the backend keeps events; a failure is logged, never raised
    (the change they describe is already made: readers of state still see it)."""
    if not events or _EVENTS not in backend.capabilities:
        return
    own = getattr(backend, "own_events", None)  # recorded by the backend itself
    if own:
        events = [e for e in events if e.kind not in own]
        if not events:
            return
    try:
        backend.publish_events(events)  # type: ignore[attr-defined]
    except BunqError as exc:
        log.warning("events not published: %s", exc, extra={"events": len(events)})
