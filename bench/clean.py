"""Cost of clean(grace) and of a page of finished jobs, by how many are kept; prints JSON.

    python bench/clean.py [--sizes 10000,1000000] [--calls 20] [--limit 100]

For each size n, a memory engine (one shard, fake clock) holds n completed
jobs of one queue, finished one millisecond apart. Then, timed per call:

clean_us     ``clean(queue, grace, limit, "completed")`` removing the ``limit``
             oldest (``--calls`` calls, each finds the next oldest ones);
newest_us    ``get_jobs(queue, "completed", 0, limit)``: the newest page;
deep_us      ``get_jobs(queue, "completed", n // 2, limit)``: a page mid-way.

Each figure is the median over ``--calls`` calls. The engine finds finished
jobs through a time index (a skip list), so these grow with log n, not n.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bunq.engine import Engine  # noqa: E402
from bunq.job import DEFAULT_OPTIONS, JobState, NewJob  # noqa: E402

QUEUE = "clean-bench"
BATCH = 1_000


class Clock:
    """A settable millisecond clock."""

    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def filled(n: int) -> tuple[Engine, Clock]:
    """Return an engine holding ``n`` completed jobs finished 1 ms apart."""
    clock = Clock()
    engine = Engine(clock=clock, shards=1, completed_max_count=n + 1, done_window=1)
    left = n
    while left:
        k = min(BATCH, left)
        engine.add([NewJob(QUEUE, "job", None, DEFAULT_OPTIONS) for _ in range(k)])
        leases = engine.lease(QUEUE, k, 60_000)
        for lease in leases:
            engine.complete_many([(lease, None)])
            clock.now += 1
        left -= k
    assert engine.counts(QUEUE)[JobState.COMPLETED] == n
    return engine, clock


def timed(calls: int, fn: Any) -> float:
    """Return the median time of ``calls`` calls of ``fn`` in microseconds."""
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1e6, 1)


def figures(n: int, calls: int, limit: int) -> dict[str, float]:
    """Return the three figures for an engine holding ``n`` completed jobs."""
    engine, _ = filled(n)
    grace = 0  # every job is old enough: each call removes the oldest `limit`
    try:
        return {
            "newest_us": timed(calls, lambda: engine.get_jobs(QUEUE, "completed", 0, limit)),
            "deep_us": timed(calls, lambda: engine.get_jobs(QUEUE, "completed", n // 2, limit)),
            "clean_us": timed(calls, lambda: engine.clean(QUEUE, grace, limit, "completed")),
        }
    finally:
        engine.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--limit", type=int, default=100)
    args = ap.parse_args()
    out: dict[str, Any] = {"python": sys.version.split()[0], "limit": args.limit, "sizes": {}}
    for n in (int(s) for s in args.sizes.split(",")):
        out["sizes"][str(n)] = figures(n, args.calls, args.limit)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
