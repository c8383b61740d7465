"""Client CPU time per operation on a SQL backend; prints JSON.

    python bench/sql_cpu.py [--backend sqlite:////tmp/cpu.db | postgresql://...] [-n 1000]

``time.process_time`` counts only this process's CPU (``--thread``: only the
calling thread's, without the connection pool's thread), so the figure holds on a
loaded machine where the wall-clock workloads (bench/workloads.py) swing by half:
it is the one to compare before and after a change to the Python layers.
add1: one job per ``add``. lease_complete: per job, leases of 100 then one
``complete_many``. The minimum of ``--trials`` trials is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bunq.backends import connect  # noqa: E402
from bunq.queue import new_job  # noqa: E402

PAYLOAD = {"x": 1, "pad": "x" * 60}
CPU = [time.process_time]


def trial(b: Any, queue: str, n: int) -> tuple[float, float]:
    cpu = CPU[0]
    t = cpu()
    for _ in range(n):
        b.add([new_job(queue, "j", PAYLOAD, {})])
    add1 = (cpu() - t) / n
    b.add([new_job(queue, "j", PAYLOAD, {}) for _ in range(n)])
    t = cpu()
    done = 0
    while done < n:
        leases = b.lease(queue, 100, 30_000, "w")
        b.complete_many([(lease, None) for lease in leases])
        done += len(leases)
    return add1, (cpu() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default=None, help="default: a fresh SQLite file")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--thread", action="store_true", help="CPU of the calling thread only")
    args = ap.parse_args()
    if args.thread:
        CPU[0] = time.thread_time
    url = args.backend or f"sqlite:///{tempfile.mkdtemp()}/cpu.db"
    backend = connect(url)
    runs = [trial(backend, f"cpu-{uuid.uuid4().hex[:6]}", args.n) for _ in range(args.trials)]
    backend.close()
    print(
        json.dumps(
            {
                "backend": url,
                "n": args.n,
                "trials": args.trials,
                "clock": CPU[0].__name__,
                "add1_cpu_us": round(min(r[0] for r in runs) * 1e6, 1),
                "lease_complete_cpu_us_per_job": round(min(r[1] for r in runs) * 1e6, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
