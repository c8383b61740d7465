"""What job events cost: adds and a Worker's drain with nobody listening vs a QueueEvents
reading the queue; how soon a listener sees a completion. Prints JSON.

    python bench/events.py --backend sqlite:////tmp/bunq-events.db [-n 20000]

``quiet``: nobody reads the queue (shared stores then record nothing).
``listened``: a QueueEvents reads it (the events are recorded and read).
``latency_ms``: from a job's add to its ``completed`` event in the listener, p50/p99,
one job at a time through a Worker thread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":  # run as a script: bench/ must not shadow packages (bench/redis.py)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "bench")]
sys.path.insert(0, ROOT)

from bunq import EventKind, Queue, QueueEvents, Worker, connect  # noqa: E402

PAYLOAD = {"user": 12345, "email": "someone@example.com", "pad": "x" * 40}


def run(url: str, n: int, listened: bool) -> dict[str, Any]:
    backend = connect(url)
    name = f"ev-{uuid.uuid4().hex[:6]}"
    q = Queue(name, backend)
    events = QueueEvents(name, backend) if listened else None
    seen = [0]
    if events is not None:
        events.on("*", lambda ev: seen.__setitem__(0, seen[0] + 1)).start()
    t = time.perf_counter()
    for _ in range(n):
        q.add("job", PAYLOAD)
    adds = time.perf_counter() - t
    done = threading.Event()
    count = [0]

    def handle(job: Any) -> None:
        count[0] += 1
        if count[0] >= n:
            done.set()

    t = time.perf_counter()
    w = Worker(name, handle, backend, batch=50, idle_wait_ms=50).start()
    done.wait(600)
    w.close()
    drain = time.perf_counter() - t
    if events is not None:
        time.sleep(0.5)
        events.close()
    backend.close()
    return {"adds_per_s": round(n / adds), "drain_per_s": round(n / drain),
            "events_seen": seen[0] if listened else None}  # fmt: skip


def latency(url: str, jobs: int = 200) -> dict[str, Any]:
    backend = connect(url)
    name = f"lat-{uuid.uuid4().hex[:6]}"
    q = Queue(name, backend)
    added: dict[str, float] = {}
    took: list[float] = []
    got = threading.Event()

    def on_done(ev: Any) -> None:
        if ev.job_id in added:
            took.append((time.perf_counter() - added[ev.job_id]) * 1000)
            got.set()

    with QueueEvents(name, backend) as events:
        events.on(EventKind.COMPLETED, on_done).start()
        w = Worker(name, lambda job: None, backend, idle_wait_ms=1000).start()
        for _ in range(jobs):
            got.clear()
            job_id = uuid.uuid4().hex
            added[job_id] = time.perf_counter()
            q.add("job", PAYLOAD, job_id=job_id)
            got.wait(5)
        w.close()
    backend.close()
    took.sort()
    return {"jobs": len(took), "p50": round(statistics.median(took), 2),
            "p99": round(took[int(len(took) * 0.99) - 1], 2)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sqlite:////tmp/bunq-events.db")
    ap.add_argument("-n", type=int, default=20_000)
    a = ap.parse_args()
    out = {"backend": a.backend, "n": a.n, "quiet": run(a.backend, a.n, False),
           "listened": run(a.backend, a.n, True), "latency_ms": latency(a.backend)}  # fmt: skip
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
