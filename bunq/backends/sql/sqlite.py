"""SQLiteBackend: the authoritative backend on one SQLite file (apsw).

Several processes may share the file: a web app adds, worker processes
lease, a CronJob ticks. WAL journal; ``synchronous=NORMAL`` by default (an
acknowledged add survives a process crash), ``FULL`` on request (survives
power loss; concurrent adds share one flush through group commit). Every
write runs in ``BEGIN IMMEDIATE`` so the write lock is taken up front and
never upgraded; the busy handler retries in sub-millisecond steps instead of
SQLite's default 1-100 ms sleeps, which is what keeps peers' latency low.

Plain adds write the **intake** (``queries.INTAKE_DDL``): half the B-trees of a
``jobs`` row per commit. Every other transaction first **absorbs** it, moving its
rows into ``jobs`` (their claim index, counters and registry) in one set-based
step, so every read and every lookup sees ``jobs`` whole: a write transaction does
it after its BEGIN, a read transaction before its own, in a write transaction of
its own, only when the intake holds rows. A backlog of more than ``ABSORB_CHUNK``
rows moves in transactions of that many, so other writers interleave; a producer
alone keeps the intake near ``INTAKE_BOUND`` rows by moving the oldest itself.
"""

from __future__ import annotations

import contextlib
import operator
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlparse

import apsw

from ...checkpoint import Checkpointer
from ...codec import packb, unpackb
from ...errors import BackendError, BackendUnavailable, BunqError, ConfigError, DuplicateJob
from ...filekind import SQL_FILE, claim
from ...job import Job, NewJob, check_new_jobs
from ...jobevents import added_events
from ..urls import redact
from .doorbell import Doorbell
from .events import TX_EVENTS, SqlEventLog
from .groupcommit import GroupCommit
from .queries import INSERT_COLS, SQLITE, SQLITE_SCHEMA_VERSION, ddl_names, render_all
from .store import SqlBackend, all_plain, is_plain

SYNC_MODES = {"normal": "NORMAL", "full": "FULL", "off": "OFF"}
ABSORB_CHUNK = 2_000  # intake rows moved per transaction when a backlog is caught up
INTAKE_BOUND = 100_000  # intake rows a producer alone lets pile up before it moves some
PROBE_EVERY = 1_024  # rows a producer adds between two probes of the backlog
PACK_MIN = 64  # plain jobs a bulk needs to be packed (fewer: rows of the intake)
PACK_JOBS = 1_000  # jobs per pack at most
PACK_BYTES = 1 << 20  # payload and options bytes per pack at most (unless it holds one job)
PACKS_PER_MOVE = 2  # packs moved per transaction when a backlog is caught up
_ALL = 1 << 62  # a rid above every intake row's (they count up from 1)
values = operator.itemgetter(*INSERT_COLS)  # a row's values, as the positional statements take


