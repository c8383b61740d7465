"""Child-process roles for the multi-process tests on SQLite (run as a script).

python procs.py worker DB OUT [LEASE_MS] [SLEEP_S]   # record "id attempt" per job run
python procs.py producer DB COUNT BULK               # add COUNT jobs in bulks
python procs.py add-print DB                         # add forever, print each acked id

DB is a SQLite file path or any backend URL (``redis://...``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from bunq import Queue, Worker
from bunq.backends import Backend, connect
from bunq.backends.sql.sqlite import SQLiteBackend


def _open(db: str) -> Backend:
    return connect(db) if "://" in db else SQLiteBackend(db)


def worker(db: str, out: str, lease_ms: int = 30_000, sleep_s: float = 0.0) -> None:
    backend = _open(db)
    log = open(out, "a", buffering=1)  # line-buffered for the killer
    total = int(os.environ.get("EXPECT", "0"))

    def handler(job: Any) -> None:
        log.write(f"start {job.id} {job.attempts}\n")
        if sleep_s:
            time.sleep(sleep_s)
        log.write(f"done {job.id} {job.attempts}\n")

    w = Worker("mp", handler, backend, lease_ms=lease_ms, batch=20, sweep_interval_ms=200).start()
    deadline = time.monotonic() + float(os.environ.get("MAX_SECONDS", "120"))
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if total and backend.counts("mp")[__import__("bunq").JobState.COMPLETED] >= total:
            break
    w.close()


def worker_run(db: str, out: str) -> None:
    """Run Worker.run() in the foreground (SIGTERM ends it gracefully)."""
    log = open(out, "a", buffering=1)

    def handler(job: Any) -> str:
        log.write(f"start {job.id} {job.attempts}\n")
        time.sleep(0.3)
        log.write(f"done {job.id} {job.attempts}\n")
        return "ok"

    Worker("mp", handler, _open(db), batch=10).run()
    log.write("exit 0 0\n")


def producer(db: str, count: int, bulk: int) -> None:
    q = Queue("mp", _open(db))
    n = 0
    while n < count:
        size = min(bulk, count - n)
        if size == 1:
            q.add("job", {"n": n})
        else:
            q.add_bulk([("job", {"n": n + i}) for i in range(size)])
        n += size


def add_print(db: str) -> None:
    q = Queue("mp", _open(db))
    i = 0
    while True:
        job = q.add("job", {"i": i})
        sys.stdout.write(job.id + "\n")
        sys.stdout.flush()
        i += 1


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    if role == "worker":
        worker(args[0], args[1], *(int(args[2]),) if len(args) > 2 else (),
               *(float(args[3]),) if len(args) > 3 else ())  # fmt: skip
    elif role == "worker-run":
        worker_run(args[0], args[1])
    elif role == "producer":
        producer(args[0], int(args[1]), int(args[2]))
    elif role == "add-print":
        add_print(args[0])
