"""Per-job operations: does their cost stay flat as the queue grows?

    python bench/jobops.py                              # memory and sqlite, 10k and 100k jobs
    python bench/jobops.py --backends memory,postgres,redis --sizes 10000,100000 --ops 500

For each backend and queue size, fills one queue with ``size`` waiting jobs
(a tenth of them delayed), then times ``--ops`` calls of each operation on
random jobs (promote, change_priority, change_delay, update, remove) and prints
one JSON object: per backend, size and operation, the median and p99 in
microseconds. A flat column across sizes is the point: every operation
touches one job by its id (docs/jobs.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = str(ROOT / "bench")  # bench/redis.py would shadow the redis package
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != BENCH]
sys.path.insert(0, str(ROOT))

from bunq.backends import connect  # noqa: E402
from bunq.queue import Queue  # noqa: E402


def url_of(kind: str, tmp: str, size: int) -> str:
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp}/bench-{size}.db"
    if kind == "postgres":
        return os.environ.get("BUNQ_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test") + (
            f"?schema=bench_jobops_{size}"
        )
    if kind == "redis":
        return f"redis://127.0.0.1:6379/0?prefix=bench-jobops-{size}-{os.getpid()}"
    raise SystemExit(f"unknown backend {kind}")


def fill(q: Queue, size: int) -> tuple[list[str], list[str]]:
    ready: list[str] = []
    delayed: list[str] = []
    for start in range(0, size, 1000):
        n = min(1000, size - start)
        items = [{"name": "j", "data": {"i": start + i},
                  "opts": {"delay": 600_000} if (start + i) % 10 == 0 else {}}
                 for i in range(n)]  # fmt: skip
        for job in q.add_bulk(items):
            (delayed if job.opts.delay else ready).append(job.id)
    return ready, delayed


def timed(fn: Any, ids: list[str]) -> dict[str, float]:
    took = []
    for jid in ids:
        t0 = time.perf_counter()
        fn(jid)
        took.append((time.perf_counter() - t0) * 1e6)
    took.sort()
    return {"median_us": round(statistics.median(took), 1),
            "p99_us": round(took[int(len(took) * 0.99) - 1], 1)}  # fmt: skip


def run(kind: str, size: int, ops: int, tmp: str) -> dict[str, Any]:
    backend = connect(url_of(kind, tmp, size))
    q = Queue("bench-jobops", backend)
    try:
        q.obliterate(force=True)
        ready, delayed = fill(q, size)
        rnd = random.Random(size)
        sample = rnd.sample(ready, min(ops * 4, len(ready)))
        parts = [sample[i::4] for i in range(4)]
        out = {
            "promote": timed(q.promote, rnd.sample(delayed, min(ops, len(delayed)))),
            "change_priority": timed(lambda j: q.change_priority(j, 7), parts[0]),
            "change_delay": timed(lambda j: q.change_delay(j, 1_000), parts[1]),
            "update": timed(lambda j: q.update(j, {"x": 1}), parts[2]),
            "remove": timed(q.remove, parts[3]),
        }
        q.obliterate(force=True)
        return out
    finally:
        backend.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="memory,sqlite")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--ops", type=int, default=500)
    args = ap.parse_args()
    result: dict[str, Any] = {"ops": args.ops, "results": {}}
    with tempfile.TemporaryDirectory() as tmp:
        sizes = [int(s) for s in args.sizes.split(",")]
        for kind in args.backends.split(","):
            result["results"][kind] = {str(n): run(kind, n, args.ops, tmp) for n in sizes}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
