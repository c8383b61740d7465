"""W1-W4 on the PostgreSQL backend; prints JSON (one object per workload, then a summary).

    python bench/postgres.py [--dsn postgresql://postgres@127.0.0.1:5432/test] [-n 100000]
                             [--only W1,W1T,W2,W3,W4] [--repeat 1]

The workloads are those of ``bench/workloads.py`` (the same code measures every
backend); each runs in a fresh schema that is dropped afterwards.

W1: n single adds, one producer.  W1T: n single adds from 8 producer threads
sharing commits (group commit).  W2: n adds in bulks of 1,000 (COPY path).
W3: drain n queued jobs with a no-op handler through bunq.Worker, one process.
W4: end-to-end latency p50/p99 while another process produces 1,000 jobs/s
    for 10 s and one Worker runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import psycopg  # noqa: E402
import workloads  # noqa: E402

TARGETS = {"W1": 4_000, "W1T": None, "W2": 150_000, "W3": 20_000}
PEERS = {  # measured on this server (see docs/performance.md)
    "W1": {"pgqueuer": 2_800},
    "W2": {"pgqueuer": 63_800},
    "W3": {"pgqueuer": 7_100, "procrastinate": 1_000},
    "W4": {"pgqueuer_p50_ms": 1.3, "pgqueuer_p99_ms": 2.5},
}


def run_one(dsn: str, name: str, fn: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    schema = f"bunq_bench_{name.lower()}_{uuid.uuid4().hex[:6]}"
    sep = "&" if "?" in dsn else "?"
    try:
        return fn(f"{dsn}{sep}schema={schema}")
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    ap = argparse.ArgumentParser()
    dsn = os.environ.get("BUNQ_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--dsn", default=dsn)
    ap.add_argument("-n", type=int, default=100_000)
    ap.add_argument("--only", default="W1,W1T,W2,W3,W4")
    ap.add_argument("--repeat", type=int, default=1, help="runs per workload (median kept)")
    args = ap.parse_args()
    runs: dict[str, Callable[[str], dict[str, Any]]] = {
        "W1": lambda url: workloads.w1(url, args.n),
        "W1T": lambda url: workloads.w1_threads(url, args.n, 8),
        "W2": lambda url: workloads.w2(url, args.n),
        "W3": lambda url: workloads.w3(url, args.n),
        "W4": lambda url: workloads.w4(url),
    }
    summary: dict[str, Any] = {}
    for name in args.only.split(","):
        results = [run_one(args.dsn, name, runs[name]) for _ in range(args.repeat)]
        key = "p50_ms" if name == "W4" else "jobs_per_s"
        best = sorted(results, key=lambda r: r[key])[len(results) // 2]
        target = TARGETS.get(name, "p50 <= 1.5 ms")
        out = {"workload": name, **best, "runs": [r[key] for r in results],
               "target": target, "peers": PEERS.get(name, {})}  # fmt: skip
        print(json.dumps(out), flush=True)
        summary[name] = best[key]
    print(json.dumps({"summary": summary, "median_of": args.repeat,
                      "python": sys.version.split()[0]}))  # fmt: skip


if __name__ == "__main__":
    main()
