"""CPU time per job of the paths issue 19 changed; prints JSON. Load barely moves it.

    python bench/cpu_per_job.py                   # this checkout
    python bench/cpu_per_job.py --tree /tmp/base  # another tree (``git archive <rev> |
                                                  # tar -x -C /tmp/base``, plus bunq/_core/*.so)

Each figure is ``[cpu_us_per_job, wall_jobs_per_s]``: process CPU time (every thread
of the process, so a Worker's pool and SQLite's checkpointer thread count) divided
by the jobs. sqlite_w1: single ``Queue.add`` on a fresh SQLite file; sqlite_w2:
``add_bulk`` of 1,000; mem_add / mem_bulk: the same on ``memory://``;
drain_threads / drain_asyncio: ``Worker(concurrency=10)`` draining queued jobs with a
no-op sync / async handler.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from use_tree import use_tree

PAYLOAD = {"user": 12345, "email": "someone@example.com", "template": "welcome-v2",
           "pad": "x" * 40}  # fmt: skip


def cpu(fn: Callable[[], Any], n: int) -> list[float]:
    t, w = time.process_time(), time.perf_counter()
    fn()
    return [round((time.process_time() - t) / n * 1e6, 2), round(n / (time.perf_counter() - w))]


def sqlite(n: int, bulk: bool) -> list[float]:
    from bunq import Queue, connect

    d = tempfile.mkdtemp(prefix="bunq-cpu-")
    q = Queue("w", connect(f"sqlite:///{d}/a.db"))
    batch = [("job", PAYLOAD)] * 1000
    for _ in range(200):
        q.add("job", PAYLOAD)
    if bulk:
        r = cpu(lambda: [q.add_bulk(batch) for _ in range(n // 1000)], n)
    else:
        r = cpu(lambda: [q.add("job", PAYLOAD) for _ in range(n)], n)
    q.backend.close()
    return r


def memory(n: int, bulk: bool) -> list[float]:
    from bunq import Queue, connect

    q = Queue("m", connect("memory://"))
    batch = [("job", PAYLOAD)] * 1000
    if bulk:
        return cpu(lambda: [q.add_bulk(batch) for _ in range(n // 1000)], n)
    return cpu(lambda: [q.add("job", PAYLOAD) for _ in range(n)], n)


def drain(n: int, is_async: bool) -> list[float]:
    from bunq import Queue, Worker, connect

    backend = connect("memory://")
    q = Queue("d", backend)
    for _ in range(n // 1000):
        q.add_bulk([("job", PAYLOAD)] * 1000)
    count, done = [0], threading.Event()

    def handler(job: Any) -> None:
        count[0] += 1
        if count[0] == n:
            done.set()

    async def ahandler(job: Any) -> None:
        handler(job)

    w = Worker("d", ahandler if is_async else handler, backend, concurrency=10)

    def run() -> None:
        w.start()
        done.wait(300)
        while w.processed < n:
            time.sleep(0.0005)

    r = cpu(run, n)
    w.close()
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", help="import bunq from this tree instead of the installed one")
    args = ap.parse_args()
    use_tree(args.tree)
    import bunq

    out: dict[str, Any] = {"tree": os.path.dirname(os.path.dirname(bunq.__file__))}
    out["sqlite_w1"] = sqlite(10_000, False)
    out["sqlite_w2"] = sqlite(30_000, True)
    out["mem_add"] = memory(100_000, False)
    out["mem_bulk"] = memory(100_000, True)
    out["drain_threads"] = drain(50_000, False)
    out["drain_asyncio"] = drain(50_000, True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
