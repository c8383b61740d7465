"""What the HTTP API and the dashboard's pages cost as a queue grows.

    python bench/http_pages.py                       # memory and sqlite, 100k jobs
    python bench/http_pages.py --jobs 1000000 --backends memory

For each backend, an in-process ``bunq serve`` (HTTP on a free loopback port)
holds ``--jobs`` waiting jobs in one queue (added in bulk through the backend).
Each request is timed ``--repeat`` times over a fresh connection (the API's one
request per connection); the median and the worst, in ms, are printed as JSON:

- ``queues``: ``GET /queues`` (the overview table: counts per queue);
- ``counts``: ``GET /queues/q/counts``;
- ``first_page`` / ``middle_page`` / ``last_page``: ``GET /queues/q/jobs/list``
  with ``limit=25`` at position 0, N/2 and N-25 (the cursor carries the position);
- ``job``: ``GET /jobs/{id}``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bunq.backends import connect
from bunq.job import JobOptions, NewJob, new_job_id
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig
from bunq.server.http.routes.jobs import encode_cursor


def _fill(backend: Any, n: int) -> str:
    opts = JobOptions()
    first = ""
    for start in range(0, n, 10_000):
        ids = range(start, min(n, start + 10_000))
        batch = [NewJob("q", "job", {"i": i}, opts, new_job_id()) for i in ids]
        backend.add(batch)
        first = first or batch[0].id
    return first


def _time(port: int, path: str, repeat: int) -> dict[str, float]:
    took = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        took.append((time.perf_counter() - t0) * 1000)
        assert resp.status == 200, (path, body[:200])
    return {"median_ms": round(statistics.median(took), 2), "max_ms": round(max(took), 2)}


def run(kind: str, n: int, repeat: int) -> dict[str, Any]:
    tmp = tempfile.mkdtemp()
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp}/bench.db"
    backend = connect(url)
    t0 = time.perf_counter()
    first = _fill(backend, n)
    fill_s = time.perf_counter() - t0
    with BackgroundServer(backend, ServerConfig(port=0, http_port=0)) as srv:
        port = srv.server.http_port or 0
        page = "/queues/q/jobs/list?state=waiting&limit=25"
        paths = {
            "queues": "/queues",
            "counts": "/queues/q/counts",
            "first_page": page,
            "middle_page": f"{page}&cursor={encode_cursor('waiting', n // 2)}",
            "last_page": f"{page}&cursor={encode_cursor('waiting', max(n - 25, 0))}",
            "job": f"/jobs/{first}",
        }
        out = {name: _time(port, path, repeat) for name, path in paths.items()}
    backend.close()
    return {"backend": kind, "jobs": n, "fill_s": round(fill_s, 1), **out}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--backends", default="memory,sqlite")
    args = p.parse_args()
    for kind in args.backends.split(","):
        print(json.dumps(run(kind, args.jobs, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