class _ApswTx:
    """One open transaction; every statement's apsw error leaves as a bunq error."""

    __slots__ = ("cur", "stmts", "path")

    def __init__(self, cur: apsw.Cursor, sql: dict[str, str], path: str) -> None:
        self.cur = cur
        self.stmts = sql
        self.path = path

    def q(self, _stmt: str, /, **params: Any) -> list[tuple[Any, ...]]:
        try:
            return self.cur.execute(self.stmts[_stmt], params).fetchall()
        except apsw.Error as exc:
            raise _translated(exc, self.path) from exc

    def many(self, _stmt: str, rows: list[dict[str, Any]]) -> None:
        try:
            if len(rows) == 1:  # execute is cheaper than executemany for one row
                self.cur.execute(self.stmts[_stmt], rows[0])
            else:
                self.cur.executemany(self.stmts[_stmt], rows)
        except apsw.Error as exc:
            raise _translated(exc, self.path) from exc

    def sql(self, text: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        try:
            return self.cur.execute(text, params).fetchall()
        except apsw.Error as exc:
            raise _translated(exc, self.path) from exc

    def raw(self, sql: str) -> None:
        try:
            self.cur.execute(sql)
        except apsw.Error as exc:
            raise _translated(exc, self.path) from exc


class _IntakeTx(_ApswTx):
    """The transaction of plain adds: their rows go to the intake, not to ``jobs``;
    ``added(cur, n)`` runs after each insert of ``n`` rows (the backlog's bound)."""

    __slots__ = ("added",)

    def __init__(self, cur: apsw.Cursor, sql: dict[str, str], path: str,
                 added: Callable[[apsw.Cursor, int], None]) -> None:  # fmt: skip
        super().__init__(cur, sql, path)
        self.added = added

    def many(self, _stmt: str, rows: list[dict[str, Any]]) -> None:
        assert _stmt == "insert_job", _stmt  # a plain add runs no other statement
        conn = self.cur.connection
        before = conn.total_changes()
        try:
            self.cur.executemany(self.stmts["intake_put"], [values(r) for r in rows])
        except apsw.Error as exc:
            raise _translated(exc, self.path) from exc
        if conn.total_changes() - before != len(rows):
            self._settle(rows)
        self._added(len(rows))

    def _settle(self, rows: list[dict[str, Any]]) -> None:
        """Some row was refused: ``jobs`` holds its id, or a pack's range holds it. Take
        this call's rows back, move the whole intake (packs too) into ``jobs`` and admit
        the rows there, where an id that exists is a DuplicateJob."""
        cur = self.cur
        try:
            cur.executemany(self.stmts["intake_unput"], [{"id": r["id"]} for r in rows])
            _move_all(cur, self.stmts)
            cur.executemany(self.stmts["insert_job"], rows)
        except apsw.ConstraintError as exc:
            one = rows[0]["id"] if len(rows) == 1 else None
            raise DuplicateJob(f"a job with that id already exists ({exc})", job_id=one) from exc
        except apsw.Error as exc:
            raise _translated(exc, self.path) from exc

    def pack(self, values: list[tuple[Any, ...]]) -> bool:
        """Write ``values`` (rows in INSERT_COLS order, ids rising strictly) as packs
        (:func:`_parts`); False, writing nothing, when an id in their range may exist
        already (then the caller writes rows instead)."""
        cur = self.cur
        try:
            span = {"lo": values[0][0], "hi": values[-1][0]}
            if cur.execute(self.stmts["pack_clash"], span).fetchall()[0][0]:
                return False
            for part in _parts(values):
                cur.execute(self.stmts["pack_put"], {
                    "lo": part[0][0], "hi": part[-1][0], "n": len(part),
                    "rows": packb(part, use_bin_type=True)})  # fmt: skip
        except apsw.Error as exc:
            raise _translated(exc, self.path) from exc
        self._added(len(values))
        return True

    def _added(self, n: int) -> None:
        try:
            self.added(self.cur, n)
        except apsw.Error as exc:
            raise _translated(exc, self.path) from exc


_data = operator.itemgetter(INSERT_COLS.index("data"))
_opts = operator.itemgetter(INSERT_COLS.index("opts"))


def _parts(values: list[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    """``values`` cut, in order, into packs of at most PACK_JOBS rows whose payloads and
    options come to at most PACK_BYTES (a row bigger than that is a pack of its own):
    sized before anything is encoded, so a bulk of big payloads never builds one big
    blob (payloads may be up to ``max_payload`` each)."""
    for at in range(0, len(values), PACK_JOBS):
        rows = values[at : at + PACK_JOBS]
        if sum(map(len, map(_data, rows))) + sum(map(len, map(_opts, rows))) <= PACK_BYTES:
            yield rows  # (the common case, summed without a Python step per row)
            continue
        start, size = 0, 0
        for i, row in enumerate(rows):
            n = len(_data(row)) + len(_opts(row))
            if i > start and size + n > PACK_BYTES:
                yield rows[start:i]
                start, size = i, 0
            size += n
        yield rows[start:]


def _move_rows(cur: apsw.Cursor, sql: dict[str, str], below: int) -> None:
    """Move the intake's rows with a rid below ``below`` into ``jobs``, in order, in the
    open transaction."""
    cur.execute(sql["intake_move"], {"below": below})
    cur.execute(sql["intake_drop"], {"below": below})


def _move_all(cur: apsw.Cursor, sql: dict[str, str]) -> None:
    """Move the whole intake, rows and packs, into ``jobs``, in the open transaction."""
    _move_rows(cur, sql, _ALL)
    while _move_packs(cur, sql, PACKS_PER_MOVE) == PACKS_PER_MOVE:
        pass


def _move_packs(cur: apsw.Cursor, sql: dict[str, str], most: int) -> int:
    """Move the oldest ``most`` packs into ``jobs``, in the open transaction; how many."""
    packs = cur.execute(sql["packs_oldest"], {"most": most}).fetchall()
    row = sql["pack_row"]
    for _, blob in packs:
        cur.executemany(row, unpackb(blob, use_list=False))
    if packs:
        cur.execute(sql["packs_drop"], {"upto": packs[-1][0]})
    return len(packs)


def _translated(exc: apsw.Error, path: str) -> BunqError:
    if isinstance(exc, apsw.ConstraintError) and ("jobs.id" in str(exc) or "intake.id" in str(exc)):
        # A caller-chosen id (not the job_id option, which is idempotent) that exists.
        return DuplicateJob(f"a job with that id already exists ({exc})")
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        return BackendUnavailable(f"database {path} stayed locked: {exc}")
    if isinstance(exc, (apsw.CantOpenError, apsw.IOError, apsw.FullError)):
        return BackendUnavailable(f"database {path} is not usable: {exc}")
    return BackendError(f"sqlite ({path}): {exc}")


@contextmanager
def translate_errors(path: str) -> Iterator[None]:
    """Turn apsw errors into bunq's (BackendUnavailable / BackendError), ``from`` them."""
    try:
        yield
    except apsw.Error as exc:
        raise _translated(exc, path) from exc


class _Transaction:
    """``with`` block of one transaction: ``begin`` on entry, then ``absorb`` (if any),
    COMMIT on a clean exit, ROLLBACK on any exception; apsw errors leave translated (a
    class, not a generator context manager: it is on the path of every add and lease)."""

    __slots__ = ("cur", "begin", "sql", "path", "absorb", "kind")

    def __init__(self, cur: apsw.Cursor, begin: str, sql: dict[str, str], path: str,
                 absorb: Callable[[apsw.Cursor], None] | None = None,
                 kind: Callable[[apsw.Cursor, dict[str, str], str], _ApswTx] = _ApswTx,
                 ) -> None:  # fmt: skip
        self.cur, self.begin, self.sql, self.path = cur, begin, sql, path
        self.absorb, self.kind = absorb, kind

    def __enter__(self) -> _ApswTx:
        try:
            self.cur.execute(self.begin)
        except apsw.Error as exc:
            raise _translated(exc, self.path) from exc
        if self.absorb is not None:
            try:
                self.absorb(self.cur)
            except BaseException as exc:  # no block runs, so no __exit__: roll back here
                with contextlib.suppress(apsw.Error):
                    self.cur.execute("ROLLBACK")
                if isinstance(exc, apsw.Error):
                    raise _translated(exc, self.path) from exc
                raise
        return self.kind(self.cur, self.sql, self.path)

    def __exit__(self, et: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        cur = self.cur
        if exc is not None:
            with contextlib.suppress(apsw.Error):
                cur.execute("ROLLBACK")
            if isinstance(exc, apsw.Error):
                raise _translated(exc, self.path) from exc
            return  # the exception goes on
        try:
            cur.execute("COMMIT")
        except apsw.Error as err:
            with contextlib.suppress(apsw.Error):
                cur.execute("ROLLBACK")
            raise _translated(err, self.path) from err


class SQLiteBackend(SqlBackend):
    """Jobs in one SQLite file shared by any number of processes.

    :param path: the database file (created if missing; never ``:memory:``).
    :param synchronous: ``normal`` (default) or ``full``.
    :param busy_timeout_ms: give up on a locked database after this long
        (BackendUnavailable).
    """

    kind = "sqlite"

    def __init__(self, path: str, *, synchronous: str = "normal",
                 busy_timeout_ms: int = 10_000, **kw: Any) -> None:  # fmt: skip
        super().__init__(**kw)
        if not path or path == ":memory:":
            raise ConfigError("the SQLite backend needs a file path (not :memory:)")
        if synchronous.lower() not in SYNC_MODES:
            raise ConfigError(f"synchronous must be one of {sorted(SYNC_MODES)}")
        self.path = os.path.abspath(path)
        self.synchronous = SYNC_MODES[synchronous.lower()]
        self.busy_timeout_ms = busy_timeout_ms
        self.dialect = SQLITE
        self._sql = render_all(SQLITE)
        self._local = threading.local()
        self._conns: list[apsw.Connection] = []
        self._conns_lock = threading.Lock()
        self._bell = Doorbell(self.path)
        self._events = SqlEventLog(self, "events", "events_queue_id", postgres=False,
                                   bell=self._bell)  # fmt: skip
        self.publish_events = self._events.publish_events
        self.has_readers = self._events.has_readers
        self.event_reader = self._events.event_reader
        self._checkpointer = Checkpointer(self.path)
        self._closed = False
        self._intake_writes: GroupCommit[Any] = GroupCommit(
            self._begin_intake, lambda tx, s: tx.raw(s)
        )
        self._unprobed = 0  # intake rows added here since the backlog's last probe
        self._init_schema()
        self._events._ensure()
        # job transitions are recorded in the transaction that makes them (.events)
        self._tx_events = self._events.write_in
        self.own_events = TX_EVENTS

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> SQLiteBackend:
        """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``?synchronous=full``."""
        parsed = urlparse(url)
        path = parsed.netloc + parsed.path
        path = path[1:] if path.startswith("/") and not path.startswith("//") else path[1:]
        if not path:
            raise ConfigError(f"no file in {redact(url)!r}: use sqlite:///path/to/file.db")
        opts = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        unknown = set(opts) - {"synchronous", "busy_timeout_ms"}
        if unknown:
            raise ConfigError(f"unknown sqlite URL options {sorted(unknown)}")
        if "busy_timeout_ms" in opts:
            kw["busy_timeout_ms"] = int(opts["busy_timeout_ms"])
        return cls(path, synchronous=opts.get("synchronous", "normal"), **kw)

    # -- connections -------------------------------------------------------------------
    def _conn(self) -> apsw.Connection:
        if self._closed:  # also for a thread whose connection close() could not close (in use)
            raise BackendUnavailable("the SQLite backend is closed")
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = apsw.Connection(self.path)
            except apsw.Error as exc:
                raise BackendUnavailable(f"cannot open {self.path}: {exc}") from exc
            deadline_s = self.busy_timeout_ms / 1000

            def busy(count: int, _start: list[float] = []) -> bool:  # noqa: B006
                # Spin in 50 us - 2 ms steps; SQLite's own handler sleeps up to 100 ms.
                if count == 0:
                    _start[:] = [time.monotonic()]
                elif time.monotonic() - _start[0] > deadline_s:
                    return False
                time.sleep(min(0.00005 * (count + 1), 0.002))
                return True

            conn.set_busy_handler(busy)
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("PRAGMA foreign_keys=OFF")
            conn.execute("PRAGMA cache_size=-32000")
            conn.set_wal_hook(self._checkpointer.hint)  # replaces the inline autocheckpoint
            with self._conns_lock:  # a close() racing this open must not miss the connection
                if self._closed:
                    conn.close(True)
                    raise BackendUnavailable("the SQLite backend is closed")
                self._conns.append(conn)
            self._local.conn = conn
        return conn

    def _begin(self, durable: bool = True) -> Any:
        # every commit follows ``synchronous``; the intake first, so the block sees it all
        return _Transaction(self._conn().cursor(), "BEGIN IMMEDIATE", self._sql, self.path,
                            self._absorb)  # fmt: skip

    def _read(self) -> Any:
        cur = self._conn().cursor()
        with translate_errors(self.path):
            pending = self._span(cur) != (None, None, None)
        if pending:  # move it in a write transaction first; the read itself stays deferred
            with self._begin():
                pass
        return _Transaction(cur, "BEGIN", self._sql, self.path)  # never the write lock

    def _tx(self, begin: str) -> _Transaction:
        """One transaction, nothing absorbed; apsw errors leave here translated (never raw)."""
        return _Transaction(self._conn().cursor(), begin, self._sql, self.path)

    # -- the intake (module docstring) ---------------------------------------------------
    def add(self, jobs: Sequence[NewJob]) -> list[Job]:
        """Admit jobs (see Backend.add). One plain job for a queue nobody reads the
        events of goes by :meth:`_add_alone`; the rest by group commit."""
        if self._unprobed < PROBE_EVERY and type(jobs) is list and len(jobs) == 1:
            check_new_jobs(jobs)  # (else: _backlog's probe is due, in a transaction)
            job = jobs[0]
            if is_plain(job) and self._events.unheard(job.queue):
                return self._add_alone(jobs)
        return SqlBackend.add(self, jobs)

    def _add_alone(self, jobs: list[NewJob]) -> list[Job]:
        """One autocommit insert into the intake: no BEGIN or COMMIT statement, no batch.

        A lone producer's add, the common one. Taken only while nobody read the queue's
        events at the last look and the registrations' generation has not moved; if it
        moved by the time the row is in, a reader may have registered first, so the
        ``added`` event is written after all (in a transaction of its own)."""
        now = self.clock()
        ((job, data, opts_blob),) = self._prepare(jobs)
        row, admitted = self._values(job, data, opts_blob, now, 0, self._next_seq(now))
        conn = self._conn()
        before = conn.total_changes()
        try:
            conn.execute(self._sql["intake_put"], row)
        except apsw.Error as exc:
            raise _translated(exc, self.path) from exc
        if conn.total_changes() == before:  # ``jobs`` or a pack's range holds the id:
            return SqlBackend.add(self, jobs)  # settled in a transaction (_IntakeTx)
        self._unprobed += 1
        if not self._events.unheard(job.queue) and self._tx_events is not None:
            with self._begin() as tx:
                self._tx_events(tx, (job.queue,), lambda: added_events([admitted], now))
        self._ring(job.queue)
        return [admitted]

    def _admission(self, jobs: Sequence[NewJob]) -> GroupCommit[Any]:
        """Plain adds go to the intake (their own group commit); the rest to ``jobs``."""
        return self._intake_writes if all_plain(jobs) else self._writes

    def _begin_intake(self) -> _Transaction:
        def kind(cur: apsw.Cursor, sql: dict[str, str], path: str) -> _IntakeTx:
            return _IntakeTx(cur, sql, path, self._backlog)

        return _Transaction(self._conn().cursor(), "BEGIN IMMEDIATE", self._sql, self.path,
                            None, kind)  # fmt: skip

    def _absorb(self, cur: apsw.Cursor) -> None:
        """Move the whole intake into ``jobs`` (in the write transaction ``cur`` opened).

        A backlog of more than ABSORB_CHUNK rows (PACKS_PER_MOVE packs) is committed
        chunk by chunk first, each chunk its own transaction (no caller's work has run
        yet), so other writers get the lock between them; the last step moves whatever
        the lock now guards."""
        sql = self._sql
        lo, hi, packs = self._span(cur)
        if lo is not None and hi is not None:
            while hi - lo >= ABSORB_CHUNK:
                lo += ABSORB_CHUNK
                _move_rows(cur, sql, lo)
                cur.execute("COMMIT")
                cur.execute("BEGIN IMMEDIATE")
            _move_rows(cur, sql, _ALL)
        if packs is not None:
            while _move_packs(cur, sql, PACKS_PER_MOVE) == PACKS_PER_MOVE:
                cur.execute("COMMIT")
                cur.execute("BEGIN IMMEDIATE")

    def _admit(self, tx: Any, prepared: list[tuple[NewJob, bytes, bytes]]) -> list[Job]:
        """Plain jobs of a bulk whose ids rise strictly go into packs (``_IntakeTx.pack``),
        unless an id in their range may exist; every other admission is SqlBackend's."""
        if len(prepared) >= PACK_MIN and type(tx) is _IntakeTx:
            ids = [p[0].id for p in prepared]
            if all(map(str.__lt__, ids, ids[1:])):
                now = self.clock()
                seq = self._next_seq(now, len(prepared))
                out: list[Job] = []
                values: list[tuple[Any, ...]] = []
                row, keep, keep_job = self._values, values.append, out.append
                for job, data, opts_blob in prepared:
                    r, admitted = row(job, data, opts_blob, now, 0, seq)
                    keep(r)
                    keep_job(admitted)
                    seq += 1
                if tx.pack(values):
                    return out
        return SqlBackend._admit(self, tx, prepared)

    def _span(self, cur: apsw.Cursor) -> tuple[int | None, int | None, int | None]:
        """The intake's oldest and newest row's rid and its oldest pack's (None: none)."""
        lo, hi, pack = cur.execute(self._sql["intake_span"]).fetchall()[0]
        return lo, hi, pack  # type: ignore[return-value]

    def _backlog(self, cur: apsw.Cursor, n: int) -> None:
        """After ``n`` jobs went into the intake: with no reader absorbing, keep its
        backlog near INTAKE_BOUND rows and as many packed jobs (probed once per
        PROBE_EVERY jobs added here)."""
        self._unprobed += n
        if self._unprobed < PROBE_EVERY:
            return
        self._unprobed = 0
        sql = self._sql
        lo, hi, packs = self._span(cur)
        if lo is not None and hi is not None and hi - lo >= INTAKE_BOUND:
            _move_rows(cur, sql, hi + 1 - INTAKE_BOUND + ABSORB_CHUNK)  # the oldest
        if packs is not None:
            while cur.execute(sql["packs_jobs"]).fetchall()[0][0] >= INTAKE_BOUND:  # type: ignore[operator]
                _move_packs(cur, sql, 1)  # the oldest

    def _init_schema(self) -> None:
        with translate_errors(self.path):
            conn = self._conn()
            claim(conn, self.path, SQL_FILE)
            mode = str(conn.execute("PRAGMA journal_mode=WAL").fetchall()[0][0])
        if mode.lower() != "wal":
            raise ConfigError(f"{self.path}: could not switch to WAL (got {mode})")
        with self._tx("BEGIN IMMEDIATE") as tx:  # the write lock is the migration lock
            rows = tx.cur.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchall()
            if rows:
                rows = tx.cur.execute(
                    "SELECT value FROM meta WHERE key = 'schema_version'").fetchall()  # fmt: skip
            stored = int(str(rows[0][0])) if rows else None
            if stored is not None and stored > SQLITE_SCHEMA_VERSION:
                raise ConfigError(
                    f"{self.path} has schema v{stored},"
                    f" newer than this bunq (v{SQLITE_SCHEMA_VERSION})"
                )
            for key in ddl_names(self._sql):
                tx.raw(self._sql[key])
            if stored is not None and stored < 2:  # v1: counters and registry, once
                for key in sorted(k for k in self._sql if k.startswith("backfill")):
                    tx.raw(self._sql[key])
            if stored is None or stored < SQLITE_SCHEMA_VERSION:  # v3: the intake table
                tx.q("meta_put", key="schema_version", value=str(SQLITE_SCHEMA_VERSION))

    def _lock_key(self, tx: Any, key: str) -> None:
        """Nothing to take: SQLite's write lock already serialises every writer."""

    # -- wake-ups ----------------------------------------------------------------------
    def _ring(self, queue: str) -> None:
        self._bell.ring()

    def wait(self, queue: str, timeout_ms: int) -> bool:
        return self._bell.wait(timeout_ms / 1000)

    def close(self) -> None:
        self._events.close()  # writes the events still buffered
        with self._conns_lock:
            self._closed = True
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close(True)
            except apsw.Error:
                pass
        self._bell.close()
        self._checkpointer.close()
