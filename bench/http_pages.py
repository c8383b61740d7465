"""What the HTTP API and the dashboard's pages cost as a queue grows.

    python bench/http_pages.py                       # memory and sqlite, 100k jobs
    python bench/http_pages.py --jobs 1000000 --backends memory
    python bench/http_pages.py --backends postgres   # a fresh schema on BUNQ_PG_DSN

On PostgreSQL the table is ANALYZEd after the fill: with the statistics of an
empty table the planner sorts the whole state for any page (offset or cursor),
until autovacuum has looked at the new rows.

For each backend, an in-process ``bunq serve`` (HTTP on a free loopback port)
holds ``--jobs`` waiting jobs in one queue (added in bulk through the backend).
Each request is timed ``--repeat`` times over a fresh connection (the API's one
request per connection); the median and the worst, in ms, are printed as JSON:

- ``queues``: ``GET /queues`` (the overview table: counts per queue);
- ``counts``: ``GET /queues/q/counts``;
- ``first_page`` / ``middle_page`` / ``last_page``: ``GET /queues/q/jobs/list``
  with ``limit=25`` after no cursor, after job N/2 and after job N-25 (keyset
  cursors from ``Backend.get_jobs_page``, reached page by page before timing);
- ``first_read_ms``: the very first page request, untimed above (on memory it
  builds the queue's listing, once: bunq/engine/listing.py);
- ``offset_first`` / ``offset_last``: ``Backend.get_jobs(offset, 25)`` called
  directly at offset 0 and N-25, the position read the cursor replaced;
- ``job``: ``GET /jobs/{id}``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bunq.backends import connect
from bunq.job import JobOptions, JobState, NewJob, new_job_id
from bunq.pages import MAX_PAGE
from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig


def _fill(backend: Any, n: int) -> str:
    opts = JobOptions()
    first = ""
    for start in range(0, n, 10_000):
        ids = range(start, min(n, start + 10_000))
        batch = [NewJob("q", "job", {"i": i}, opts, new_job_id()) for i in ids]
        backend.add(batch)
        first = first or batch[0].id
    return first


def _cursor_at(backend: Any, pos: int) -> str:
    """The cursor of the waiting page that starts after job ``pos`` (pages of MAX_PAGE)."""
    after, done = None, 0
    while done < pos:
        page = backend.get_jobs_page("q", JobState.WAITING, min(MAX_PAGE, pos - done), after)
        after, done = page.next, done + len(page.jobs)
    assert after is not None
    return str(after)


def _direct(fn: Any, repeat: int) -> dict[str, float]:
    took = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        took.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(took), 2), "max_ms": round(max(took), 2)}


def _url(kind: str, tmp: str) -> str:
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp}/bench.db"
    dsn = os.environ.get("BUNQ_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    return f"{dsn}?schema=bench_pages_{os.getpid()}"


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
    backend = connect(_url(kind, tmp))
    t0 = time.perf_counter()
    first = _fill(backend, n)
    fill_s = time.perf_counter() - t0
    if kind == "postgres":  # the statistics autovacuum gathers a while after a bulk load
        import psycopg

        with psycopg.connect(_url(kind, tmp).split("?")[0], autocommit=True) as con:
            con.execute(f"ANALYZE bench_pages_{os.getpid()}.jobs")
    with BackgroundServer(backend, ServerConfig(port=0, http_port=0)) as srv:
        port = srv.server.http_port or 0
        page = "/queues/q/jobs/list?state=waiting&limit=25"
        first_read = _time(port, page, 1)["max_ms"]
        paths = {
            "queues": "/queues",
            "counts": "/queues/q/counts",
            "first_page": page,
            "middle_page": f"{page}&cursor={_cursor_at(backend, n // 2)}",
            "last_page": f"{page}&cursor={_cursor_at(backend, max(n - 25, 1))}",
            "job": f"/jobs/{first}",
        }
        out: dict[str, Any] = {name: _time(port, path, repeat) for name, path in paths.items()}
    waiting = JobState.WAITING
    out["offset_first"] = _direct(lambda: backend.get_jobs("q", waiting, 0, 25), repeat)
    out["offset_last"] = _direct(lambda: backend.get_jobs("q", waiting, max(n - 25, 0), 25), repeat)
    if kind == "postgres":
        backend.obliterate("q", force=True)
    backend.close()
    return {"backend": kind, "jobs": n, "fill_s": round(fill_s, 1), "first_read_ms": first_read,
            **out}  # fmt: skip


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
