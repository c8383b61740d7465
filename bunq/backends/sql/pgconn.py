"""Connection-level pieces of the PostgreSQL backend: error translation, the
database clock, transaction wrappers and the LISTEN/NOTIFY listener.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import operator
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import errors as pge

from ...errors import BackendError, BackendUnavailable, ConfigError, DuplicateJob
from ..urls import redact
from .queries import INSERT_COLS

log = logging.getLogger("bunq.postgres")
Conn = psycopg.Connection[Any]

COPY_MIN = 64  # bulk adds of at least this many plain jobs go through COPY
insert_row = operator.itemgetter(*INSERT_COLS)


def copy_counted(cur: psycopg.Cursor[Any], stmts: dict[str, str],
                 rows: list[dict[str, Any]]) -> None:  # fmt: skip
    """COPY ``rows`` into the jobs table inside the cursor's transaction, counted as
    one delta per (queue, state) rather than by the row trigger (see TRIGGERS_PG)."""
    cur.execute(stmts["count_mark"], prepare=False)
    with cur.copy(stmts["copy_jobs"]) as cp:
        for r in rows:
            cp.write_row(insert_row(r))
    tally = collections.Counter((r["queue"], r["state"]) for r in rows)
    cur.execute(stmts["count_later"], {"queues": [k[0] for k in tally],
                                       "states": [k[1] for k in tally],
                                       "ns": list(tally.values())})  # fmt: skip


class CommitUnknown(Exception):
    """The connection broke while COMMIT was in flight: it may or may not have landed."""


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn psycopg errors into bunq errors (``raise ... from exc``), once, here."""
    try:
        yield
    except CommitUnknown as exc:
        raise BackendUnavailable(f"postgres: connection lost during COMMIT, outcome unknown"
                                 f" ({exc.__cause__})") from exc.__cause__  # fmt: skip
    except pge.UniqueViolation as exc:
        raise DuplicateJob(f"postgres: {exc.diag.message_primary}",
                           constraint=exc.diag.constraint_name) from exc  # fmt: skip
    except psycopg.OperationalError as exc:
        raise BackendUnavailable(f"postgres unavailable: {exc}") from exc
    except psycopg.Error as exc:
        raise BackendError(f"postgres: {exc}") from exc


# Connection failures that another try cannot mend: who or where, not when.
_PERMANENT = ("does not exist", "password authentication failed", "no pg_hba.conf entry",
              "authentication failed", "permission denied", "failed to resolve host",
              "could not translate host name", "invalid ", "unsupported", "SSL is not enabled",
              "requires a valid client certificate")  # fmt: skip


def connect_error(dsn: str, exc: BaseException, permanent: bool) -> BackendError | ConfigError:
    """The bunq error for a failed first connection, with its cause, without a password."""
    cause = str(exc).replace("connection failed: ", "").replace("\n\t", " ").strip()
    msg = f"postgres: cannot connect to {redact(dsn)}: {cause}"
    return ConfigError(msg) if permanent else BackendUnavailable(msg)


def probe(dsn: str, retry_ms: int) -> None:
    """Connect once before the pool exists, so a wrong role, password, database or host
    fails at once as ConfigError (with its cause), and a server that is not there yet is
    retried quietly for ``retry_ms`` before BackendUnavailable.
    """
    from psycopg.conninfo import conninfo_to_dict

    timeout = {} if "connect_timeout" in conninfo_to_dict(dsn) else {"connect_timeout": 5}
    deadline, tries = time.monotonic() + retry_ms / 1000, 0
    while True:
        try:
            psycopg.connect(dsn, **timeout).close()  # type: ignore[arg-type]
            return
        except psycopg.Error as exc:
            permanent = any(p in str(exc) for p in _PERMANENT)
            pause = min(0.05 * 2**tries, 1.0)
            if permanent or time.monotonic() + pause > deadline:
                raise connect_error(dsn, exc, permanent) from exc
            if tries == 0:
                log.warning("postgres: cannot connect to %s yet (%s); retrying for up to %.0f s",
                            redact(dsn), str(exc).splitlines()[0], retry_ms / 1000)  # fmt: skip
            tries += 1
            time.sleep(pause)


class DbClock:
    """Epoch ms of the database server, read without a round trip.

    ``sync`` reads ``clock_timestamp()`` three times and keeps the sample with the
    shortest round trip, anchored at its midpoint on the local monotonic clock;
    the error is at most half that round trip (``error_ms``) plus the monotonic
    clock's drift until the next sync (every ``every_s``; ppm, so < 1 ms).
    """

    def __init__(self, sql: str, every_s: float = 30.0) -> None:
        self.sql = sql
        self.every_s = every_s
        self._anchor = (time.time() * 1000.0, time.monotonic())
        self.offset_ms = 0.0  # database minus local wall clock, for diagnostics
        self.error_ms = float("inf")
        self.due = 0.0

    def __call__(self) -> int:
        db, mono = self._anchor
        return int(db + (time.monotonic() - mono) * 1000.0)

    def sync(self, conn: Conn) -> None:
        """Measure the database clock on ``conn`` (autocommit, no open transaction)."""
        best: tuple[float, float, float] | None = None
        for _ in range(3):
            t0 = time.monotonic()
            row = conn.execute(self.sql, prepare=False).fetchone()
            t1 = time.monotonic()
            if row is not None and (best is None or t1 - t0 < best[0]):
                best = (t1 - t0, float(row[0]), (t0 + t1) / 2)
        assert best is not None
        rtt, db, mid = best
        self._anchor = (db, mid)
        self.offset_ms = db - (time.time() - (time.monotonic() - mid)) * 1000.0
        self.error_ms = rtt * 500.0
        self.due = time.monotonic() + self.every_s


