"""Writing shared stores' events off the hot path, and only for queues someone reads.

:class:`EventWriter` buffers publications and writes them from one thread in batches
(PostgreSQL, Redis, and SQLite's events that are not written in the change's own
transaction); :class:`ListenCache` tells a publisher whether a queue has readers (their
registrations are kv records, :func:`~.eventlog.register_reader`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from ..errors import BunqError
from ..jobevents import JobEvent
from .base import Backend
from .eventlog import EVENT_RING, LISTEN_CACHE_S, LISTEN_NS, is_listened

log = logging.getLogger("bunq.events")


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
