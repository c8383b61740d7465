"""Checkpoint a SQLite file's WAL on a thread of its own, off every writer's path.

SQLite's automatic checkpoint runs inside the commit that crosses its threshold
and fsyncs the database file there: that commit then takes milliseconds. Both
bunq files use this instead (the SQLite backend's and the memory engine's
write-behind file): a WAL hook (``conn.set_wal_hook(checkpointer.hint)``, which
also turns the automatic checkpoint off) wakes a thread that runs PASSIVE
checkpoints, which never block a writer (past a limit, see Checkpointer).
"""

from __future__ import annotations

import contextlib
import threading
import time

import apsw

RESTART_WAIT_MS = 100  # how long the thread's RESTART checkpoint waits for locks
RESTART_BACKOFF_S = 1.0  # no RESTART for this long after two in a row failed


class Checkpointer:
    """The checkpoint thread of one file, started lazily by :meth:`hint`.

    Past ``pages`` WAL frames the hint wakes it; it runs a PASSIVE checkpoint.
    Past ``limit`` frames (the thread never caught up with the writers) the
    committing writer waits for the thread's checkpoint, if one is running, and
    finishes the rest itself, so the WAL starts over: with one writing process it
    never grows much past ``limit`` frames plus one commit, however fast that
    process writes. With writers in several processes every commit past the limit
    tries again, and past ``2 * limit`` the thread runs a RESTART checkpoint.
    The inline checkpoint this replaces was most of the SQLite backend's W4 p99 (a
    commit of an add or a lease taking milliseconds) and a stall of the memory
    engine's write-behind in every tenth PUSHB (docs/performance.md).
    """

    def __init__(self, path: str, pages: int = 1000) -> None:
        self.path = path
        self.pages = pages
        self.limit = 4 * pages  # WAL frames past which a commit finishes the checkpoint
        self._due = pages  # WAL length (frames) at which the next look is due
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._running = threading.Lock()  # held while this file's checkpoint runs
        self._restart = False  # the thread's next checkpoint is a RESTART
        self._restart_failed = 0  # RESTARTs in a row that failed (busy)
        self._restart_after = 0.0  # (monotonic) no RESTART before this
        self._stopped = False

    def hint(self, conn: apsw.Connection, dbname: str, pages: int) -> int:
        # Called after every commit. Below the limit, look once per ``pages // 4`` new
        # frames (a wake-up per commit cost a lone producer ~10 us: lock, notify, GIL),
        # but never past the limit: the commit that reaches it must see it. Past the
        # limit, look at every commit until the WAL restarts.
        if pages < self._due:
            if pages < self.pages:
                self._due = self.pages  # the WAL restarted
            return 0
        self._due = pages + 1 if pages >= self.limit else \
            min(pages + self.pages // 4, self.limit)  # fmt: skip
        if self._stopped:
            return 0
        if self.limit <= pages < 2 * self.limit:
            # The thread has not caught up, and the WAL only starts over once every
            # frame is copied back: wait for the thread's checkpoint (a second one would
            # only fail busy) and copy the rest, which is short; the next write then
            # restarts the WAL, unless a writer in another process appended meanwhile,
            # and then the next commit of either tries again (docs/sqlite.md).
            with self._running, contextlib.suppress(apsw.Error):  # busy: another process
                conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
            return 0
        if pages >= 2 * self.limit:
            # Writers in several processes that never pause kept that up: the thread
            # runs a RESTART, which holds every writer off while it copies the rest and
            # then waits for readers to leave the WAL. On the thread, it waits
            # RESTART_WAIT_MS at most; a commit would wait its busy timeout (10 s) for a
            # reader of an old snapshot, which keeps the WAL anyway.
            self._restart = True
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name="bunq-checkpoint")  # fmt: skip
                    self._thread.start()
        self._wake.set()
        return 0  # SQLITE_OK

    def _run(self) -> None:
        conn = apsw.Connection(self.path)
        started = [0.0]

        def spin(count: int) -> bool:
            # Busy handler of a RESTART (a PASSIVE checkpoint never waits): retries in
            # 50 us - 1 ms steps, for RESTART_WAIT_MS in all. SQLite's own handler
            # sleeps 1, 2, 5, 10 ms ... and missed the gaps between two processes'
            # commits.
            if count == 0:
                started[0] = time.monotonic()
            elif time.monotonic() - started[0] > RESTART_WAIT_MS / 1000:
                return False
            time.sleep(min(0.00005 * (count + 1), 0.001))
            return True

        conn.set_busy_handler(spin)
        primed = False
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopped:
                    return
                mode = apsw.SQLITE_CHECKPOINT_PASSIVE
                if self._restart and time.monotonic() >= self._restart_after:
                    self._restart = False
                    mode = apsw.SQLITE_CHECKPOINT_RESTART
                try:
                    # A connection that has not read the file does not know it is in WAL
                    # mode: its checkpoints return (-1, -1) and copy nothing back (so the
                    # WAL grew without bound until the last connection closed, before
                    # this read was here).
                    if not primed:
                        conn.execute("PRAGMA schema_version").fetchall()
                        primed = True
                    with self._running:
                        conn.wal_checkpoint(mode=mode)
                    if mode == apsw.SQLITE_CHECKPOINT_RESTART:
                        self._restart_failed = 0
                except apsw.Error:
                    if mode == apsw.SQLITE_CHECKPOINT_RESTART:
                        # A reader holding an old snapshot fails every RESTART (and each
                        # held the writers off for RESTART_WAIT_MS): after two in a row,
                        # PASSIVE only for a while. Lock contention rarely fails two.
                        self._restart_failed += 1
                        if self._restart_failed >= 2:
                            self._restart_failed = 0
                            self._restart_after = time.monotonic() + RESTART_BACKOFF_S
                    time.sleep(0.05)  # busy: the next hint retries
        finally:
            conn.close()

    def close(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
