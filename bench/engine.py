"""Memory engine throughput and memory; prints JSON.

    python bench/engine.py [-n 100000] [--repeat 5]
                           [--only add,bulk,process,disk,durable,rss]
                           [--with-bunqueue]

add      n single adds through the Backend API (``backend.add([NewJob])``), the
         NewJob (and its id) built inside the timed loop, as a caller would.
bulk     n adds in calls of 1,000 (NewJobs built per call inside the timed loop);
         ``engine_only`` times ``backend.add`` alone on prebuilt NewJobs.
process  n queued jobs drained by lease batches (``--batch``, default 100) and
         complete_many, memory only.
disk     the same on ``memory://?data=<tmp file>`` (SQLite write-behind); the
         clock stops when the last completion is committed; flush_ms_* are the
         writer's capture+commit times during the run (the loss window is
         flush_ms=10 plus one of those).
durable  n/50 single adds with durable=True on ``memory://?data=<tmp file>``: each
         returns once its own row is committed; adds/s and latency p50/p99 (ms).
rss      peak RSS of a fresh subprocess holding n queued jobs (add_bulk).

Payload ~100 bytes of msgpack. Each figure is the best of ``--repeat`` runs
(the median is printed too); a fresh engine per run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from workloads import PAYLOAD  # noqa: E402  (bench/ is the script's own folder)

from bunq.backends import connect  # noqa: E402
from bunq.job import DEFAULT_OPTIONS, NewJob  # noqa: E402

OPTS = DEFAULT_OPTIONS
BUNQUEUE_REFERENCE = {
    "add": 83_744,
    "bulk": 204_441,
    "process": 57_040,
    "disk_process": 3_262,
    "rss_mb_100k": 395,
}  # fmt: skip  (docs reference section 5.2, same machine kind)


def timed(fn: Callable[[], int], repeat: int) -> dict[str, Any]:
    rates = []
    for _ in range(repeat):
        rates.append(fn())
    return {"best": round(max(rates)), "median": round(statistics.median(rates)),
            "runs": [round(r) for r in rates]}  # fmt: skip


def run_add(n: int) -> float:
    b = connect("memory://")
    add = b.add
    t = time.perf_counter()
    for _ in range(n):
        add([NewJob("bench", "job", PAYLOAD, OPTS)])
    dt = time.perf_counter() - t
    b.close()
    return n / dt


def run_bulk(n: int, prebuilt: bool) -> float:
    b = connect("memory://")
    batches = ([[NewJob("bench", "job", PAYLOAD, OPTS) for _ in range(1000)]
                for _ in range(n // 1000)] if prebuilt else [])  # fmt: skip
    t = time.perf_counter()
    if prebuilt:
        for batch in batches:
            b.add(batch)
    else:
        for _ in range(n // 1000):
            b.add([NewJob("bench", "job", PAYLOAD, OPTS) for _ in range(1000)])
    dt = time.perf_counter() - t
    b.close()
    return (n // 1000) * 1000 / dt


def fill(b: Any, n: int) -> None:
    for _ in range(n // 1000):
        b.add([NewJob("bench", "job", PAYLOAD, OPTS) for _ in range(1000)])


def drain(b: Any, batch: int) -> int:
    done = 0
    lease, complete_many = b.lease, b.complete_many
    while True:
        leases = lease("bench", batch, 30_000, "bench")
        if not leases:
            return done
        complete_many([(lease_, None) for lease_ in leases])
        done += len(leases)


def run_process(n: int, batch: int) -> float:
    b = connect("memory://")
    fill(b, n)
    t = time.perf_counter()
    done = drain(b, batch)
    dt = time.perf_counter() - t
    b.close()
    assert done == n // 1000 * 1000
    return done / dt


def run_disk(n: int, batch: int, extra: dict[str, Any]) -> float:
    d = tempfile.mkdtemp(prefix="bunq-bench-")
    try:
        b = connect(f"memory://?data={d}/bench.db")
        fill(b, n)
        w = b._writer
        w.sync()  # the queued jobs are on disk before the clock starts
        w.flush_times.clear()
        t = time.perf_counter()
        done = drain(b, batch)
        w.sync()  # ... and every completion is committed before it stops
        dt = time.perf_counter() - t
        times = sorted(w.flush_times)
        extra.setdefault("flush_ms_p50", []).append(round(times[len(times) // 2] * 1000, 2))
        extra.setdefault("flush_ms_p99", []).append(round(times[len(times) * 99 // 100] * 1000, 2))
        extra.setdefault("flush_ms_max", []).append(round(times[-1] * 1000, 2))
        extra.setdefault("flushes", []).append(len(times))
        b.close()
        return done / dt
    finally:
        shutil.rmtree(d, ignore_errors=True)


DURABLE = DEFAULT_OPTIONS.__class__.parse({"durable": True})


def run_durable(n: int, extra: dict[str, Any]) -> float:
    d = tempfile.mkdtemp(prefix="bunq-bench-")
    try:
        b = connect(f"memory://?data={d}/bench.db")
        took = []
        t = time.perf_counter()
        for _ in range(n):
            t0 = time.perf_counter()
            b.add([NewJob("bench", "job", PAYLOAD, DURABLE)])
            took.append(time.perf_counter() - t0)
        dt = time.perf_counter() - t
        b.close()
        took.sort()
        extra.setdefault("latency_ms_p50", []).append(round(took[len(took) // 2] * 1000, 3))
        extra.setdefault("latency_ms_p99", []).append(round(took[len(took) * 99 // 100] * 1000, 3))
        return n / dt
    finally:
        shutil.rmtree(d, ignore_errors=True)


RSS_CHILD = """
import resource, sys
sys.path.insert(0, {root!r})
from bunq.backends import connect
from bunq.job import DEFAULT_OPTIONS, NewJob
payload = {payload!r}
b = connect("memory://")
for _ in range({n} // 1000):
    b.add([NewJob("bench", "job", payload, DEFAULT_OPTIONS) for _ in range(1000)])
assert b.counts("bench")[next(iter(b.counts("bench")))] == {n} // 1000 * 1000
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def run_rss(n: int) -> dict[str, float]:
    def peak(code: str) -> float:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True)  # fmt: skip
        return int(out.stdout.strip().splitlines()[-1]) / 1024

    base = peak(f"import resource, sys; sys.path.insert(0, {ROOT!r});"
                " import bunq.backends.embedded;"
                " print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")  # fmt: skip
    full = peak(RSS_CHILD.format(root=ROOT, payload=PAYLOAD, n=n))
    return {"peak_rss_mb": round(full, 1), "baseline_rss_mb": round(base, 1),
            "per_job_bytes": round((full - base) * 1024 * 1024 / n)}  # fmt: skip


