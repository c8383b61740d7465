"""Several processes on one SQLite file; a graceful SIGTERM.

Processes killed with SIGKILL (workers, producers) are in the chaos suite
(tests/chaos/test_crash_workers.py), with its counting harness.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bunq import JobState, Queue
from bunq.backends.sql.sqlite import SQLiteBackend

HERE = Path(__file__).parent
ROOT = str(HERE.parent.parent)
pytestmark = pytest.mark.slow


def spawn(*args: str, env: dict[str, str] | None = None, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "procs.py"), *args],
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT, **(env or {})},
        **kw,
    )  # type: ignore[call-overload]


def records(paths: list[Path]) -> list[tuple[str, str, int]]:
    out = []
    for p in paths:
        text = p.read_text()  # read while workers write: up to the last whole line
        for line in text[: text.rfind("\n") + 1].splitlines():
            kind, jid, attempt = line.split()
            out.append((kind, jid, int(attempt)))
    return out


def test_four_workers_and_a_producer_complete_every_job_once(tmp_path: Path) -> None:
    db = str(tmp_path / "mp.db")
    SQLiteBackend(db).close()  # create the schema once
    total = 20_000
    outs = [tmp_path / f"w{i}.log" for i in range(4)]
    env = {"EXPECT": str(total)}
    workers = [spawn("worker", db, str(o), env=env) for o in outs]
    producer = spawn("producer", db, str(total), "50")
    assert producer.wait(120) == 0
    for w in workers:
        assert w.wait(120) == 0
    backend = SQLiteBackend(db)
    counts = backend.counts("mp")
    assert counts[JobState.COMPLETED] == total
    assert sum(counts.values()) == total
    done = [jid for kind, jid, _ in records(outs) if kind == "done"]
    dupes = [jid for jid, n in collections.Counter(done).items() if n > 1]
    assert dupes == [] and len(done) == total
    assert sum(1 for o in outs if o.read_text()) >= 2  # the work was really shared
    backend.close()


def test_sigterm_finishes_the_running_job_and_hands_back_the_rest(tmp_path: Path) -> None:
    db = str(tmp_path / "term.db")
    q = Queue("mp", SQLiteBackend(db))
    q.add_bulk([("job", i) for i in range(10)])
    out = tmp_path / "term.log"
    proc = spawn("worker-run", db, str(out))
    deadline = time.monotonic() + 30
    while not (out.exists() and "start" in out.read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    recs = records([out])
    assert recs[-1][0] == "exit"
    started = [jid for kind, jid, _ in recs if kind == "start"]
    done = [jid for kind, jid, _ in recs if kind == "done"]
    assert started == done and 1 <= len(done) < 10  # the running job finished, no more began
    counts = q.counts()
    assert counts["completed"] == len(done) and counts["active"] == 0
    assert counts["waiting"] == 10 - len(done)
    assert all(j.attempts == 0 for j in q.get_jobs("waiting"))  # handed back, attempt unspent
