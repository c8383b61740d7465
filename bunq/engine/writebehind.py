"""SQLite write-behind for the engine: batched, on one writer thread (apsw).

The engine notes changed records in each shard's ``dirty`` map (id ->
record, or None once removed; a record changed twice in one window is
written once). The writer thread wakes every ``flush_ms`` (or at once when
``flush_changes`` changes are pending), takes each shard's lock just long
enough to encode its dirty rows, then writes them all in ONE transaction
outside the engine's locks. WAL, ``synchronous=NORMAL``: a committed batch
survives a process crash.

Nothing captured is dropped: a batch owns the changes it took until they
are committed; if an encode or the commit fails they go back to the dirty
maps (unless newer changes superseded them), the failure is logged, and
the writer retries with backoff. A record that cannot be encoded at all
(admission validation makes that a bug) stays in memory, is logged, and
makes :meth:`WriteBehind.sync` raise; the rest of the batch commits.

Loss window: a non-durable change that was acknowledged but not yet
committed is lost if the process dies (``docs/engine.md`` gives the bound).
A ``durable=True`` add commits its own rows before it returns, under the
locks of the shards it touched (:meth:`WriteBehind.commit_held`), so no
one sees the job before it is on disk; if the commit fails the add is
undone and raises, and nothing is stored.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import apsw

from ..checkpoint import Checkpointer
from ..codec import options_blob, packer
from ..errors import BackendError, BackendUnavailable, ConfigError
from ..filekind import ENGINE_FILE, claim
from . import codec
from .lockfile import FileLock
from .record import COMPLETED, Rec

if TYPE_CHECKING:
    from .core import Core
    from .shard import Shard, UniqueKey

    Dirty = dict[str, Rec | None]
    DirtyUnique = dict[UniqueKey, list[object] | None]

log = logging.getLogger("bunq.engine")


class Batch:
    """Rows captured from the engine for one transaction.

    The changes a batch captured (``taken``) belong to it until the commit:
    on any failure, of an encode or of the commit, they go back into their
    shards' dirty maps (unless newer changes superseded them). Records that
    cannot be encoded (``held``) are kept dirty and reported; the rest commits.
    """

    __slots__ = ("inserts", "updates", "deletes", "uniq_put", "uniq_del", "queue_put",
                 "queue_del", "kv_put", "kv_del", "taken", "kv_taken", "held", "size")  # fmt: skip

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
        self.taken: list[tuple[Shard, Dirty, DirtyUnique, set[str]]] = []
        self.kv_taken: set[tuple[str, str]] = set()
        self.held: list[tuple[Shard, str, Rec, BaseException]] = []
        self.size = 0


class WriteBehind:
    """The writer thread and the data file of one engine.

    :param core: the engine whose changes are written.
    :param conn: an open apsw connection on the data file (schema in place).
    :param lock: the held :class:`FileLock` (released by :meth:`close`).

    ``wlock`` serialises capture + commit: the writer thread's flushes and the
    commits of durable adds, so rows reach the file in the order they changed.
    Lock order: ``wlock``, then shard locks (ascending), then ``xlock``.
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
        self.wlock = threading.Lock()
        self.cv = threading.Condition()
        self.started = 0  # flush cycles begun
        self.committed = 0  # flush cycles whose transaction committed
        self.failures = 0  # flush cycles that failed (their changes were kept)
        self.failing = False  # the last flush failed: the file cannot be written now
        self.unwritable = 0  # records kept in memory because they cannot be encoded
        self.last_error: BaseException | None = None
        self.flushes = 0
        self.rows = 0
        self.max_flush_s = 0.0  # longest capture + commit: the tail of the loss window
        self.flush_times: deque[float] = deque(maxlen=4096)  # recent flush durations (s)
        self._wake = threading.Event()
        self._closing = False
        # the WAL is checkpointed on a thread of its own: inline, every tenth commit of
        # a PUSHB stream stalled on it (the flush a producer past max_backlog waits for)
        self.checkpointer = Checkpointer(self.path)
        conn.set_wal_hook(self.checkpointer.hint)
        self._thread = threading.Thread(target=self._run, name="bunq-write-behind", daemon=True)
        self._thread.start()

    # -- engine side -----------------------------------------------------------------------
    def pending(self) -> int:
        """Changes noted and not yet captured by a flush (a racy count)."""
        n = 0
        for shard in self.core.shards:
            dirty = shard.dirty
            if dirty is not None:
                n += len(dirty)
        return n

    def admit(self) -> None:
        """Backpressure before an add: wait while ``max_backlog`` changes are pending.

        The add has not changed anything yet, so a refusal stores nothing.

        :raises BackendUnavailable: the file cannot be written (at once when the
            last flush failed, else after ``sync_timeout_s``).
        """
        if self.pending() < self.max_backlog:
            return
        if self.failing:
            raise BackendUnavailable(f"write-behind cannot write {self.path}: "
                                     f"{self.last_error}; nothing was added")  # fmt: skip
        self.sync()

    def kick(self) -> None:
        """Start a flush if ``flush_changes`` changes are pending; wait past ``max_backlog``.

        After a change other than an add (a lease, an ack: adds call :meth:`wake`).
        The wait is the write-behind's backpressure: a caller that outruns
        the disk waits for the next commit, so the loss window stays bounded
        by ``flush_ms`` plus the time to write ``max_backlog`` rows. The
        caller's change is already made, so a commit that does not come in
        time is not an error here (the change stays pending and is reported
        by :meth:`sync`).
        """
        pending = self.pending()
        if pending >= self.max_backlog and not self.failing:
            try:
                self.sync()
            except BackendError:
                pass
        elif pending >= self.flush_changes and not self._wake.is_set():
            self._wake.set()

    def wake(self) -> None:
        """Start a flush if ``flush_changes`` changes are pending; never wait.

        After an add, whose backpressure was :meth:`admit`: the add is acknowledged
        while its rows commit, so a stream of bulks (PUSHB) overlaps its next
        admission with this commit. The loss bound is :meth:`admit`'s (docs/engine.md).
        """
        if not self._wake.is_set() and self.pending() >= self.flush_changes:
            self._wake.set()

    def sync(self) -> None:
        """Return once every change noted before this call is committed.

        :raises BackendUnavailable: the writer could not commit in time.
        :raises BackendError: some changes cannot be encoded (kept in memory).
        """
        with self.cv:
            ticket = self.started + 1
            self._wake.set()
            deadline = time.monotonic() + self.sync_timeout_s
            while self.committed < ticket:
                left = deadline - time.monotonic()
                if left <= 0 or self._closing and not self._thread.is_alive():
                    raise BackendUnavailable(
                        f"write-behind could not commit to {self.path}: {self.last_error!r}"
                    )
                self.cv.wait(min(left, 0.5))
            if self.unwritable:
                raise BackendError(f"write-behind keeps {self.unwritable} changes it cannot "
                                   f"encode: {self.last_error!r}")  # fmt: skip

    def commit_held(self, shards: list[Shard]) -> None:
        """Commit every pending change of ``shards`` now (a durable add).

        The caller holds ``wlock`` and the locks of ``shards`` (so nothing it
        admitted is visible until this returns). On failure the changes go
        back to the shards' dirty maps and the error is raised, for the caller
        to undo its own admission.

        :raises BackendUnavailable: the file cannot be written (disk full...).
        :raises BackendError: a record of the batch cannot be encoded.
        """
        batch = Batch()
        try:
            for shard in shards:
                self._capture_shard(shard, batch)
            if batch.held:
                raise BackendError(f"cannot encode job {batch.held[0][1]}: "
                                   f"{batch.held[0][3]!r}") from batch.held[0][3]  # fmt: skip
            if batch.size:
                self._write(batch)
        except BaseException:
            self._restore(batch, locked=True)
            raise
        self._done(batch, time.perf_counter(), locked=True)

    @property
    def path(self) -> str:
        return self.lock.path[:-5]

    def close(self) -> None:
        """Flush what is pending, stop the writer, close the file, release the lock."""
        if self._closing:
            return
        self._closing = True
        self._wake.set()
        self._thread.join()
        self.checkpointer.close()
        try:
            self.conn.close()
        finally:
            self.lock.release()

    # -- writer thread --------------------------------------------------------------------
    def _run(self) -> None:
        backoff = 0.05
        while True:
            self._wake.wait(self.flush_s)
            self._wake.clear()
            closing = self._closing
            with self.cv:
                self.started += 1
                cycle = self.started
            try:
                self.flush()
            except Exception as exc:  # kept and retried; sync() reports it
                self.failures += 1
                if not self.failing or repr(exc) != repr(self.last_error):
                    log.error("write-behind flush to %s failed (changes kept, retrying): %s",
                              self.path, exc)  # fmt: skip
                self.failing = True
                self.last_error = exc
                if closing:
                    return
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            if self.failing:
                log.warning("write-behind to %s recovered after %d failed flushes",
                            self.path, self.failures)  # fmt: skip
            self.failing = False
            backoff = 0.05
            with self.cv:
                self.committed = cycle
                self.cv.notify_all()
            if closing:
                return

    def flush(self) -> int:
        """Capture every pending change and commit it in one transaction; return rows.

        :raises BackendUnavailable: the file cannot be written; every change is kept.
        """
        with self.wlock:
            t0 = time.perf_counter()
            batch = Batch()
            try:
                self._capture(batch)
                if batch.size:
                    self._write(batch)
            except BaseException:
                self._restore(batch, locked=False)
                raise
            self._done(batch, t0, locked=False)
            return batch.size

    def _done(self, batch: Batch, t0: float, locked: bool) -> None:
        # After a commit: records that could not be encoded go back, and are reported.
        if batch.held:
            for shard, jid, rec, exc in batch.held:
                log.error("write-behind cannot encode job %s (kept in memory, not on disk): %r",
                          jid, exc)  # fmt: skip
                self.last_error = exc
                with _maybe(shard.lock, not locked):
                    shard.give_back(({jid: rec}, {}, set()))
        if not locked:  # the writer thread's full flush: its count is the engine's
            self.unwritable = len(batch.held)
        if batch.size:
            self.flushes += 1
            self.rows += batch.size
            took = time.perf_counter() - t0
            self.max_flush_s = max(self.max_flush_s, took)
            self.flush_times.append(took)

    def _capture(self, batch: Batch) -> None:
        core = self.core
        for shard in core.shards:
            if not (shard.dirty or shard.dirty_unique or shard.dirty_queues):
                continue
            with shard.lock:
                self._capture_shard(shard, batch)
        if core.kv_dirty:
            with core.kv_lock:
                keys, core.kv_dirty = core.kv_dirty, set()
                batch.kv_taken = keys
                for ns, key in keys:
                    value = core.kv.get(ns, {}).get(key)
                    if value is None:
                        batch.kv_del.append((ns, key))
                    else:
                        batch.kv_put.append((ns, key, value))
                batch.size += len(keys)

    def _capture_shard(self, shard: Shard, batch: Batch) -> None:
        # Shard lock held. The maps move to the batch first: from here on any failure
        # puts them back (Batch), so no captured change is ever dropped.
        dirty, uniq, names = shard.take_changes()
        batch.taken.append((shard, dirty, uniq, names))
        results = self.core.results
        blob_of = options_blob
        meta = codec.meta
        pack_one = packer()  # one encoder for the shard's rows
        held = len(batch.held)
        inserts, updates = batch.inserts, batch.updates
        last_opts: object = None  # a bulk's jobs share one options object: encoded once
        opts_blob = b""
        with self.core.xlock:  # results LRU
            for jid, rec in dirty.items():
                if rec is None:
                    batch.deletes.append((jid,))
                    continue
                try:
                    state = rec.state
                    result = results.peek(jid) if state is COMPLETED else None
                    if rec.saved:
                        updates.append((state.value, meta(rec, pack_one), result, jid))
                    else:
                        opts = rec.opts
                        if opts is not last_opts:
                            opts_blob, last_opts = blob_of(opts), opts
                        inserts.append((jid, rec.queue, state.value, rec.data, opts_blob,
                                        meta(rec, pack_one), result))  # fmt: skip
                        rec.saved = True
                except Exception as exc:  # kept dirty and reported, never dropped
                    batch.held.append((shard, jid, rec, exc))
        batch.size += len(dirty) - (len(batch.held) - held)
        for (queue, key), entry in uniq.items():
            if entry is None:
                batch.uniq_del.append((queue, key))
            else:
                batch.uniq_put.append((queue, key, entry[0], entry[1]))
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
            if isinstance(exc, (apsw.FullError, apsw.IOError, apsw.CantOpenError,
                                apsw.BusyError, apsw.LockedError, apsw.ReadOnlyError)):  # fmt: skip
                raise BackendUnavailable(f"write-behind cannot write {self.path}: {exc}") from exc
            raise BackendError(f"write-behind flush to {self.path} failed: {exc}") from exc

    def _restore(self, b: Batch, locked: bool) -> None:
        """Put every change ``b`` took back, unless a newer change superseded it."""
        for shard, dirty, uniq, names in b.taken:
            with _maybe(shard.lock, not locked):
                for rec in dirty.values():
                    if rec is not None:
                        rec.saved = False  # rewrite the full row: the insert may be what failed
                shard.give_back((dirty, uniq, names))
        if b.kv_taken:
            with self.core.kv_lock:
                if self.core.kv_dirty is not None:
                    self.core.kv_dirty |= b.kv_taken


def _maybe(lock: threading.Lock, take: bool) -> AbstractContextManager[Any]:
    return lock if take else nullcontext()


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
            shard.track_changes()
            for rec in shard.active.values():
                shard.touch(rec)
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
