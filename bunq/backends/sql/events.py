"""Job events on SQL (``Capability.EVENTS``): an events table that is a bounded ring.

One table ``events(id, queue, ts, body)`` — a row holds the events of one queue that
one transaction or write made, encoded together — per database (SQLite) or schema and prefix
(PostgreSQL); publications are written behind by an
:class:`~bunq.backends.eventlog.EventWriter` (off the hot path: a batch per write), each
batch in one statement and, every
``TRIM_EVERY`` publishes, deletes what lies more than ``EVENT_RING`` ids behind the
newest (a primary-key range). A reader remembers the last id it returned and reads
``id > cursor`` of its queue through the ``(queue, id)`` index.

Wake-ups: SQLite rings the file's doorbell (:mod:`.doorbell`; each reader binds a
socket of its own there, and a ring for jobs wakes it too: a hint, it reads again);
PostgreSQL sends ``NOTIFY`` with the queue name on the commit of the
insert, read by one LISTEN connection per backend (:class:`.pgconn.Listener`) that
reconnects by itself. Readers fetch rows by cursor, never from the notification, so a
dropped connection loses nothing the ring still holds: after a reconnect every reader
reads again from its cursor.

PostgreSQL assigns ids before commit, so a transaction may commit an id lower than
one already read. A PostgreSQL reader therefore re-reads the ids of the last
``SETTLE_S`` seconds (skipping those it returned) and moves its cursor only past ids it
saw that long ago: an insert committing more than ``SETTLE_S`` after taking its id
could be missed (docs/events.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...jobevents import EventKind, JobEvent, by_queue, pack_events, unpack_events
from ..eventlog import (
    EVENT_RING,
    LISTEN_NS,
    LISTEN_REFRESH_S,
    READ_BATCH,
    is_listened,
    register_reader,
)
from ..eventwriter import EventWriter, ListenCache
from .doorbell import Doorbell
from .sharedcount import SharedCounter

# What SQLite records in the transaction of the change itself (the drivers publish the rest)
TX_EVENTS = frozenset({EventKind.ADDED, EventKind.WAITING, EventKind.DELAYED, EventKind.ACTIVE,
                       EventKind.COMPLETED, EventKind.FAILED, EventKind.RETRIED,
                       EventKind.CANCELLED})  # fmt: skip
TRIM_EVERY = 200  # publishes between trims of the ring
SETTLE_S = 2.0  # PostgreSQL: how long a reader keeps re-reading ids it has seen
RECENT_MAX = 4 * READ_BATCH  # PostgreSQL: most ids a reader re-reads
HEARD_MAX = 10_000  # SQLite: queues whose registration a writer remembers


class SqlEventLog:
    """The events table of one SQL backend (``backend``: its transactions and unit runner)."""

    def __init__(self, backend: Any, table: str, index: str, postgres: bool, channel: str = "",
                 listener: Any = None, bell: Doorbell | None = None) -> None:  # fmt: skip
        self.b, self.t, self.index, self.pg = backend, table, index, postgres
        self.channel, self.listener = channel, listener
        self._bell = bell  # SQLite: the file's doorbell (rung for jobs and events alike)
        self.bell_path = "" if bell is None else bell.dir[: -len(".bell")]
        # SQLite: the generation of the readers' registrations, shared by every process
        # (bumped in the transaction of a registration), and what this process last read
        # per queue: (generation, registered until), trusted while neither moved on.
        self._gen = None if bell is None else SharedCounter(bell.dir + ".listeners")
        self._heard: dict[str, tuple[int, int]] = {}
        self._ready = False
        self._lock = threading.Lock()
        self._publishes = 0
        p = "%({})s" if postgres else ":{}"
        self.p = p.format
        self._listened = ListenCache(backend)
        self._writer = EventWriter(self._write, "bunq-sql-events", self._listened)
        self.publish_events = self._writer.publish_events
        self.has_readers = self._listened  # drivers build no events nobody reads
        self.flush_events = self._writer.flush

    # -- schema --------------------------------------------------------------------------
    def _ddl(self) -> list[str]:
        key = "BIGSERIAL" if self.pg else "INTEGER"
        blob = "BYTEA" if self.pg else "BLOB"
        auto = "" if self.pg else " AUTOINCREMENT"
        return [
            f"CREATE TABLE IF NOT EXISTS {self.t} (id {key} PRIMARY KEY{auto},"
            f" queue TEXT NOT NULL, ts BIGINT NOT NULL, body {blob} NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {self.index} ON {self.t} (queue, id)",
        ]

    def _ensure(self) -> None:
        """Create the table (once per backend object; SQLite: when the backend opens)."""
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return

            def create() -> None:
                with self.b._begin() as tx:
                    if self.pg:  # two brokers creating at once: serialise on a lock key
                        tx.sql("SELECT pg_advisory_xact_lock(hashtext(%(k)s))", {"k": self.t})
                    for s in self._ddl():
                        tx.sql(s, {})

            self.b._run_unit(create, idempotent=True)
            self._ready = True

    # -- writing in the change's transaction (SQLite) ------------------------------------
    def write_in(self, tx: Any, queues: Iterable[str],
                 build: Callable[[], list[JobEvent]]) -> None:  # fmt: skip
        """Insert the events ``build()`` makes, in ``tx`` (the transaction of the change
        they describe), for the ``queues`` someone reads (else nothing is built)."""
        now = self.b.clock()
        heard = {q for q in queues if self._until(tx, q, now)}
        if not heard:  # nobody reads these queues: nothing to write
            return
        events = [e for e in build() if e.queue in heard]
        if not events:
            return
        tx.cur.executemany(f"INSERT INTO {self.t} (queue, ts, body) VALUES (?, ?, ?)",
                           self._rows(events))  # fmt: skip
        self._publishes += 1
        if self._publishes % TRIM_EVERY == 0:
            tx.sql(f"DELETE FROM {self.t} WHERE id <= (SELECT MAX(id) FROM {self.t})"
                   f" - {int(EVENT_RING)}", {})  # fmt: skip

    def _until(self, tx: Any, queue: str, now: int) -> int:
        """Until when ``queue``'s registration runs (0: nobody reads it), as ``tx`` sees it.

        ``tx`` holds the write lock and registrations bump the shared generation in
        theirs, so an unchanged generation means no registration committed since the
        last read, and a registration read then that has not lapsed still holds."""
        gen = -1 if self._gen is None else self._gen.read()
        seen = self._heard.get(queue)
        if seen is not None and seen[0] == gen >= 0 and (not seen[1] or seen[1] > now):
            return seen[1]
        value = _one(tx.q("kv_get", ns=LISTEN_NS, key=queue))
        until = int(value) if is_listened(value, now) else 0  # type: ignore[arg-type]
        if len(self._heard) >= HEARD_MAX:
            self._heard.clear()
        self._heard[queue] = (gen, until)
        return until

    def unheard(self, queue: str) -> bool:
        """True when nobody read ``queue``'s events at the last look and the
        registrations' generation has not moved since (a memory read, no statement)."""
        seen = self._heard.get(queue)
        return seen is not None and not seen[1] and self._gen is not None \
            and seen[0] == self._gen.read()  # fmt: skip

    def registrations_changed(self) -> None:
        """Called in the transaction of a change to the readers' registrations."""
        if self._gen is not None:
            self._gen.bump()

    @staticmethod
    def _rows(events: Sequence[JobEvent]) -> list[tuple[str, int, bytes]]:
        """One row per queue: its events of the batch, encoded together."""
        return [(q, evs[-1].ts, pack_events(evs)) for q, evs in by_queue(events).items()]

    def ring(self) -> None:
        if self._bell is not None:
            self._bell.ring()

    # -- writing (from the EventWriter's thread) ----------------------------------------
    def _write(self, events: Sequence[JobEvent]) -> None:
        self._ensure()
        rows = self._rows(events)
        queues = sorted({r[0] for r in rows})
        self._publishes += 1
        trim = self._publishes % TRIM_EVERY == 0

        def write() -> None:
            with self.b._begin(durable=False) as tx:
                if self.pg:
                    tx.sql(
                        f"INSERT INTO {self.t} (queue, ts, body) SELECT * FROM unnest("
                        "%(q)s::text[], %(t)s::bigint[], %(b)s::bytea[])",
                        {
                            "q": [r[0] for r in rows],
                            "t": [r[1] for r in rows],
                            "b": [r[2] for r in rows],
                        },  # fmt: skip
                    )
                    for q in queues:
                        tx.raw(f"NOTIFY {self.channel}, '{q}'")
                else:
                    tx.cur.executemany(f"INSERT INTO {self.t} (queue, ts, body) VALUES (?, ?, ?)",
                                       rows)  # fmt: skip
                if trim:
                    tx.sql(f"DELETE FROM {self.t} WHERE id <= (SELECT MAX(id) FROM {self.t})"
                           f" - {int(EVENT_RING)}", {})  # fmt: skip

        self.b._run_unit(write, idempotent=False)
        if self._bell is not None:
            self._bell.ring()

    # -- reading -------------------------------------------------------------------------
    def event_reader(self, queue: str) -> SqlEventReader:
        self._ensure()
        register_reader(self.b, queue)  # before the cursor: every later change sees it
        self._listened.forget(queue)

        def tail() -> int:
            with self.b._read() as tx:
                rows = tx.sql(f"SELECT COALESCE(MAX(id), 0) FROM {self.t}", {})
            return int(rows[0][0])

        return SqlEventReader(self, queue, self.b._run_unit(tail, idempotent=True))

    def fetch(self, queue: str, after: int) -> list[tuple[int, bytes]]:
        def read() -> list[tuple[int, bytes]]:
            with self.b._read() as tx:
                rows = tx.sql(
                    f"SELECT id, body FROM {self.t} WHERE queue = {self.p('q')}"
                    f" AND id > {self.p('a')} ORDER BY id LIMIT {int(READ_BATCH)}",
                    {"q": queue, "a": after},
                )
            return [(int(i), bytes(b)) for i, b in rows]

        result: list[tuple[int, bytes]] = self.b._run_unit(read, idempotent=True)
        return result

    def close(self) -> None:
        self._writer.close()
        if self._gen is not None:
            self._gen.close()


