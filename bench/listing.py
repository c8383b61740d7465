"""What a memory-engine listing costs the hot path of the queue that has one.

    python bench/listing.py [-n 200000] [--repeat 5]

For each run a fresh engine gets ``n`` jobs added in calls of 1,000 and then
leased (batches of 100) and completed (``complete_many``), timed separately;
``listed`` first reads one waiting page of the empty queue's first job (which
builds the queue's ready listing, bunq/engine/listing.py) so every add and
lease also keeps the listing in step; ``unlisted`` never reads a page. Runs
alternate between the two; the best and the median jobs/s are printed as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bunq.backends import connect
from bunq.job import JobOptions, JobState, NewJob, new_job_id


def one(n: int, listed: bool) -> dict[str, float]:
    backend = connect("memory://")
    opts = JobOptions()
    backend.add([NewJob("q", "j", 0, opts, new_job_id())])
    if listed:
        backend.get_jobs_page("q", JobState.WAITING, 1)  # builds the listing
    batches = [[NewJob("q", "j", i, opts, new_job_id()) for i in range(s, s + 1000)]
               for s in range(0, n, 1000)]  # fmt: skip
    t0 = time.perf_counter()
    for batch in batches:
        backend.add(batch)
    add_s = time.perf_counter() - t0
    t2 = time.perf_counter()
    while True:
        leases = backend.lease("q", 100, 60_000, "w")
        if not leases:
            break
        backend.complete_many([(lease, None) for lease in leases])
    process_s = time.perf_counter() - t2
    backend.close()
    return {"add": n / add_s, "process": (n + 1) / process_s}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"unlisted": [], "listed": []}
    for _ in range(args.repeat):
        for kind in runs:
            runs[kind].append(one(args.n, kind == "listed"))
    out: dict[str, Any] = {"n": args.n, "repeat": args.repeat}
    for kind, got in runs.items():
        out[kind] = {
            f"{m}_per_s": {"best": round(max(r[m] for r in got)),
                           "median": round(statistics.median(r[m] for r in got))}
            for m in ("add", "process")
        }  # fmt: skip
    print(json.dumps(out))


if __name__ == "__main__":
    main()
