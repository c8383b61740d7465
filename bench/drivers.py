"""CPU per job of the drivers over the execution core; prints JSON.

    python bench/drivers.py [-n 20000] [--runs 5]

For each of Worker (W3's shape: batch 500, no-op handler) and ``tick(max=n)``,
over the memory engine and a SQLite file: the process CPU time per job (µs,
median of ``--runs``; robust to other processes on a shared machine, unlike
wall time) and jobs/s by wall time. ``tick`` also reports how many leased jobs
it gave back (a job-time spike makes it shorten its chunk), which costs time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":  # run as a script: bench/ must not shadow packages (bench/redis.py)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "bench")]
sys.path.insert(0, ROOT)

from bunq import Queue, Worker, connect, tick  # noqa: E402

PAYLOAD = {"user": 12345, "email": "someone@example.com", "template": "welcome-v2", "pad": "x" * 40}


def filled(url: str, name: str, n: int) -> tuple[Any, Queue]:
    be = connect(url)
    q = Queue(name, be)
    for _ in range(n // 1000):
        q.add_bulk([("job", PAYLOAD)] * 1000)
    return be, q


def worker(url: str, n: int) -> dict[str, float]:
    be, q = filled(url, "w", n)
    done, count = threading.Event(), 0

    def handler(job: Any) -> None:
        nonlocal count
        count += 1
        if count == n:
            done.set()

    c0, t0 = time.process_time(), time.perf_counter()
    w = Worker("w", handler, be, batch=500).start()
    done.wait(600)
    while q.counts()["completed"] < n:
        time.sleep(0.001)
    c, t = time.process_time() - c0, time.perf_counter() - t0
    w.close()
    be.close()
    return {"cpu_us_per_job": c / n * 1e6, "jobs_per_s": n / t}


def ticked(url: str, n: int) -> dict[str, float]:
    be, _ = filled(url, "t", n)
    c0, t0 = time.process_time(), time.perf_counter()
    r = tick("t", lambda job: None, be, max=n)
    c, t = time.process_time() - c0, time.perf_counter() - t0
    assert r.succeeded == n, r
    be.close()
    return {"cpu_us_per_job": c / n * 1e6, "jobs_per_s": n / t, "released": r.released}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    out: dict[str, Any] = {"jobs": args.n, "runs": args.runs, "load_1m": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as d:
        cases = {"worker_memory": (worker, "memory://"), "tick_memory": (ticked, "memory://")}
        for kind, fn in (("worker", worker), ("tick", ticked)):
            cases[f"{kind}_sqlite"] = (fn, "sqlite")
        for name, (fn, url) in cases.items():
            runs = []
            for i in range(args.runs):
                runs.append(fn(f"sqlite:///{d}/{name}-{i}.db" if url == "sqlite" else url, args.n))
            out[name] = {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
