"""W1-W4 on the Redis backend beside RQ and BullMQ on the same Redis; prints JSON.

    python bench/redis.py [--url redis://127.0.0.1:6379/0] [-n 20000] [--only W1,W2,W3,W4]
                          [--repeat 3] [--rq-python /path/to/venv/bin/python] [--node node]

bunq runs the workloads of ``bench/workloads.py`` (under a fresh key prefix, deleted
afterwards). RQ runs ``bench/rq_side.py`` with ``--rq-python`` (a Python that has
``rq``: not a bunq dependency; skipped when absent). BullMQ runs
``bench/bullmq_side.mjs`` with node, BullMQ installed by
``npm install --prefix bench/.node`` (skipped when absent).

W1: n single adds, one producer, each awaited (RQ ``enqueue``, BullMQ ``add``).
W2: n adds in bulks of 1,000 (RQ ``enqueue_many``, BullMQ ``addBulk``).
W3: drain n queued jobs with a no-op handler (bunq.Worker; BullMQ Worker at concurrency
    10; RQ SimpleWorker, one job at a time, on at most 5,000 jobs: it is slow).
W4: end-to-end latency p50/p99 while another process produces 1,000 jobs/s for 10 s.
Targets (issue 18): W1 >= 2x RQ and >= 1x BullMQ; W2 >= 1x BullMQ; W3 >= 1x BullMQ.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
# This file is bench/redis.py: its folder must not shadow redis-py.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != BENCH]
sys.path.insert(0, ROOT)

import redis  # noqa: E402

sys.path.append(BENCH)
import workloads  # noqa: E402

SIDE = {"W1": "add", "W2": "bulk", "W3": "process", "W4": "w4"}
TARGETS = {"W1": {"rq": 2.0, "bullmq": 1.0}, "W2": {"bullmq": 1.0}, "W3": {"bullmq": 1.0}}


def bunq_run(url: str, name: str, n: int) -> dict[str, Any]:
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in url else "?"
    runs: dict[str, Callable[[str], dict[str, Any]]] = {
        "W1": lambda u: workloads.w1(u, n),
        "W2": lambda u: workloads.w2(u, n),
        "W3": lambda u: workloads.w3(u, n),
        "W4": lambda u: workloads.w4(u),
    }
    try:
        return runs[name](f"{url}{sep}prefix={prefix}")
    finally:
        client = redis.Redis.from_url(url)
        for pattern in (f"{{{prefix}}}*", f"{{{prefix}:*"):
            keys = list(client.scan_iter(match=pattern, count=1000))
            for i in range(0, len(keys), 500):
                client.delete(*keys[i : i + 500])
        client.close()


def side(cmd: list[str]) -> dict[str, Any] | None:
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        print(f"{cmd[:3]} failed: {exc}", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default=os.environ.get("BUNQ_REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("-n", type=int, default=20_000)
    ap.add_argument("--only", default="W1,W2,W3,W4")
    ap.add_argument("--rq-python", default=os.environ.get("RQ_PYTHON"))
    ap.add_argument("--node", default=shutil.which("node"))
    ap.add_argument("--repeat", type=int, default=3, help="interleaved runs (median kept)")
    args = ap.parse_args()
    has_bullmq = args.node and os.path.isdir(os.path.join(BENCH, ".node", "node_modules", "bullmq"))
    summary: dict[str, Any] = {}
    for name in args.only.split(","):
        key = "p50_ms" if name == "W4" else "per_s"
        size = "10" if name == "W4" else str(min(args.n, 5_000) if name == "W3" else args.n)
        runs: dict[str, list[dict[str, Any]]] = {"bunq": [], "rq": [], "bullmq": []}
        for _ in range(args.repeat):  # interleaved, so load changes hit every system alike
            bunq = bunq_run(args.url, name, args.n)
            runs["bunq"].append({**bunq, "per_s": bunq.get("jobs_per_s")})
            if args.rq_python:
                got = side([args.rq_python, os.path.join(BENCH, "rq_side.py"), SIDE[name],
                            size, args.url])  # fmt: skip
                if got:
                    runs["rq"].append(got)
            if has_bullmq:
                got = side([args.node, os.path.join(BENCH, "bullmq_side.mjs"), SIDE[name],
                            "10" if name == "W4" else str(args.n), args.url])  # fmt: skip
                if got:
                    runs["bullmq"].append(got)
        row: dict[str, Any] = {"workload": name}
        med: dict[str, float] = {}
        for system, results in runs.items():
            if results:
                values = sorted(float(r[key]) for r in results)
                med[system] = values[len(values) // 2]
                row[system] = {key: med[system], "runs": [r[key] for r in results]}
                if name == "W4":
                    p99 = sorted(float(r["p99_ms"]) for r in results)
                    row[system]["p99_ms"] = p99[len(p99) // 2]
        ratios = {}
        for peer in ("rq", "bullmq"):
            if peer in med and med[peer]:
                # throughput: ours / theirs; latency: theirs / ours (> 1: bunq does better)
                ours, theirs = med["bunq"], med[peer]
                ratios[peer] = round(theirs / ours if name == "W4" else ours / theirs, 2)
        row["bunq_vs"] = ratios
        row["targets"] = TARGETS.get(name, {})
        row["met"] = all(ratios.get(p, 0) >= t for p, t in TARGETS.get(name, {}).items())
        print(json.dumps(row), flush=True)
        summary[name] = {**med, "ratios": ratios, "met": row["met"]}
    print(json.dumps({"summary": summary, "n": args.n, "median_of": args.repeat,
                      "python": sys.version.split()[0]}))  # fmt: skip


if __name__ == "__main__":
    main()