class PgTx:
    """One transaction (or autocommit reads) on a pooled connection."""

    __slots__ = ("conn", "cur", "stmts", "pending")

    def __init__(self, conn: Conn, stmts: dict[str, str], begin: list[str]) -> None:
        self.conn = conn
        self.cur = conn.cursor()
        self.stmts = stmts
        self.pending = begin  # sent ahead of the next statement

    def _flush(self) -> None:
        if self.pending:
            cmds, self.pending = self.pending, []
            self.cur.execute("; ".join(cmds), prepare=False)

    def q(self, _stmt: str, /, **params: Any) -> list[tuple[Any, ...]]:
        return self.sql(self.stmts[_stmt], params)

    def sql(self, text: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        self._flush()
        self.cur.execute(text, params)
        return self.cur.fetchall() if self.cur.description is not None else []

    def many(self, _stmt: str, rows: list[dict[str, Any]]) -> None:
        self._flush()
        if _stmt == "insert_job" and len(rows) >= COPY_MIN:
            copy_counted(self.cur, self.stmts, rows)
        elif len(rows) == 1:
            self.cur.execute(self.stmts[_stmt], rows[0])
        else:
            self.cur.executemany(self.stmts[_stmt], rows)

    def raw(self, sql: str) -> None:
        self.pending.append(sql)  # savepoints: merged into the next round trip


class PlainRows:
    """The "transaction" of plain admissions: rows collected, inserted by one statement."""

    __slots__ = ("rows", "mark")

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.mark = 0

    def q(self, _stmt: str, /, **params: Any) -> list[tuple[Any, ...]]:
        raise AssertionError("plain admissions run no queries")

    def sql(self, text: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        raise AssertionError("plain admissions run no queries")

    def many(self, _stmt: str, rows: list[dict[str, Any]]) -> None:
        self.rows += rows

    def raw(self, sql: str) -> None:  # group commit's savepoints, kept in memory
        if sql.startswith("SAVEPOINT"):
            self.mark = len(self.rows)
        elif sql.startswith("ROLLBACK"):
            del self.rows[self.mark :]


class Listener:
    """A LISTEN connection read by a daemon thread (started by the first ``wait``).

    Each NOTIFY bumps its queue's counter; a waiter returns once the counter
    differs from the one it saw last, so a ring between a failed lease and the next
    wait is never lost. A (re)connect bumps every queue: anything may have been missed.
    With ``bell`` (two int4 keys), the connection holds that advisory lock shared
    before it LISTENs: producers that can take it exclusive know nobody listens and
    skip their NOTIFY (see ``insert_jobs_idem`` in queries.py).
    """

    def __init__(self, dsn: str, channel: str, bell: tuple[int, int] | None = None) -> None:
        self.dsn, self.channel, self.bell = dsn, channel, bell
        self.cond = threading.Condition()
        self.seq: dict[str, int] = {}
        self.epoch = 0
        self.seen = threading.local()
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()

    def wait(self, queue: str, timeout_s: float) -> bool:
        with self.cond:
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="bunq-pg-listen", daemon=True)
                self.thread.start()
            seen: dict[str, tuple[int, int]] = self.seen.__dict__.setdefault("d", {})
            last = seen.get(queue)
            if last is None or last != self._key(queue):
                seen[queue] = self._key(queue)
                return True
            woke = self.cond.wait_for(lambda: self._key(queue) != last, timeout_s)
            seen[queue] = self._key(queue)
            return bool(woke) and not self.stop.is_set()

    def _key(self, queue: str) -> tuple[int, int]:
        return self.epoch + self.stop.is_set(), self.seq.get(queue, 0)

    def _run(self) -> None:
        delay = 0.05
        while not self.stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
                    if self.bell is not None:  # first: a producer then NOTIFYs or commits first
                        conn.execute("SELECT pg_advisory_lock_shared(%s::int, %s::int)", self.bell)
                    conn.execute(f"LISTEN {self.channel}")
                    self.bump(None)
                    delay = 0.05
                    while not self.stop.is_set():
                        for n in conn.notifies(timeout=1.0):
                            self.bump(n.payload)
            except psycopg.Error as exc:
                log.debug("LISTEN connection lost (%s); reconnecting", exc)
                self.stop.wait(delay)
                delay = min(delay * 2, 2.0)

    def bump(self, queue: str | None) -> None:
        with self.cond:
            if queue is None:
                self.epoch += 1
            else:
                self.seq[queue] = self.seq.get(queue, 0) + 1
            self.cond.notify_all()
