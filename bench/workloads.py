"""W1-W4 job-queue workloads over any backend URL; prints JSON.

    python bench/workloads.py --backend sqlite:////tmp/bench.db [--only W1,W3] [-n 100000]
    python bench/workloads.py --backend sqlite:////tmp/bench.db --sync full --only W1

W1: n single adds, one producer.  W2: n adds in bulks of 1,000.
W3: drain n queued jobs with a no-op handler through bunq.Worker, one process.
W4: end-to-end latency p50/p99 while another process produces 1,000 jobs/s
    for 10 s and one Worker in this process runs them.
Payload: ~100 bytes. A fresh database (or queue) per workload.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":  # run as a script: bench/ must not shadow packages (bench/redis.py)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "bench")]
sys.path.insert(0, ROOT)

from bunq import Queue, Worker, connect  # noqa: E402

PAYLOAD = {
    "user": 12345,
    "email": "someone@example.com",
    "template": "welcome-v2",
    "pad": "x" * 40,
}  # fmt: skip  (~100 bytes as msgpack)


def fresh(url: str, tag: str) -> str:
    if url.startswith("sqlite:///"):
        base = url.split("?")[0][len("sqlite:///") :]
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{base}.{tag}{suffix}"):
                os.remove(f"{base}.{tag}{suffix}")
        return url.replace(base, f"{base}.{tag}", 1)
    return url


def w1(url: str, n: int) -> dict[str, Any]:
    q = Queue(f"w1-{uuid.uuid4().hex[:6]}", connect(fresh(url, "w1")))
    t = time.perf_counter()
    for _ in range(n):
        q.add("job", PAYLOAD)
    dt = time.perf_counter() - t
    q.backend.close()
    return {"jobs": n, "seconds": round(dt, 3), "jobs_per_s": round(n / dt)}


def w1_threads(url: str, n: int, threads: int = 8) -> dict[str, Any]:
    backend = connect(fresh(url, "w1t"))
    q = Queue(f"w1t-{uuid.uuid4().hex[:6]}", backend)
    per = n // threads

    def run() -> None:
        for _ in range(per):
            q.add("job", PAYLOAD)

    ts = [threading.Thread(target=run) for _ in range(threads)]
    t = time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    dt = time.perf_counter() - t
    backend.close()
    return {"jobs": per * threads, "threads": threads, "seconds": round(dt, 3),
            "jobs_per_s": round(per * threads / dt)}  # fmt: skip


def w2(url: str, n: int) -> dict[str, Any]:
    q = Queue(f"w2-{uuid.uuid4().hex[:6]}", connect(fresh(url, "w2")))
    batch = [("job", PAYLOAD)] * 1000
    t = time.perf_counter()
    for _ in range(n // 1000):
        q.add_bulk(batch)
    dt = time.perf_counter() - t
    q.backend.close()
    return {"jobs": n, "seconds": round(dt, 3), "jobs_per_s": round(n / dt)}


def w3(url: str, n: int) -> dict[str, Any]:
    backend = connect(fresh(url, "w3"))
    q = Queue(f"w3-{uuid.uuid4().hex[:6]}", backend)
    for _ in range(n // 1000):
        q.add_bulk([("job", PAYLOAD)] * 1000)
    done = threading.Event()
    count = 0

    def handler(job: Any) -> None:
        nonlocal count
        count += 1
        if count == n:
            done.set()

    t = time.perf_counter()
    w = Worker(q.name, handler, backend, batch=500).start()
    done.wait(600)
    while q.counts()["completed"] < n:
        time.sleep(0.001)
    dt = time.perf_counter() - t
    w.close()
    backend.close()
    return {"jobs": n, "seconds": round(dt, 3), "jobs_per_s": round(n / dt)}


def w4(url: str, rate: int = 1000, seconds: int = 10) -> dict[str, Any]:
    url = fresh(url, "w4")
    backend = connect(url)
    name = f"w4-{uuid.uuid4().hex[:6]}"
    lat: list[float] = []

    def handler(job: Any) -> None:
        lat.append((time.time() - job.data["t"]) * 1000)

    w = Worker(name, handler, backend, batch=50).start()
    time.sleep(0.3)
    prod = subprocess.run([sys.executable, __file__, "--produce", url, name, str(rate),
                           str(seconds)], check=True, cwd=ROOT)  # fmt: skip
    assert prod.returncode == 0
    time.sleep(0.5)
    w.close()
    backend.close()
    return latency(lat, rate)


def latency(lat: list[float], rate: int) -> dict[str, Any]:
    """W4's figures from its latencies (ms)."""
    lat = sorted(lat)
    return {"jobs": len(lat), "rate": rate, "p50_ms": round(statistics.median(lat), 3),
            "p99_ms": round(lat[int(len(lat) * 0.99)], 3), "max_ms": round(lat[-1], 3)}  # fmt: skip


def produce(url: str, name: str, rate: int, seconds: int) -> None:
    q = Queue(name, connect(url))
    start = time.perf_counter()
    for i in range(rate * seconds):
        target = start + i / rate
        while (delay := target - time.perf_counter()) > 0:
            time.sleep(delay)
        q.add("job", {**PAYLOAD, "t": time.time()})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sqlite:////tmp/bunq-bench.db")
    ap.add_argument("-n", type=int, default=100_000)
    ap.add_argument("--only", default="W1,W1T,W2,W3,W4")
    ap.add_argument("--sync", choices=["normal", "full"])
    ap.add_argument("--produce", nargs=4)
    args = ap.parse_args()
    if args.produce:
        produce(args.produce[0], args.produce[1], int(args.produce[2]), int(args.produce[3]))
        return
    url = args.backend
    if args.sync:
        url += ("&" if "?" in url else "?") + f"synchronous={args.sync}"
    runs = {
        "W1": lambda: w1(url, args.n),
        "W1T": lambda: w1_threads(url, args.n),
        "W2": lambda: w2(url, args.n),
        "W3": lambda: w3(url, args.n),
        "W4": lambda: w4(url),
    }
    out: dict[str, Any] = {"backend": url, "python": sys.version.split()[0]}
    for key in args.only.split(","):
        out[key] = runs[key]()
        print(key, out[key], file=sys.stderr)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
