"""SQLite write-behind for the engine: batched, on one writer thread (apsw).

The engine notes changed records in each shard's ``dirty`` map (id ->
record, or None once removed; a record changed twice in one window is
written once). The writer thread wakes every ``flush_ms`` (or at once when
``flush_changes`` changes are pending, or a durable add asks), takes each
shard's lock just long enough to encode its dirty rows, then writes them all
in ONE transaction outside the engine's locks. WAL, ``synchronous=NORMAL``:
a committed batch survives a process crash.

Loss window: a change that was acknowledged but not yet committed is lost if
the process dies; that is at most ``flush_ms`` (10 ms) plus one flush's
duration of changes. ``durable=True`` adds, and :meth:`WriteBehind.sync`,
wait for the commit that covers them.

A batch that fails to commit is put back (unless newer changes superseded
it) and retried with backoff; ``sync`` gives up with BackendUnavailable
after ``sync_timeout_s``.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import apsw

from ..backends.filekind import ENGINE_FILE, claim
from ..codec import options_blob
from ..errors import BackendError, BackendUnavailable, ConfigError
from . import codec
from .lockfile import FileLock
from .record import COMPLETED, Rec

if TYPE_CHECKING:
    from .core import Core
    from .shard import Shard


class Batch:
    """Rows captured from the engine for one transaction."""

    __slots__ = ("inserts", "updates", "deletes", "uniq_put", "uniq_del", "queue_put",
                 "queue_del", "kv_put", "kv_del", "recs", "size")  # fmt: skip

    def __init__(self) -> None:
        self.inserts: list[tuple[Any, ...]] = []
        self.updates: list[tuple[Any, ...]] = []
        self.deletes: list[tuple[str]] = []
        self.uniq_put: list[tuple[Any, ...]] = []
        self.uniq_del: list[tuple[str, str]] = []
        self.queue_put: list[tuple[Any, ...]] = []
        self.queue_del: list[tuple[str]] = []
        self.kv_put: list[tuple[str, str, bytes]] = []
        self.kv_del: list[tuple[str, str]] = []
        self.recs: list[tuple[Shard, str, Rec | None]] = []  # for a retry after failure
        self.size = 0


class WriteBehind:
    """The writer thread and the data file of one engine.

    :param core: the engine whose changes are written.
    :param conn: an open apsw connection on the data file (schema in place).
    :param lock: the held :class:`FileLock` (released by :meth:`close`).
    """

    def __init__(self, core: Core, conn: apsw.Connection, lock: FileLock, *,
                 flush_ms: int = 10, flush_changes: int = 100, max_backlog: int = 1_000,
                 sync_timeout_s: float = 30.0) -> None:  # fmt: skip
        self.core = core
        self.conn = conn
        self.lock = lock
        self.flush_s = max(flush_ms, 1) / 1000
        self.flush_changes = max(flush_changes, 1)
        self.max_backlog = max(max_backlog, self.flush_changes)
        self.sync_timeout_s = sync_timeout_s
        self.cv = threading.Condition()
        self.started = 0  # flush cycles begun
        self.committed = 0  # flush cycles whose transaction committed
        self.failures = 0
        self.last_error: BaseException | None = None
        self.flushes = 0
        self.rows = 0
        self.max_flush_s = 0.0  # longest capture + commit: the tail of the loss window
        self.flush_times: deque[float] = deque(maxlen=4096)  # recent flush durations (s)
        self._wake = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="bunq-write-behind", daemon=True)
        self._thread.start()

    # -- engine side -----------------------------------------------------------------------
    def kick(self) -> None:
        """Start a flush if ``flush_changes`` changes are pending; block past ``max_backlog``.

        The backlog bound is the write-behind's backpressure: a producer that
        outruns the disk waits for the next commit, so the loss window stays
        bounded by ``flush_ms`` plus the time to write ``max_backlog`` rows.
        """
        pending = 0
        for shard in self.core.shards:
            dirty = shard.dirty
            if dirty is not None:
                pending += len(dirty)
        if pending >= self.max_backlog:
            self.sync()
        elif pending >= self.flush_changes and not self._wake.is_set():
            self._wake.set()

    def sync(self) -> None:
        """Return once every change noted before this call is committed.

        :raises BackendUnavailable: the writer could not commit in time.
        """
        with self.cv:
            ticket = self.started + 1
            self._wake.set()
            deadline = time.monotonic() + self.sync_timeout_s
            while self.committed < ticket:
                left = deadline - time.monotonic()
                if left <= 0 or self._closing and not self._thread.is_alive():
                    raise BackendUnavailable(
                        f"write-behind could not commit to {self.lock.path[:-5]}: "
                        f"{self.last_error!r}")  # fmt: skip
                self.cv.wait(min(left, 0.5))

    def close(self) -> None:
        """Flush what is pending, stop the writer, close the file, release the lock."""
        if self._closing:
            return
        self._closing = True
        self._wake.set()
        self._thread.join()
        try:
            self.conn.close()
        finally:
            self.lock.release()

    # -- writer thread --------------------------------------------------------------------
    def _run(self) -> None:
        backoff = 0.1
        while True:
            self._wake.wait(self.flush_s)
            self._wake.clear()
            closing = self._closing
            with self.cv:
                self.started += 1
                cycle = self.started
            try:
                self.flush()
            except Exception as exc:  # noqa: BLE001 - retried; sync() reports it
                self.failures += 1
                self.last_error = exc
                if closing:
                    return
                time.sleep(min(backoff, 30.0))
                backoff *= 2
                continue
            backoff = 0.1
            with self.cv:
                self.committed = cycle
                self.cv.notify_all()
            if closing:
                return

    def flush(self) -> int:
        """Capture every pending change and commit it in one transaction; return rows."""
        t0 = time.perf_counter()
        batch = self._capture()
        if not batch.size:
            return 0
        try:
            self._write(batch)
        except BaseException:
            self._restore(batch)
            raise
        self.flushes += 1
        self.rows += batch.size
        took = time.perf_counter() - t0
        self.max_flush_s = max(self.max_flush_s, took)
        self.flush_times.append(took)
        return batch.size

    def _capture(self) -> Batch:
        batch = Batch()
        core = self.core
        for shard in core.shards:
            if not (shard.dirty or shard.dirty_unique or shard.dirty_queues):
                continue
            with shard.lock:
                self._capture_shard(shard, batch)
        if core.kv_dirty:
            with core.kv_lock:
                keys, core.kv_dirty = core.kv_dirty, set()
                for ns, key in keys:
                    value = core.kv.get(ns, {}).get(key)
                    if value is None:
                        batch.kv_del.append((ns, key))
                    else:
                        batch.kv_put.append((ns, key, value))
                batch.size += len(keys)
        return batch

    def _capture_shard(self, shard: Shard, batch: Batch) -> None:
        dirty, shard.dirty = shard.dirty or {}, {}
        results = self.core.results
        blob_of = options_blob
        with self.core.xlock:  # results LRU
            for jid, rec in dirty.items():
                if rec is None:
                    batch.deletes.append((jid,))
                    batch.recs.append((shard, jid, None))
                    continue
                result = results.peek(jid) if rec.state is COMPLETED else None
                state = rec.state.value
                if rec.saved:
                    batch.updates.append((state, codec.meta(rec), result, jid))
                else:
                    batch.inserts.append((jid, rec.queue, state, rec.data, blob_of(rec.opts),
                                          codec.meta(rec), result))  # fmt: skip
                    rec.saved = True
                batch.recs.append((shard, jid, rec))
        batch.size += len(dirty)
        uniq, shard.dirty_unique = shard.dirty_unique or {}, {}
        for (queue, key), entry in uniq.items():
            if entry is None:
                batch.uniq_del.append((queue, key))
            else:
                batch.uniq_put.append((queue, key, entry[0], entry[1]))
        names, shard.dirty_queues = shard.dirty_queues or set(), set()
        for name in names:
            q = shard.queues.get(name)
            if q is None:
                batch.queue_del.append((name,))
            else:
                batch.queue_put.append((name, int(q.paused), codec.limits_blob(q.limits),
                                        codec.dlq_blob(q.dlq_config)))  # fmt: skip
        batch.size += len(uniq) + len(names)

    def _write(self, b: Batch) -> None:
        cur = self.conn.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")
            for sql, rows in ((codec.INSERT_JOB, b.inserts), (codec.UPDATE_JOB, b.updates),
                              (codec.DELETE_JOB, b.deletes), (codec.DELETE_UNIQ, b.uniq_del),
                              (codec.PUT_UNIQ, b.uniq_put), (codec.DELETE_QUEUE, b.queue_del),
                              (codec.PUT_QUEUE, b.queue_put), (codec.DELETE_KV, b.kv_del),
                              (codec.PUT_KV, b.kv_put)):  # fmt: skip
                if rows:
                    cur.executemany(sql, rows)
            cur.execute("COMMIT")
        except apsw.Error as exc:
            if not self.conn.getautocommit():
                cur.execute("ROLLBACK")
            raise BackendError(f"write-behind flush failed: {exc}") from exc

    def _restore(self, b: Batch) -> None:
        # Put the failed batch back unless newer changes superseded it.
        for shard, jid, rec in b.recs:
            with shard.lock:
                dirty = shard.dirty
                if dirty is None:
                    continue
                if rec is not None:
                    rec.saved = False  # rewrite the full row: the insert may be what failed
                if jid not in dirty:
                    dirty[jid] = rec


def open_store(core: Core, path: str, *, flush_ms: int = 10,
               flush_changes: int = 100) -> WriteBehind:  # fmt: skip
    """Lock ``path``, recover the engine from it, then start writing behind.

    :raises DataFileLocked: another process (or open) owns the file.
    :raises ConfigError: the path is unusable or the schema is newer.
    """
    if not path or path == ":memory:":
        raise ConfigError("data= needs a file path (not :memory:)")
    path = os.path.abspath(path)
    lock = FileLock(path)
    try:
        conn = _connect(path)
        from .recovery import recover

        recover(core, conn)
        for shard in core.shards:
            shard.dirty, shard.dirty_unique, shard.dirty_queues = {}, {}, set()
            for rec in shard.active.values():
                shard.dirty[rec.id] = rec
        core.kv_dirty = set()
        store = WriteBehind(core, conn, lock, flush_ms=flush_ms, flush_changes=flush_changes)
    except BaseException:
        lock.release()
        raise
    core.store = store
    store.sync()  # recovery's own changes (re-queued active jobs) are on disk first
    return store


def _connect(path: str) -> apsw.Connection:
    try:
        conn = apsw.Connection(path)
        conn.set_busy_timeout(5_000)
        claim(conn, path, ENGINE_FILE)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchall()[0][0]
        if str(mode).lower() != "wal":
            raise ConfigError(f"{path}: could not switch to WAL (got {mode})")
        conn.execute("PRAGMA synchronous=NORMAL")
        for ddl in codec.DDL:
            conn.execute(ddl)
        rows = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        if rows and int(str(rows[0][0])) > codec.SCHEMA_VERSION:
            raise ConfigError(f"{path} has engine schema v{rows[0][0]}, newer than this bunq")
        if not rows:
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)",
                         (str(codec.SCHEMA_VERSION),))  # fmt: skip
    except apsw.Error as exc:
        raise BackendError(f"cannot open data file {path}: {exc}") from exc
    return conn
