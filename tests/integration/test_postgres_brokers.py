"""Several broker processes on one PostgreSQL schema share the work exactly once.

SIGKILLed brokers and terminated connections are in the chaos suite
(tests/chaos/test_crash_workers.py, test_crash_postgres.py).

The module is also the child process: ``python test_postgres_brokers.py worker URL OUT
THREADS LEASE_MS SLEEP_S EXPECT`` runs THREADS Workers on one backend, records
``start|done <id> <attempt> <monotonic ns>`` per job run, and exits once EXPECT jobs
are completed (or after MAX_SECONDS).
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
ROOT = str(HERE.parent.parent)
pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def pg_url() -> Any:
    """Return ``url(**options)`` for one fresh schema, dropped afterwards."""
    import psycopg
    from conftest import PG_DSN, missing

    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except Exception as exc:  # any failure means no server
        missing("postgres", f"cannot reach {PG_DSN}: {exc}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_DSN else "?"
    yield lambda **o: PG_DSN + sep + "&".join(f"{k}={v}" for k, v in {"schema": schema,
                                                                     **o}.items())  # fmt: skip
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def worker(url: str, out: str, threads: int, lease_ms: int, sleep_s: float, expect: int) -> None:
    from bunq import JobState, Worker, connect

    backend = connect(url)
    log = open(out, "a", buffering=1)  # line-buffered for the killer
    lock = threading.Lock()

    def handler(job: Any) -> None:
        with lock:
            log.write(f"start {job.id} {job.attempts} {time.monotonic_ns()}\n")
        if sleep_s:
            time.sleep(sleep_s)
        with lock:
            log.write(f"done {job.id} {job.attempts} {time.monotonic_ns()}\n")

    workers = [Worker("mp", handler, backend, lease_ms=lease_ms, batch=25,
                      sweep_interval_ms=int(os.environ.get("SWEEP_MS", "5000")),
                      idle_wait_ms=200).start()
               for _ in range(threads)]  # fmt: skip
    deadline = time.monotonic() + float(os.environ.get("MAX_SECONDS", "80"))
    while time.monotonic() < deadline:
        time.sleep(0.3)
        try:
            if backend.counts("mp")[JobState.COMPLETED] >= expect:
                break
        except Exception as exc:  # keep polling through faults
            print("counts failed:", exc, file=sys.stderr)
    for w in workers:
        w.close()
    backend.close()


def spawn(url: str, out: Path, threads: int = 4, lease_ms: int = 30_000, sleep_s: float = 0.0,
          expect: int = 0, sweep_ms: int = 5000) -> subprocess.Popen[str]:  # fmt: skip
    return subprocess.Popen(
        [sys.executable, __file__, "worker", url, str(out), str(threads), str(lease_ms),
         str(sleep_s), str(expect)],
        text=True, env={**os.environ, "PYTHONPATH": ROOT, "SWEEP_MS": str(sweep_ms)},
    )  # fmt: skip


def records(paths: list[Path]) -> list[tuple[str, str, int, int]]:
    out = []
    for p in paths:
        text = p.read_text()  # read while workers write: up to the last whole line
        for line in text[: text.rfind("\n") + 1].splitlines():
            kind, jid, attempt, ns = line.split()
            out.append((kind, jid, int(attempt), int(ns)))
    return out


def produce(url: str, total: int, bulk: int = 500) -> Any:
    from bunq import Queue, connect

    backend = connect(url)
    q = Queue("mp", backend)
    for i in range(0, total, bulk):
        q.add_bulk([("job", {"n": n}) for n in range(i, min(i + bulk, total))])
    return backend


def test_two_brokers_times_four_threads_complete_every_job_exactly_once(
    pg_url: Any, tmp_path: Path
) -> None:
    from bunq import JobState

    total = 100_000  # the figure; about 20 s here
    url = pg_url()
    backend = produce(url, total)
    outs = [tmp_path / f"broker{i}.log" for i in range(2)]
    procs = [spawn(url, o, threads=4, expect=total) for o in outs]
    for p in procs:
        assert p.wait(90) == 0
    counts = backend.counts("mp")
    assert counts[JobState.COMPLETED] == total and sum(counts.values()) == total
    recs = records(outs)
    starts = collections.Counter(jid for kind, jid, _, _ in recs if kind == "start")
    done = collections.Counter((jid, att) for kind, jid, att, _ in recs if kind == "done")
    assert len(done) == total and max(done.values()) == 1  # each attempt completed once
    assert max(starts.values()) == 1  # no job ever ran twice, let alone at the same time
    assert all(o.read_text() for o in outs)  # both brokers took a share
    backend.close()


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    assert role == "worker"
    worker(args[0], args[1], int(args[2]), int(args[3]), float(args[4]), int(args[5]))
