"""Fixed costs at a million jobs: counts, sweep, tick(max=100); prints JSON.

    python bench/scale.py [--backends sqlite,postgres,memory] [--sizes 10000,100000,1000000]
                          [--completed 500000] [--dsn postgresql://postgres@127.0.0.1:5432/test]
                          [--dir /tmp] [--only levels,add_latency,pg_loop]

levels: for each backend, a queue grows to each size of ``--sizes`` (waiting jobs,
    added through the bulk path), then ``--completed`` completed jobs are retained
    beside the largest; at each level the medians of ``counts()``, ``sweep()`` with
    nothing due, a ``tick(max=100)`` on that queue (no-op handler) and the fixed cost
    of a tick (an empty queue, housekeeping due: sweep + cron + counts).
    ``ratio``: the largest level's figure over the smallest's (target: <= 2).
add_latency: SQLite, ``--backlog`` (default the largest size) jobs waiting in queue
    "big" of one file, a Worker process draining queue "live" of the same file
    (sweeping every second), this process adding single jobs to "live" at ~500/s
    for ``--seconds``: add latency p50 / p99 / max (targets: max <= 50 ms, p99 <= 5 ms).
pg_loop: PostgreSQL, ``tick(max=100)`` in a loop vs a raw loop of the claim-100 and
    complete-100 statements (bunq's own, through psycopg, on the same tables) in the
    same run: jobs/s each and the ratio (target >= 0.5).

Completed jobs are made by one UPDATE of bulk-added jobs (the counters follow it
through the same triggers as any completion), so the whole bench takes minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bunq import connect, tick  # noqa: E402
from bunq.queue import new_job  # noqa: E402

PAYLOAD = {"user": 12345, "email": "someone@example.com", "pad": "x" * 40}
BULK = 5_000


def ms(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 3)


def fill(backend: Any, queue: str, n: int) -> float:
    t = time.perf_counter()
    for i in range(0, n, BULK):
        backend.add([new_job(queue, "job", PAYLOAD, {}) for _ in range(min(BULK, n - i))])
    if backend.kind == "sqlite":  # steady state: the bulk load's WAL checkpointed, not pending
        backend._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return round(time.perf_counter() - t, 1)


def complete_in_place(backend: Any, queue: str, n: int) -> float:
    """Add ``n`` jobs to ``queue`` and mark them completed (one UPDATE on SQL)."""
    t = time.perf_counter()
    if backend.kind == "memory":  # in a queue of their own (the engine keeps them per queue)
        fill(backend, "done-" + queue, n)
        while True:
            got = backend.lease("done-" + queue, 1000, 60_000, "b")
            if not got:
                break
            backend.complete_many([(x, None) for x in got])
    else:
        fill(backend, "done-" + queue, n)
        now = backend.clock()
        with backend._begin() as tx:
            jobs = backend._sql["get_job"].split(" FROM ")[1].split(" WHERE")[0]
            sql = (f"UPDATE {jobs} SET queue = :q, state = 'completed', finished_at = :now,"
                   " started_at = :now, attempts = 1 WHERE queue = :src")  # fmt: skip
            if backend.kind == "postgres":
                sql = sql.replace(":q", "%(q)s").replace(":now", "%(now)s")
                sql = sql.replace(":src", "%(src)s")
            tx.sql(sql, {"q": queue, "now": now, "src": "done-" + queue})
    return round(time.perf_counter() - t, 1)


def measure(backend: Any, queue: str) -> dict[str, float]:
    def tick_fixed() -> None:
        sys.modules["bunq.tick"]._last_sweep.pop(backend, None)  # housekeeping due: pay it
        tick("empty", lambda job: None, backend, max=100)

    out = {
        "counts_ms": ms(lambda: backend.counts(queue), 21),
        "sweep_ms": ms(backend.sweep, 11),
        "tick_fixed_ms": ms(tick_fixed, 11),
        "tick100_ms": ms(lambda: tick(queue, lambda job: None, backend, max=100), 11),
    }
    return out


def levels(kind: str, url: str, sizes: list[int], completed: int) -> dict[str, Any]:
    backend = connect(url, completed_max_count=10 * completed) if kind != "memory" \
        else connect(url)  # fmt: skip
    queue, have, rows = "scale", 0, []
    try:
        for size in sizes:
            took = fill(backend, queue, size - have)
            have = size
            rows.append({"waiting": size, "fill_s": took, **measure(backend, queue)})
            have -= 100 * 11  # the measured ticks drained some
        if completed:
            took = complete_in_place(backend, queue, completed)
            rows.append({"waiting": have, "completed": completed, "fill_s": took,
                         **measure(backend, queue)})  # fmt: skip
    finally:
        backend.close()
    first, last = rows[0], rows[-1]
    ratio = {k: round(last[k] / first[k], 2) for k in first if k.endswith("_ms") and first[k]}
    return {"backend": kind, "levels": rows, "ratio_last_over_first": ratio}


WORKER = """
import sys, time
from bunq import Worker, connect
be = connect(sys.argv[1])
w = Worker("live", lambda job: None, be, sweep_interval_ms=1000, idle_wait_ms=50)
print("ready", flush=True)
w.run()  # until SIGTERM
"""


def add_latency(path: str, backlog: int, seconds: float) -> dict[str, Any]:
    url = f"sqlite:///{path}"
    _remove(path)
    backend = connect(url)
    took = fill(backend, "big", backlog)
    total = int(seconds * 500)
    alone = _paced_adds(backend, "alone", total // 2)  # the machine's own noise, no worker
    worker = subprocess.Popen([sys.executable, "-c", WORKER, url],
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": ROOT})  # fmt: skip
    assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    lat = _paced_adds(backend, "live", total)
    time.sleep(1.0)  # let the worker finish the last adds
    worker.send_signal(signal.SIGTERM)
    worker.wait(60)
    done = backend.counts("live")
    backend.close()
    return {"backlog": backlog, "fill_s": took, "adds": total, **_pcts(lat),
            "worker_completed": done["completed"],
            "without_worker": {"adds": len(alone), **_pcts(alone)}}  # fmt: skip


def _paced_adds(backend: Any, queue: str, n: int, rate: int = 500) -> list[float]:
    lat = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        backend.add([new_job(queue, "job", PAYLOAD, {})])
        lat.append((time.perf_counter() - t) * 1000)
        pause = start + (i + 1) / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    return lat


def _pcts(lat: list[float]) -> dict[str, float]:
    lat = sorted(lat)
    return {"p50_ms": round(lat[len(lat) // 2], 3), "p99_ms": round(lat[int(len(lat) * 0.99)], 3),
            "max_ms": round(lat[-1], 3)}  # fmt: skip


def pg_loop(url: str, n: int) -> dict[str, Any]:
    import psycopg

    backend = connect(url)
    try:
        fill(backend, "raw", n)
        fill(backend, "ticked", n)
        lease_sql, done_sql = backend._sql["lease"], backend._sql["complete_arrays"]
        dsn = backend.dsn
        with psycopg.connect(dsn, autocommit=True) as conn:
            t = time.perf_counter()
            jobs = 0
            while True:
                now = backend.clock()
                with conn.transaction():
                    rows = conn.execute(lease_sql, {"token": "t", "owner": "raw", "now": now,
                                                    "until": now + 30_000, "queue": "raw",
                                                    "n": 100}).fetchall()  # fmt: skip
                if not rows:
                    break
                with conn.transaction():
                    conn.execute(done_sql, {"now": backend.clock(), "ids": [r[0] for r in rows],
                                            "tokens": ["t"] * len(rows),
                                            "attempts": [r[11] for r in rows],
                                            "results": [b"\xc0"] * len(rows)})  # fmt: skip
                jobs += len(rows)
            raw = jobs / (time.perf_counter() - t)
        t = time.perf_counter()
        jobs = 0
        while True:
            r = tick("ticked", lambda job: None, backend, max=100)
            jobs += r.succeeded
            if not r.leased:
                break
        ticked = jobs / (time.perf_counter() - t)
    finally:
        backend.close()
    return {"jobs": n, "raw_jobs_per_s": round(raw), "tick_jobs_per_s": round(ticked),
            "ratio": round(ticked / raw, 2)}  # fmt: skip


def _remove(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    shutil.rmtree(path + ".bell", ignore_errors=True)  # the doorbell's socket directory


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="sqlite,postgres,memory")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--completed", type=int, default=500_000)
    ap.add_argument("--backlog", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--loop-jobs", type=int, default=20_000)
    dsn = os.environ.get("BUNQ_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--dsn", default=dsn)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--only", default="levels,add_latency,pg_loop")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    only = set(args.only.split(","))
    schemas: list[str] = []

    def pg_url() -> str:
        schemas.append(f"bunq_scale_{uuid.uuid4().hex[:8]}")
        sep = "&" if "?" in args.dsn else "?"
        return f"{args.dsn}{sep}schema={schemas[-1]}"

    out: dict[str, Any] = {"sizes": sizes, "completed": args.completed}
    try:
        for kind in args.backends.split(",") if "levels" in only else []:
            path = os.path.join(args.dir, f"bunq-scale-{uuid.uuid4().hex[:6]}.db")
            url = {"sqlite": f"sqlite:///{path}", "memory": "memory://"}.get(kind) or pg_url()
            out[kind] = levels(kind, url, sizes, args.completed)
            print(json.dumps({kind: out[kind]}), file=sys.stderr, flush=True)
            _remove(path)
        if "add_latency" in only:
            path = os.path.join(args.dir, f"bunq-scale-add-{uuid.uuid4().hex[:6]}.db")
            out["sqlite_add_under_backlog"] = [  # the smallest size: the control
                add_latency(path, backlog, args.seconds)
                for backlog in (sizes[0], args.backlog or sizes[-1])
            ]
            _remove(path)
        if "pg_loop" in only:
            out["postgres_tick_loop"] = pg_loop(pg_url(), args.loop_jobs)
    finally:
        if schemas:
            import psycopg

            with psycopg.connect(args.dsn, autocommit=True) as conn:
                for s in schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
