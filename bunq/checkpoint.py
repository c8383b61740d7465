"""Checkpoint a SQLite file's WAL on a thread of its own, off every writer's path.

SQLite's automatic checkpoint runs inside the commit that crosses its threshold
and fsyncs the database file there: that commit then takes milliseconds. Both
bunq files use this instead (the SQLite backend's and the memory engine's
write-behind file): a WAL hook (``conn.set_wal_hook(checkpointer.hint)``, which
also turns the automatic checkpoint off) wakes a thread that runs PASSIVE
checkpoints, which never block a writer.
"""

from __future__ import annotations

import contextlib
import threading
import time

import apsw


class Checkpointer:
    """The checkpoint thread of one file, started lazily by :meth:`hint`.

    Past ``pages`` WAL frames the hint wakes it; it runs a PASSIVE checkpoint.
    Past ``limit`` frames (the thread never caught up with the writers) the
    committing writer waits for the thread's checkpoint, if one is running, and
    finishes the rest itself, so the WAL starts over: with one writing process it
    never grows much past ``limit`` frames plus one commit, however fast that
    process writes; with several, every commit past the limit tries again, and past
    ``2 * limit`` holds the other writers off while it checkpoints.
    The inline checkpoint it replaces was most of the SQLite backend's W4 p99 (a
    commit of an add or a lease taking milliseconds) and a stall of the memory
    engine's write-behind in every tenth PUSHB (docs/performance.md).
    """

    def __init__(self, path: str, pages: int = 1000) -> None:
        self.path = path
        self.pages = pages
        self.limit = 4 * pages  # WAL frames past which a commit finishes the checkpoint
        self._due = pages  # WAL length (frames) at which the next wake-up is due
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._running = threading.Lock()  # held while this file's checkpoint runs
        self._stopped = False

    def hint(self, conn: apsw.Connection, dbname: str, pages: int) -> int:
        # Called after every commit. While the WAL stays long (a producer outruns the
        # checkpoints), wake the thread once per ``pages // 4`` new frames, not per
        # commit: a wake-up per commit cost a lone producer ~10 us (lock, notify, GIL).
        if pages < self._due:
            if pages < self.pages:
                self._due = self.pages  # the WAL restarted
            return 0
        # Below the limit, the next look is never past it (the commit that reaches it
        # must see it); past it, every commit looks (see below).
        self._due = pages + 1 if pages >= self.limit else \
            min(pages + self.pages // 4, self.limit)  # fmt: skip
        if self._stopped:
            return 0
        if pages >= self.limit:
            # The thread has not caught up (commits came faster than a checkpoint
            # ends), and the WAL only starts over once every frame is copied back:
            # this commit waits for the thread's checkpoint (a second one would only
            # fail busy, and the WAL grew on: CI saw 4,533 frames against 4,272) and
            # copies the rest itself. The thread copied most frames by now, so this
            # is short, and the next write transaction restarts the WAL. Unless a
            # writer in another process appended meanwhile (or its checkpoint made
            # this one fail busy): then the next commit, of either, tries again, and
            # copies the few frames added since; with a try only every 250 frames the
            # two processes' tries met, and the WAL grew to 80,000 frames in 5 s of
            # bench/peers.py's W4 (a producer and a worker process).
            #
            # Writers in two processes that never pause can keep that up: past twice
            # the limit the commit runs a RESTART checkpoint, which holds every other
            # writer off (they wait in their busy handlers) while it copies the rest,
            # then waits for readers to leave the WAL, so the next write restarts it.
            mode = apsw.SQLITE_CHECKPOINT_RESTART if pages >= 2 * self.limit else \
                apsw.SQLITE_CHECKPOINT_PASSIVE  # fmt: skip
            with self._running, contextlib.suppress(apsw.Error):  # busy: another process
                conn.wal_checkpoint(mode=mode)
            return 0
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
        primed = False
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopped:
                    return
                try:
                    # A connection that has not read the file does not know it is in WAL
                    # mode: its checkpoints return (-1, -1) and copy nothing back (so the
                    # WAL grew without bound until the last connection closed, before
                    # this read was here).
                    if not primed:
                        conn.execute("PRAGMA schema_version").fetchall()
                        primed = True
                    with self._running:
                        conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
                except apsw.Error:
                    time.sleep(0.05)  # busy: the next hint retries
        finally:
            conn.close()

    def close(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
