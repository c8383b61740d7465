"""Both bunq SQLite files checkpoint their WAL on a thread of their own (bunq.checkpoint):
no writer's commit runs the checkpoint inline below the limit, the thread does run it,
and the WAL stays bounded under a writer that never pauses."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import apsw
import pytest

from bunq import Queue
from bunq.backends import connect

PAGE = 4096
KINDS = ["sqlite", "memory"]


def open_(tmp_path: Path, kind: str) -> tuple[Any, str]:
    path = str(tmp_path / "ckpt.db")
    return connect(f"sqlite:///{path}" if kind == "sqlite" else f"memory://?data={path}"), path


def checkpointer(b: Any) -> Any:
    return b._writer.checkpointer if hasattr(b, "_writer") else b._checkpointer


def bulk(q: Queue, b: Any, n: int = 1_000) -> None:
    q.add_bulk([("j", {"i": k, "pad": "x" * 200}) for k in range(n)])
    if hasattr(b, "sync"):  # the memory engine: its write-behind has committed it
        b.sync()


def one_bulk_in(tmp_path: Path, kind: str = "sqlite") -> tuple[Any, Queue, Any, str, int]:
    """A file of ``kind`` holding one bulk: backend, queue, checkpointer, path, and the WAL
    pages a bulk takes."""
    b, path = open_(tmp_path, kind)
    q = Queue("q", b)
    bulk(q, b)
    return b, q, checkpointer(b), path, os.path.getsize(path + "-wal") // PAGE


@pytest.mark.parametrize("kind", KINDS)
def test_the_wal_is_checkpointed_off_the_writers_path(tmp_path: Path, kind: str) -> None:
    b, path = open_(tmp_path, kind)
    try:
        q = Queue("q", b)
        bulk(q, b, 1)
        base = os.path.getsize(path)
        cp = checkpointer(b)
        cp._stopped = True  # the thread is not woken: only an inline checkpoint could run
        for _ in range(12):
            bulk(q, b)
        wal = os.path.getsize(path + "-wal") // PAGE
        assert 1_000 < wal < cp.limit  # past SQLite's own autocheckpoint threshold...
        assert os.path.getsize(path) == base  # ...and no commit checkpointed inline
        cp._stopped = False
        copied = base + 12_000 * 200  # the twelve bulks' payloads, at least
        deadline = time.monotonic() + 10
        while os.path.getsize(path) <= copied and time.monotonic() < deadline:
            bulk(q, b, 100)  # commits hint again; a checkpoint copies page by page, so
            time.sleep(0.05)  # the file grows while it runs: wait for all of it
        assert os.path.getsize(path) > copied  # the thread copied them back
    finally:
        b.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_wal_stays_bounded_under_a_writer_that_never_pauses(tmp_path: Path,
                                                               kind: str) -> None:  # fmt: skip
    b, q, cp, path, per_bulk = one_bulk_in(tmp_path, kind)
    try:
        for _ in range(2 * cp.limit // per_bulk):  # twice the limit's worth of frames
            bulk(q, b)
        assert os.path.getsize(path + "-wal") // PAGE <= cp.limit + 2 * per_bulk
        assert q.counts()["waiting"] == (1 + 2 * cp.limit // per_bulk) * 1_000
    finally:
        b.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_commit_past_the_limit_waits_for_a_running_checkpoint_then_copies_the_rest(
        tmp_path: Path, kind: str) -> None:  # fmt: skip
    b, q, cp, path, per_bulk = one_bulk_in(tmp_path, kind)
    try:
        base = os.path.getsize(path)
        done = threading.Event()

        def producer() -> None:
            for _ in range(2 * cp.limit // per_bulk):
                bulk(q, b)
            done.set()

        with cp._running:  # as the thread holds it while its checkpoint runs
            t = threading.Thread(target=producer)
            t.start()
            deadline = time.monotonic() + 30
            while os.path.getsize(path + "-wal") // PAGE < cp.limit:
                assert time.monotonic() < deadline, "the WAL never reached the limit"
                time.sleep(0.05)
            time.sleep(0.5)
            assert not done.is_set()  # the commit that crossed the limit waits...
            assert os.path.getsize(path + "-wal") // PAGE <= cp.limit + per_bulk
            assert os.path.getsize(path) == base  # ...and nothing was copied back
        t.join(30)
        assert done.is_set()
        assert os.path.getsize(path) > base + cp.limit * PAGE // 2  # then it copied them
        assert os.path.getsize(path + "-wal") // PAGE <= cp.limit + per_bulk  # WAL restarted
        assert q.counts()["waiting"] == (1 + 2 * cp.limit // per_bulk) * 1_000
    finally:
        b.close()


WRITER = """
import sys
from bunq import Queue, connect
b = connect(sys.argv[1])
q = Queue("q", b)
for _ in range(int(sys.argv[2])):
    q.add_bulk([("j", {"i": k, "pad": "x" * 200}) for k in range(1_000)])
b.close()
"""


def test_the_wal_stays_bounded_with_writers_in_two_processes(tmp_path: Path) -> None:
    # Each process has its own checkpointer; a checkpoint of one copies what it saw while
    # the other appends (or fails busy against the other's), so past the limit every
    # commit tries, and past twice the limit the thread holds the writers off (RESTART).
    b, q, cp, path, per_bulk = one_bulk_in(tmp_path)
    try:
        limit = cp.limit
        bulks = 2 * limit // per_bulk  # each: four times the limit's worth between them
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, f"sqlite:///{path}", str(bulks)])
                 for _ in range(2)]  # fmt: skip
        most = 0
        while any(p.poll() is None for p in procs):
            if os.path.exists(path + "-wal"):
                most = max(most, os.path.getsize(path + "-wal") // PAGE)
            time.sleep(0.01)
        assert [p.wait() for p in procs] == [0, 0]
        # about 2 * limit plus the bulks committed while the thread waits for the lock
        # (8,105-8,487 pages here, 9,060 once beside three busy loops and a dd loop;
        # 13,140 with every commit's PASSIVE try and no RESTART)
        assert most <= 3 * limit
        assert q.counts()["waiting"] == (1 + 2 * bulks) * 1_000
    finally:
        b.close()


def test_a_reader_of_an_old_snapshot_costs_wal_length_never_a_long_stall(tmp_path: Path) -> None:
    # The RESTART past twice the limit cannot restart the WAL while a reader keeps an old
    # snapshot; it waits RESTART_WAIT_MS for it on the thread, never a commit's busy
    # timeout (10 s), and after two that failed it pauses.
    b, q, cp, path, per_bulk = one_bulk_in(tmp_path)
    try:
        limit = cp.limit
        reader = apsw.Connection(path)
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM jobs").fetchall()  # its snapshot, held
        slowest, n = 0.0, 3 * limit // per_bulk
        for _ in range(n):
            t0 = time.monotonic()
            bulk(q, b)
            slowest = max(slowest, time.monotonic() - t0)
        assert os.path.getsize(path + "-wal") // PAGE > 2 * limit  # the reader kept it
        assert slowest < 2.0  # 10 s when a commit ran the RESTART (7553df5)
        reader.execute("COMMIT")
        reader.close()
        assert q.counts()["waiting"] == (1 + n) * 1_000
    finally:
        b.close()
