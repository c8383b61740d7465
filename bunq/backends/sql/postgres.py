"""PostgresBackend: the SQL backend on PostgreSQL (psycopg 3), shared by many brokers.

Claims use ``FOR UPDATE SKIP LOCKED``, settles check the fence in the statement
that changes the row, leases use the database clock (:class:`DbClock`), advisory
locks order admissions of one job id or unique key across brokers, and
``LISTEN/NOTIFY`` wakes idle workers (the wait timeout is the fallback). Every
public call is one unit of work, retried with backoff while the failure is
transient and a repeat is safe (``_run_unit``, the rule each operation declares
with :func:`~.core.unit_of_work`); driver errors are translated once
(:func:`translate_errors`). See ``docs/postgres.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pge
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from ...batching import BULK, paused_gc
from ...errors import BackendUnavailable, ConfigError, DuplicateJob
from ...job import Job, Lease, NewJob, check_new_jobs
from ..base import QUEUE_NAME, SweepResult
from ..urls import redact
from .events import SqlEventLog
from .groupcommit import GroupCommit
from .pgconn import (
    COPY_MIN,
    CommitUnknown,
    Conn,
    DbClock,
    Listener,
    PgTx,
    PlainRows,
    copy_counted,
    insert_row,
    log,
    probe,
    translate_errors,
)
from .pgplain import PlainInsert
from .queries import (
    COUNT_FN_REV,
    COUNTED_MARK,
    INSERT_COLS,
    POSTGRES,
    SCHEMA_VERSION,
    ddl_names,
    render_all,
)
from .store import SqlBackend, all_plain

T = TypeVar("T")

_NAMED = re.compile(r"%\((\w+)\)s")  # a rendered statement's named parameters
SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
PREFIX = re.compile(r"^([a-z_][a-z0-9_]{0,31})?$")
URL_OPTIONS = ("schema", "prefix", "pool_min", "pool_max", "migrate", "retry_ms")
_BEGIN, _ASYNC = "BEGIN", "SET LOCAL synchronous_commit = off"
IDLE = psycopg.pq.TransactionStatus.IDLE
SPARE_S = 60.0  # the spare connection goes back through the pool at least this often
FOLD_EVERY = 1_000  # plain-add statements between a producer's folds of the deltas


class PostgresBackend(SqlBackend):
    """Jobs in one PostgreSQL schema, shared by any number of brokers and workers.

    :param dsn: a libpq connection string or URL (without bunq's own options).
    :param schema: schema holding bunq's tables (created by :meth:`migrate`);
        default: the connection's ``search_path`` (usually ``public``).
    :param prefix: table-name prefix, to keep several namespaces in one schema.
    :param pool_min: connections kept open; ``pool_max``: the most opened.
    :param migrate: ``"auto"`` (default) creates or upgrades the schema when the
        backend opens; ``"off"`` only checks the version (run ``bunq migrate``).
    :param retry_ms: how long transient failures are retried before BackendUnavailable.
    :param kw: SqlBackend options (``clock=`` replaces the database clock).
    """

    kind = "postgres"

    def __init__(self, dsn: str, *, schema: str | None = None, prefix: str = "",
                 pool_min: int = 1, pool_max: int = 10, migrate: str = "auto",
                 retry_ms: int = 15_000, **kw: Any) -> None:  # fmt: skip
        clock = kw.pop("clock", None)
        self._dbclock = None if clock is not None else DbClock("")
        super().__init__(clock=clock or self._dbclock or DbClock(""), **kw)
        if schema is not None and not SCHEMA_NAME.match(schema):
            raise ConfigError(f"invalid schema name {schema!r}: letters, digits, _ (max 63)")
        if not PREFIX.match(prefix):
            raise ConfigError(f"invalid table prefix {prefix!r}: lowercase letters, digits, _")
        if migrate not in ("auto", "off") or not 1 <= pool_min <= pool_max or retry_ms < 0:
            raise ConfigError("need migrate auto|off, 1 <= pool_min <= pool_max, retry_ms >= 0")
        try:
            conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise ConfigError(f"invalid PostgreSQL DSN: {exc}") from exc
        self.dsn, self.schema, self.prefix, self.retry_ms = dsn, schema, prefix, retry_ms
        self.dialect = POSTGRES
        qual = None if schema is None else f'"{schema}"'
        self._sql = render_all(POSTGRES, prefix, qual)
        self._meta = f"{qual}.{prefix}meta" if qual else f"{prefix}meta"
        if self._dbclock is not None:
            self._dbclock.sql = self._sql["db_clock"]
        ns = hashlib.sha1(f"{schema}.{prefix}".encode()).hexdigest()[:16]
        self._ns = f"bunq:{schema}.{prefix}"
        self._closed = False
        self._spare: Conn | None = None  # see _release
        self._spare_lock = threading.Lock()
        self._getting = 0  # checkouts waiting in the pool
        self._spare_due = time.monotonic() + SPARE_S
        probe(dsn, retry_ms)  # a wrong role or host: ConfigError now, not a pool retrying
        self._pool: ConnectionPool[Any] = ConnectionPool(
            dsn, min_size=pool_min, max_size=pool_max, kwargs={"autocommit": True},
            open=True, name=f"bunq-{ns}", num_workers=1)  # fmt: skip
        self._channel = f"bunq_{ns}"
        # The advisory lock every listener of the channel holds shared (see Listener):
        # 'bunq' and 31 bits of the namespace's hash; the two-key form never meets the
        # one-key locks of key_lock.
        self._bell = (0x62756E71, int(ns[:8], 16) >> 1)
        self._listener = Listener(dsn, self._channel, self._bell)
        ev_listener = Listener(dsn, f"bunq_ev_{ns}")
        self._events = SqlEventLog(self, f"{qual}.{prefix}events" if qual else f"{prefix}events",
                                   f"{prefix}events_queue_id", postgres=True,
                                   channel=f"bunq_ev_{ns}", listener=ev_listener)  # fmt: skip
        self.publish_events = self._events.publish_events
        self.has_readers = self._events.has_readers
        self.event_reader = self._events.event_reader
        # The plain-add statement with positional parameters (rows, then the trailing
        # named ones in their order): no per-call dict of 18 names per row to build
        # and for psycopg to reorder.
        tail = {"channel": self._channel, "bell_a": self._bell[0], "bell_b": self._bell[1]}
        self._insert_tail = [tail[k] for k in _NAMED.findall(self._sql["insert_jobs_idem"])]
        self._insert_tmpls = {n: _NAMED.sub("%s", self._sql[k]) for n, k in
                              ((1, "insert_job_idem"), (2, "insert_jobs_idem"))}  # fmt: skip
        self._insert_sqls: dict[int, str] = {}
        self._plain_insert = PlainInsert(self._insert_sql)
        self._plain_cur: psycopg.Cursor[Any] | None = None  # see _collect
        self._unfolded = 0  # plain-add statements since this backend last folded
        self._plain: GroupCommit[PlainRows] = GroupCommit(self._collect, lambda tx, s: tx.raw(s))
        try:
            self._run_unit(lambda: self._open(migrate == "auto"), idempotent=True)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> PostgresBackend:
        """``postgresql://user@host:port/db?schema=&prefix=&pool_min=&pool_max=&migrate=``.

        bunq's options are removed before the URL reaches libpq; the others
        (``sslmode``, ``connect_timeout``, ``application_name``...) pass through.
        """
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        ours = {k: v for k, v in query if k in URL_OPTIONS}
        dsn = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query
                                                         if k not in URL_OPTIONS])))  # fmt: skip
        try:
            for name in ("pool_min", "pool_max", "retry_ms"):
                if name in ours:
                    kw[name] = int(ours[name])
        except ValueError as exc:
            raise ConfigError(f"bad number in {redact(url)!r}: {exc}") from None
        for name in ("schema", "prefix", "migrate"):
            if name in ours:
                kw[name] = ours[name]
        return cls(dsn, **kw)

    # -- schema --------------------------------------------------------------------------
    def _open(self, migrate: bool) -> None:
        version, fn_rev = self._version()
        if version == SCHEMA_VERSION and fn_rev >= COUNT_FN_REV:
            return
        if version is not None and version > SCHEMA_VERSION:
            raise ConfigError(f"schema {self._ns} is v{version}, newer than this bunq"
                              f" (v{SCHEMA_VERSION}); upgrade bunq")  # fmt: skip
        if version == SCHEMA_VERSION and not migrate:  # an older trigger counts the same
            log.info("postgres: %s has trigger revision %d (this bunq's: %d); `bunq migrate`"
                     " installs it", self._ns, fn_rev, COUNT_FN_REV)  # fmt: skip
            return
        if not migrate:
            raise ConfigError(f"schema {self._ns} is {'missing' if version is None else version}"
                              f"; run `bunq migrate` (or open with migrate=auto)")  # fmt: skip
        self._migrate()

    def _version(self) -> tuple[int | None, int]:
        """The schema version (None: no tables) and the trigger function's revision."""
        with self._read() as tx:
            if not tx.sql("SELECT to_regclass(%(t)s)", {"t": self._meta})[0][0]:
                return None, 0
            rows = dict(tx.sql(f"SELECT key, value FROM {self._meta}"
                               f" WHERE key IN ('schema_version', 'count_fn')", {}))  # fmt: skip
        version = rows.get("schema_version")
        return (None if version is None else int(version)), int(rows.get("count_fn", 1))

    def migrate(self) -> int:
        """Create or upgrade bunq's tables; return the schema version. Idempotent.

        Safe while other brokers migrate or run: the DDL runs in one transaction
        under an advisory lock on the schema name, so concurrent calls queue up.
        """
        return self._run_unit(self._migrate, idempotent=True)

    def _migrate(self) -> int:
        with self._begin() as tx:
            tx.q("key_lock", key=f"bunq-migrate:{self.schema}")
            if self.schema is not None:
                tx.sql(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"', {})
            rows = tx.sql("SELECT to_regclass(%(t)s)", {"t": self._meta})
            if rows[0][0]:
                rows = tx.q("meta_get", key="schema_version")
            if rows and rows[0][0] and int(rows[0][0]) > SCHEMA_VERSION:
                raise ConfigError(f"schema {self._ns} is v{rows[0][0]}, newer than this bunq")
            for key in ddl_names(self._sql):
                tx.q(key)
            if rows and rows[0][0] and int(rows[0][0]) < 2:
                # v1: the counters and the registry, once, under the migration lock (the
                # triggers above hold writers off the jobs table until this commits).
                # From v2 the counter rows are right as they are (v3 adds the deltas).
                for key in sorted(k for k in self._sql if k.startswith("backfill")):
                    tx.q(key)
            tx.q("meta_put", key="schema_version", value=str(SCHEMA_VERSION))
            tx.q("meta_put", key="count_fn", value=str(COUNT_FN_REV))  # the triggers above
        return SCHEMA_VERSION

    # -- transactions --------------------------------------------------------------------
    def _checkout(self, timeout: float | None = None) -> Conn:
        if self._closed:
            raise BackendUnavailable("the PostgreSQL backend is closed")
        with self._spare_lock:
            conn = self._spare
            self._spare = None
            if conn is None:
                self._getting += 1
        if conn is None:
            try:
                wait = max(min(self.retry_ms / 1000, 5.0), 0.1) if timeout is None else timeout
                conn = self._pool.getconn(timeout=wait)
            finally:
                with self._spare_lock:
                    self._getting -= 1
        try:
            if self._dbclock is not None and time.monotonic() >= self._dbclock.due:
                self._dbclock.sync(conn)
        except BaseException:
            self._release(conn)
            raise
        return conn

    def _release(self, conn: Conn) -> None:
        # The last connection returned waits aside for the next checkout: a lone caller
        # (W1's producer) skips the pool's checkout and return (a third of the client's
        # work per add). Only an idle one, only while no checkout waits in the pool (it
        # would wait for this one), and back to the pool (its checks, lifetime and idle
        # limits) at least every SPARE_S.
        if conn.pgconn.transaction_status == IDLE and not self._closed:
            now = time.monotonic()
            with self._spare_lock:  # _closed again under the lock: close() takes the spare
                if self._spare is None and not self._getting and now < self._spare_due \
                        and not self._closed:  # fmt: skip
                    self._spare = conn
                    return
                if now >= self._spare_due:
                    self._spare_due = now + SPARE_S
        self._pool.putconn(conn)

    @contextlib.contextmanager
    def _begin(self, durable: bool = True) -> Iterator[PgTx]:
        conn = self._checkout()
        try:
            # Not durable (a claim, a completion): the commit does not wait for the WAL
            # flush; lost in a server crash it is undone and the job is leased again.
            tx = PgTx(conn, self._sql, [_BEGIN] if durable else [_BEGIN, _ASYNC])
            try:
                yield tx
            except BaseException:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
                raise
            if tx.pending and tx.pending[0] == _BEGIN:
                return  # nothing ran
            try:
                tx.cur.execute("; ".join([*tx.pending, "COMMIT"]), prepare=False)
            except psycopg.OperationalError as exc:
                raise CommitUnknown(str(exc)) from exc
        finally:
            self._release(conn)

    @contextlib.contextmanager
    def _read(self) -> Iterator[PgTx]:
        # READ COMMITTED gives each statement its own snapshot anyway, so reads run
        # as autocommit statements: two round trips (BEGIN, COMMIT) fewer.
        conn = self._checkout()
        try:
            yield PgTx(conn, self._sql, [])
        finally:
            self._release(conn)

    @contextlib.contextmanager
    def _collect(self) -> Iterator[PlainRows]:
        # One autocommit statement for every plain add that queued up meanwhile: one
        # round trip, no BEGIN/COMMIT, the NOTIFY included; COPY for big batches.
        # Either fails whole on an id that exists: a replay of our own commit whose
        # answer was lost (every row there with its seq) is success, anything else
        # a DuplicateJob, never a silently dropped job.
        tx = PlainRows()
        yield tx
        conn = self._checkout()
        try:
            # One leader at a time runs this: the cursor of its last connection is reused
            # (a new one costs psycopg a dozen calls), the spare making that the usual case.
            cur = self._plain_cur
            if cur is None or cur.connection is not conn:
                cur = self._plain_cur = conn.cursor()
            try:
                if len(tx.rows) >= COPY_MIN:
                    with conn.transaction():  # the count's mark holds to its end
                        copy_counted(cur, self._sql, tx.rows)
                    for q in {r["queue"] for r in tx.rows}:
                        self._ring(q)
                else:
                    self._insert(cur, tx.rows)
                self._unfolded += 1
            except pge.UniqueViolation as exc:
                cols = {k + "s": [r[k] for r in tx.rows] for k in ("id", "queue", "name")}
                cols["datas"] = [r["data"] for r in tx.rows]
                cur.execute(self._sql["replayed"], cols)
                row = cur.fetchone()
                if row is None or row[0] != len(tx.rows):
                    raise DuplicateJob(f"a job with one of these ids exists: {exc}") from exc
        except psycopg.OperationalError as exc:
            raise CommitUnknown(str(exc)) from exc
        finally:
            self._release(conn)
        if self._unfolded >= FOLD_EVERY:  # (the adds have committed: a failed fold waits)
            self._unfolded = 0
            with contextlib.suppress(psycopg.Error, BackendUnavailable):
                self._fold()

    def _fold(self) -> None:
        """The counts that plain adds appended, into the counter rows (TRIGGERS_PG)."""
        with self._read() as tx:  # one autocommit statement
            tx.q("fold_deltas")

    def sweep(self) -> SweepResult:
        """Fold the appended counts, then the housekeeping of every SQL backend."""
        self._run_unit(self._fold, idempotent=True)  # a repeat folds what is left
        return super().sweep()

    def _insert_sql(self, n: int) -> str:
        """The plain-add statement for ``n`` rows (``%s`` placeholders). The first row's
        id marks the statement as one that counts its rows (COUNTED_MARK)."""
        sql = self._insert_sqls.get(n)
        if sql is None:
            rest = ["%s"] * (len(INSERT_COLS) - 1)
            first = ", ".join([f"CASE WHEN {COUNTED_MARK} = 'on' THEN %s END", *rest])
            other = ", ".join(["%s", *rest])
            sql = self._insert_sqls[n] = self._insert_tmpls[min(n, 2)].replace(
                "{values}", ", ".join([f"({first})"] + [f"({other})"] * (n - 1)))  # fmt: skip
        return sql

    def _insert(self, cur: psycopg.Cursor[Any], rows: list[dict[str, Any]]) -> None:
        if len(rows) == 1:
            params = [*insert_row(rows[0]), *self._insert_tail]
        else:
            params = [v for r in rows for v in insert_row(r)]
            params += self._insert_tail
        if not self._plain_insert.run(cur.connection, len(rows), params):
            cur.execute(self._insert_sql(len(rows)), params)

    def add(self, jobs: Sequence[NewJob]) -> list[Job]:
        """Admit jobs (see Backend.add); plain ones share one INSERT or COPY."""
        check_new_jobs(jobs)  # bunq.validate's bounds fit PostgreSQL's columns (no NUL, int4)
        if not jobs or not all_plain(jobs):
            return SqlBackend.add(self, jobs)
        with paused_gc() if len(jobs) >= BULK else contextlib.nullcontext():
            prepared = self._prepare(jobs)
            return self._run_unit(lambda: self._plain.run(lambda tx: self._admit(tx, prepared)),
                                  idempotent=True)  # fmt: skip

    def _complete_rows(self, tx: Any, chunk: Sequence[tuple[Lease, bytes]],
                       now: int) -> list[tuple[Any, ...]]:  # fmt: skip
        rows: list[tuple[Any, ...]] = tx.q(
            "complete_arrays", now=now, ids=[le.job.id for le, _ in chunk],
            tokens=[le.token for le, _ in chunk], attempts=[le.attempt for le, _ in chunk],
            results=[blob for _, blob in chunk])  # fmt: skip
        return rows

    def _lock_key(self, tx: Any, key: str) -> None:
        tx.q("key_lock", key=f"{self._ns}:{key}")

    def _run_unit(self, work: Callable[[], T], idempotent: bool) -> T:
        """Run one unit of work, retrying transient failures where that is safe.

        Retried: a connection failure or a transaction rolled back by the server
        (serialization failure, deadlock: ``OperationalError``), a unique violation
        at most 3 times (the winner of a race is visible now), and a COMMIT whose
        answer was lost only if the unit is ``idempotent``; within ``retry_ms``.
        """
        deadline = time.monotonic() + self.retry_ms / 1000
        tries = 0
        with translate_errors():
            while True:
                try:
                    return work()
                except (psycopg.Error, CommitUnknown) as exc:
                    tries += 1
                    if isinstance(exc, CommitUnknown):
                        retry = idempotent
                    elif isinstance(exc, pge.UniqueViolation):
                        retry = tries <= 3  # the winner of a race is visible now
                    else:
                        retry = isinstance(exc, psycopg.OperationalError)
                    pause = min(0.01 * 2**tries, 1.0) * (0.5 + random.random())
                    if not retry or self._closed or time.monotonic() + pause > deadline:
                        raise
                    log.warning("postgres: %s; retry %d in %.0f ms", exc, tries, pause * 1000)
                    if tries == 1 and isinstance(exc, psycopg.OperationalError):
                        with contextlib.suppress(Exception):
                            self._pool.check()  # drop every dead idle connection at once
                    time.sleep(pause)

    # -- wake-ups ------------------------------------------------------------------------
    def _ring(self, queue: str) -> None:
        # A hint (errors ignored: waiters poll) that needs no durability, so its
        # transaction skips the WAL flush. Plain adds notify in their own statement.
        if self._closed or not QUEUE_NAME.fullmatch(queue):
            return
        cmd = f"BEGIN; SET LOCAL synchronous_commit = off; NOTIFY {self._channel}, '{queue}'"
        with contextlib.suppress(psycopg.Error, BackendUnavailable):
            conn = self._checkout(timeout=1.0)
            try:
                conn.execute(cmd + "; COMMIT", prepare=False)
            finally:
                self._release(conn)

    def _ring_on_commit(self, tx: Any, queue: str) -> bool:
        # The NOTIFY rides on the COMMIT's round trip (sent with it, delivered by it).
        if not QUEUE_NAME.match(queue):
            return False
        tx.raw(f"NOTIFY {self._channel}, '{queue}'")
        return True

    def wait(self, queue: str, timeout_ms: int) -> bool:
        """Block until a NOTIFY for ``queue`` arrives or ``timeout_ms`` passes."""
        return not self._closed and self._listener.wait(queue, max(timeout_ms, 0) / 1000)

    def close(self) -> None:
        """Stop the listener and close every pooled connection."""
        if self._closed:
            return
        self._events.close()  # writes the events still buffered
        if self._unfolded:  # this producer's appended counts (the sweep would fold them)
            with contextlib.suppress(psycopg.Error, BackendUnavailable):
                self._fold()
        self._closed = True
        with self._spare_lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            self._pool.putconn(spare)
        for lst in (self._listener, self._events.listener):
            lst.stop.set()
            lst.bump("")  # release waiters
            if lst.thread is not None:  # wake it out of notifies() at once
                with contextlib.suppress(psycopg.Error), self._pool.connection(timeout=1.0) as c:
                    c.execute(f"NOTIFY {lst.channel}")
                lst.thread.join(2.0)
        self._pool.close()
