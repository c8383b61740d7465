"""CPU per job of ``Queue.add_bulk`` on SQLite and PostgreSQL, with and without the
cyclic GC paused during the call (``bunq.batching.paused_gc``); prints JSON.

    python bench/bulk_gc.py [--rounds 3]

One process; the two variants alternate (``paused_gc`` swapped for a null context in
the SQL backends), each adding 20 bulks of 1,000 jobs whose returned ``Job`` lists are
kept alive, as a caller holding them would. Medians of the rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "bench")]
sys.path.insert(0, ROOT)

import bunq.backends.sql.postgres as pg  # noqa: E402
import bunq.backends.sql.store as store  # noqa: E402
from bunq import Queue, connect  # noqa: E402

sys.path.append(os.path.join(ROOT, "bench"))  # last: bench/redis.py must not shadow redis
from workloads import PAYLOAD  # noqa: E402

PG = os.environ.get("BUNQ_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
PAUSED = store.paused_gc


def run(kind: str, paused: bool) -> float:
    store.paused_gc = pg.paused_gc = PAUSED if paused else contextlib.nullcontext  # type: ignore[assignment]
    schema = f"bulkgc_{uuid.uuid4().hex[:6]}"
    url = f"sqlite:///{tempfile.mkdtemp()}/b.db" if kind == "sqlite" else f"{PG}?schema={schema}"
    backend: Any = connect(url)
    q, batch, keep = Queue("w2", backend), [("job", PAYLOAD)] * 1000, []
    q.add_bulk(batch)
    c = time.process_time()
    for _ in range(20):
        keep.append(q.add_bulk(batch))
    per_job = (time.process_time() - c) / 20_000 * 1e6
    if kind == "postgres":
        with backend._read() as tx:
            tx.sql(f'DROP SCHEMA "{schema}" CASCADE', {})
    backend.close()
    return per_job


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    out: dict[str, Any] = {}
    for kind in ("sqlite", "postgres"):
        runs: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for paused in (False, True):
                runs[paused].append(run(kind, paused))
        on, off = statistics.median(runs[False]), statistics.median(runs[True])
        out[kind] = {
            "cpu_us_per_job_gc_on": round(on, 1),
            "cpu_us_per_job_gc_paused": round(off, 1),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