class SqlEventReader:
    """A cursor over one queue's events (see the module docstring for PostgreSQL's)."""

    def __init__(self, log: SqlEventLog, queue: str, after: int) -> None:
        self.log, self.queue, self.floor, self.missed = log, queue, after, 0
        self.recent: dict[int, float] = {}  # PostgreSQL: id -> when first returned
        self.registered = time.monotonic()
        self.bell = Doorbell(log.bell_path) if log.bell_path else None

    def read(self, timeout_ms: int) -> list[JobEvent]:
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        if deadline - self.registered > LISTEN_REFRESH_S:
            register_reader(self.log.b, self.queue)
            self.registered = time.monotonic()
        while True:
            out = self._poll()
            left = deadline - time.monotonic()
            if out or left <= 0:
                return out
            self._wait(min(left, 1.0))

    def _wait(self, timeout_s: float) -> None:
        if self.bell is not None:
            self.bell.wait(timeout_s)
        elif self.log.listener is not None:
            self.log.listener.wait(self.queue, timeout_s)
        else:
            time.sleep(min(timeout_s, 0.1))

    def _poll(self) -> list[JobEvent]:
        rows = self.log.fetch(self.queue, self.floor)
        if not self.log.pg:
            if rows:
                self.floor = rows[-1][0]
            return self._decode(rows)
        now = time.monotonic()
        fresh = [(i, b) for i, b in rows if i not in self.recent]
        for i, _ in fresh:
            self.recent[i] = now
        settled = [i for i, t in self.recent.items() if now - t >= SETTLE_S]
        if len(self.recent) > RECENT_MAX:  # a flood: stop re-reading the oldest half
            settled = sorted(self.recent)[: len(self.recent) // 2]
        if settled:
            top = max(settled)
            self.floor = max(self.floor, top)
            self.recent = {i: t for i, t in self.recent.items() if i > top}
        return self._decode(fresh)

    def _decode(self, rows: list[tuple[int, bytes]]) -> list[JobEvent]:
        return [ev for _, body in rows for ev in unpack_events(self.queue, body)]

    def close(self) -> None:
        if self.bell is not None:
            self.bell.close()
            self.bell = None


def _one(rows: list[tuple[Any, ...]]) -> bytes | None:
    return bytes(rows[0][0]) if rows else None