def run_bunqueue(n: int, repeat: int) -> dict[str, Any]:
    """Run bench/bunqueue_side.ts under bun (``npm i bunqueue bun`` in /tmp/bq)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bunqueue_side.ts")
    bun = shutil.which("bun") or "/tmp/bq/node_modules/.bin/bun"
    if not os.path.exists(bun) or not os.path.isdir("/tmp/bq/node_modules/bunqueue"):
        return {"skipped": "bun/bunqueue not installed (npm i bunqueue bun in /tmp/bq)"}
    out: dict[str, Any] = {}
    for case in ("add", "bulk", "process", "disk_process"):
        rates, rss = [], []
        for _ in range(repeat):
            d = tempfile.mkdtemp(prefix="bq-bench-")
            argv = [bun, script, case.replace("disk_", ""), str(n)]
            if case == "disk_process":
                argv.append(os.path.join(d, "bq.db"))
            try:
                res = subprocess.run(argv, capture_output=True, text=True, cwd="/tmp/bq",
                                     timeout=900)  # fmt: skip
            finally:
                shutil.rmtree(d, ignore_errors=True)
            if res.returncode:
                out[case] = {"error": res.stderr[-1000:]}
                break
            row = json.loads(res.stdout.strip().splitlines()[-1])
            rates.append(row["per_s"])
            rss.append(row["rss_mb"])
        else:
            out[case] = {"best": max(rates), "median": statistics.median(rates), "runs": rates,
                         "peak_rss_mb": max(rss)}  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--only", default="add,bulk,process,disk,rss")
    ap.add_argument("--with-bunqueue", action="store_true")
    args = ap.parse_args()
    only = set(args.only.split(","))
    n, rep = args.n, args.repeat
    out: dict[str, Any] = {
        "python": sys.version.split()[0], "cpus": os.cpu_count(), "n": n,
        "payload_bytes": len(__import__("msgpack").packb(PAYLOAD)), "repeat": rep,
        "lease_batch": args.batch,
    }  # fmt: skip
    if "rss" in only:  # first: a child's ru_maxrss starts at its parent's size at fork
        out["rss"] = run_rss(n)
    if "add" in only:
        out["add_per_s"] = timed(lambda: run_add(n), rep)
    if "bulk" in only:
        out["add_bulk_per_s"] = timed(lambda: run_bulk(n, False), rep)
        out["add_bulk_engine_only_per_s"] = timed(lambda: run_bulk(n, True), rep)
    if "process" in only:
        out["process_per_s"] = timed(lambda: run_process(n, args.batch), rep)
    if "disk" in only:
        extra: dict[str, Any] = {}
        out["disk_process_per_s"] = timed(lambda: run_disk(n, args.batch, extra), rep)
        out["disk_process_per_s"].update(extra)
    if "durable" in only:
        extra = {}
        out["durable_add_per_s"] = timed(lambda: run_durable(max(n // 50, 100), extra), rep)
        out["durable_add_per_s"].update(extra)
    if args.with_bunqueue:
        out["bunqueue"] = run_bunqueue(n, rep)
    out["bunqueue_reference"] = BUNQUEUE_REFERENCE
    out["self_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
