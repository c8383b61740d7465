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
import time
from collections import deque
from collections.abc import Callable, Sequence
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


class ListenCache:
    """Whether a queue has readers, as a publisher outside a transaction sees it: read from
    the kv records, trusted for ``LISTEN_CACHE_S``."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.seen: dict[str, tuple[float, bool]] = {}

    def __call__(self, queue: str) -> bool:
        now = time.monotonic()
        got = self.seen.get(queue)
        if got is not None and now - got[0] < LISTEN_CACHE_S:
            return got[1]
        try:
            yes = is_listened(self.backend.kv_get(LISTEN_NS, queue), self.backend.clock())
        except BunqError:
            yes = True  # unknown: publish (the write itself may fail and is logged)
        if len(self.seen) > 10_000:
            self.seen.clear()
        self.seen[queue] = (now, yes)
        return yes

    def forget(self, queue: str) -> None:
        """A reader of ``queue`` registered in this process: read again next time."""
        self.seen.pop(queue, None)


class MemoryEventLog:
    """Per-queue rings in this process (the memory engine's log)."""

    def __init__(self, ring: int = EVENT_RING) -> None:
        self.ring = ring
        self.cond = threading.Condition()
        self.logs: dict[str, deque[tuple[int, JobEvent]]] = {}
        self.seq: dict[str, int] = {}
        self.closed = False

    def publish_events(self, events: Sequence[JobEvent]) -> None:
        if not events:
            return
        with self.cond:
            for ev in events:
                log = self.logs.get(ev.queue)
                if log is None:
                    log = self.logs[ev.queue] = deque(maxlen=self.ring)
                n = self.seq.get(ev.queue, 0) + 1
                self.seq[ev.queue] = n
                log.append((n, ev))
            self.cond.notify_all()

    def event_reader(self, queue: str) -> _MemoryReader:
        with self.cond:
            return _MemoryReader(self, queue, self.seq.get(queue, 0))

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class _MemoryReader:
    def __init__(self, log: MemoryEventLog, queue: str, after: int) -> None:
        self.log, self.queue, self.after, self.missed = log, queue, after, 0

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
        pass


def wants(backend: Backend, kind: EventKind) -> bool:
    """Whether drivers should build and publish events of ``kind`` for ``backend`` (it
    keeps events, and does not record that kind itself: ``own_events``)."""
    return Capability.EVENTS in backend.capabilities and kind not in getattr(
        backend, "own_events", ()
    )


def publish(backend: Backend, events: Sequence[JobEvent]) -> None:
    """Publish ``events`` if the backend keeps events; a failure is logged, never raised
    (the change they describe is already made: readers of state still see it)."""
    if not events or Capability.EVENTS not in backend.capabilities:
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


class EventWriter:
    """Publication off the hot path: ``publish_events`` appends to a buffer that one thread
    writes with ``write(batch)``, a batch per write (what arrived while the last one was
    written, gathered for at most ``gather_ms``).

    An event therefore reaches readers a few ms after the change it describes, and the
    events of the last moments before a crash can be lost (the changes themselves are
    not: ``wait()`` reads the job's state). At most ``bound`` events wait; past that
    (the store is unreachable) the oldest are dropped, logged.
    """

    def __init__(self, write: Callable[[list[JobEvent]], None], name: str,
                 listened: Callable[[str], bool] | None = None, gather_ms: int = 5,
                 bound: int = EVENT_RING) -> None:  # fmt: skip
        self.write, self.name, self.gather_ms, self.bound = write, name, gather_ms, bound
        self.listened = listened
        self.cond = threading.Condition()
        self.buf: list[JobEvent] = []
        self.busy = False  # a batch is being written
        self.closed = False
        self.dropped = 0
        self._thread: threading.Thread | None = None

    def publish_events(self, events: Sequence[JobEvent]) -> None:
        if self.listened is not None:  # nobody reads a queue: its events are not written
            events = [e for e in events if self.listened(e.queue)]
        if not events:
            return
        with self.cond:
            if self.closed:
                return
            self.buf.extend(events)
            if len(self.buf) > self.bound:
                n = len(self.buf) - self.bound
                del self.buf[:n]
                self.dropped += n
                log.warning("events dropped: the store is not taking them", extra={"n": n})
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self.cond.notify()

    def _run(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: bool(self.buf) or self.closed)
                if self.closed:  # close() flushed what it could; the rest is dropped
                    return
            time.sleep(self.gather_ms / 1000)  # let a burst gather into one write
            self._write_once()

    def _write_once(self) -> None:
        with self.cond:
            batch, self.buf = self.buf, []
            self.busy = bool(batch)
        try:
            if batch:
                self.write(batch)
        except BunqError as exc:
            log.warning("events not written (%s); retrying", exc)
            with self.cond:
                self.buf[:0] = batch  # first in line again
            time.sleep(0.1)
        except Exception:  # a bug must not stop the thread: drop the batch, say so
            log.exception("events not written (dropped %d)", len(batch))
        finally:
            with self.cond:
                self.busy = False
                self.cond.notify_all()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything published so far is written (False: timed out)."""
        with self.cond:
            if self._thread is None:
                return True
            self.cond.notify_all()
            return self.cond.wait_for(lambda: not self.buf and not self.busy, timeout)

    def close(self) -> None:
        """Write what is buffered, then stop the thread. Idempotent."""
        self.flush()
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        if self._thread is not None:
            self._thread.join(5)
