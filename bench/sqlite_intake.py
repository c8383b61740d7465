"""What SQLite's intake defers, and what it saves; prints JSON.

    python bench/sqlite_intake.py [--sizes 10000,100000] [--adds 20000] [--dir /tmp]

absorb: for each size, a fresh file gets that many plain jobs through ``add_bulk`` (1,000
    per call: they wait in the intake, as packs since schema v4), then the first
    ``counts()`` moves them into ``jobs`` (the absorb the adds deferred) and a second
    ``counts()`` finds nothing to move. Reported: the adds' rate, the first read's
    milliseconds and microseconds per job moved, the second read's milliseconds.
lone: ``--adds`` single ``Queue.add`` calls on a fresh file, with nobody reading the
    queue's events (one autocommit insert per add), then with an event reader
    registered (group commit, BEGIN/COMMIT and the ``added`` event in the transaction),
    then the first ``counts()`` after each (the absorb of what they added).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from workloads import PAYLOAD  # noqa: E402  (bench/ is the script's own folder)

from bunq import Queue, connect  # noqa: E402


def timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def absorb(where: str, size: int) -> dict[str, Any]:
    d = tempfile.mkdtemp(dir=where)
    try:
        q = Queue("absorb", connect(f"sqlite:///{d}/a.db"))
        batch = [("job", PAYLOAD)] * 1000
        adds = timed(lambda: [q.add_bulk(batch) for _ in range(size // 1000)])
        pending = q.backend._conn().execute(
            "SELECT (SELECT COUNT(*) FROM intake)"
            " + (SELECT COALESCE(SUM(n), 0) FROM intake_packs)").fetchall()[0][0]  # fmt: skip
        first = timed(q.counts)
        second = timed(q.counts)
        q.backend.close()
        return {"jobs": size, "adds_per_s": round(size / adds), "in_intake": pending,
                "first_counts_ms": round(first * 1000, 1),
                "us_per_row_moved": round(first * 1e6 / max(pending, 1), 2),
                "second_counts_ms": round(second * 1000, 2)}  # fmt: skip
    finally:
        shutil.rmtree(d, ignore_errors=True)


def lone(where: str, n: int, heard: bool) -> dict[str, Any]:
    d = tempfile.mkdtemp(dir=where)
    try:
        q = Queue("lone", connect(f"sqlite:///{d}/l.db"))
        reader = q.backend.event_reader("lone") if heard else None
        q.add("job", PAYLOAD)  # the first add learns whether the queue's events are read
        dt = timed(lambda: [q.add("job", PAYLOAD) for _ in range(n)])
        first = timed(q.counts)
        if reader is not None:
            reader.close()
        q.backend.close()
        return {"adds": n, "events_read": heard, "adds_per_s": round(n / dt),
                "first_counts_ms": round(first * 1000, 1)}  # fmt: skip
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--adds", type=int, default=20000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    out = {
        "absorb": [absorb(args.dir, int(s)) for s in args.sizes.split(",")],
        "lone": [lone(args.dir, args.adds, heard) for heard in (False, True)],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
