"""SQLite W4's raw limit: end-to-end latency at 1,000 jobs/s with nothing of bunq's
but its file (schema, indexes, counter triggers, pragmas) and its two statements.

    python bench/raw_latency.py [--seconds 5] [--rate 1000] [--dir /dev/shm]   # prints JSON

A producer process inserts one row per autocommit statement (``insert_job``, straight
into ``jobs``: no intake, no group commit) at ``rate`` per second, each row's payload
carrying its ``time.time()``. A consumer thread here polls ``PRAGMA data_version``
(the cheapest question SQLite answers: "did another connection commit?") every
0.2 ms, and on a change leases up to 50 rows with bunq's own ``lease`` statement and
completes them with ``complete_batch``, each in its own ``BEGIN IMMEDIATE``
transaction. Latency is taken when the consumer holds a row, as ``bench/workloads.py``
W4 takes it when bunq's handler runs. ``bench/peers.py`` puts it beside bunq's W4
rows (the file on disk, and on tmpfs): whatever p99 this gets is the machine's, not
bunq's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import msgpack

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"  # last on the path: bench/ must not shadow packages (bench/redis.py)
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != BENCH]
sys.path.append(str(BENCH))

from workloads import PAYLOAD, latency  # noqa: E402

from bunq.backends import connect  # noqa: E402
from bunq.backends.sql.rows import COL  # noqa: E402
from bunq.codec import options_blob  # noqa: E402
from bunq.job import DEFAULT_OPTIONS, new_job_id  # noqa: E402

POLL_S = 0.0002
LEASE_N = 50


def job_row(i: int, data: bytes, opts: bytes) -> dict[str, Any]:
    """Parameters of bunq's ``insert_job`` for a plain job, queue "raw"."""
    now = int(time.time() * 1000)
    return {"id": new_job_id(), "queue": "raw", "name": "job", "data": data,
            "state": "waiting", "priority": 0, "seq": i, "ord_at": now, "run_at": now,
            "created_at": now, "max_attempts": 1, "expire_at": None, "grp": None,
            "parent_id": None, "pending_deps": 0, "opts": opts, "remove_on_complete": 0,
            "remove_on_fail": 0}  # fmt: skip


def produce(path: str, rate: int, seconds: int) -> None:
    backend: Any = connect(f"sqlite:///{path}")
    conn, sql = backend._conn(), backend._sql["insert_job"]
    opts = options_blob(DEFAULT_OPTIONS)
    start = time.perf_counter()
    for i in range(rate * seconds):
        target = start + i / rate
        while (delay := target - time.perf_counter()) > 0:
            time.sleep(delay)
        conn.execute(sql, job_row(i, msgpack.packb({**PAYLOAD, "t": time.time()}), opts))
    backend.close()


def consume(path: str, stop: threading.Event, lat: list[float]) -> None:
    backend: Any = connect(f"sqlite:///{path}")
    conn, lease_sql = backend._conn(), backend._sql["lease"]
    cur = conn.cursor()
    seen = None
    while not stop.is_set():
        version = cur.execute("PRAGMA data_version").fetchall()[0][0]
        if version == seen:
            time.sleep(POLL_S)
            continue
        seen = version
        while True:  # until a lease comes back empty
            now = int(time.time() * 1000)
            token = uuid.uuid4().hex
            cur.execute("BEGIN IMMEDIATE")
            rows = cur.execute(lease_sql, {"queue": "raw", "n": LEASE_N, "token": token,
                                           "owner": "", "until": now + 30_000,
                                           "now": now}).fetchall()  # fmt: skip
            cur.execute("COMMIT")
            if not rows:
                break
            held = time.time()
            lat.extend((held - msgpack.unpackb(r[COL.data])["t"]) * 1000 for r in rows)
            params: dict[str, Any] = {"now": int(held * 1000)}
            for i, r in enumerate(rows):
                params.update({f"v{i}_0": r[COL.id], f"v{i}_1": token,
                               f"v{i}_2": r[COL.attempts], f"v{i}_3": None})  # fmt: skip
            cur.execute("BEGIN IMMEDIATE")
            cur.execute(backend._batch_sql("complete_batch", len(rows), 4), params)
            cur.execute("COMMIT")
        seen = cur.execute("PRAGMA data_version").fetchall()[0][0]  # our own commits
    backend.close()


def w4(rate: int, seconds: int, folder: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bunq-raw-", dir=folder) as d:
        path = f"{d}/raw.db"
        connect(f"sqlite:///{path}").close()  # the schema, before either side opens it
        lat: list[float] = []
        stop = threading.Event()
        t = threading.Thread(target=consume, args=(path, stop, lat))
        t.start()
        time.sleep(0.3)
        subprocess.run([sys.executable, __file__, "--produce", path, str(rate), str(seconds)],
                       check=True)  # fmt: skip
        time.sleep(0.5)
        stop.set()
        t.join()
    return latency(lat, rate)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--dir", help="the folder for the file (default: the system's temp)")
    ap.add_argument("--produce", nargs=3, help=argparse.SUPPRESS)  # path rate seconds
    args = ap.parse_args()
    if args.produce:
        produce(args.produce[0], int(args.produce[1]), int(args.produce[2]))
        return
    print(json.dumps(w4(args.rate, args.seconds, args.dir)))


if __name__ == "__main__":
    main()
