"""Redis: worker processes killed with SIGKILL mid-batch, a killed producer, and the
Redis server itself killed and restarted under a running Worker.

Workers and producers are the shared child roles of procs.py, on a backend URL.
The restart test runs its own redis-server (no persistence) on a free port: the
shared one at 6379 is never touched.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bunq import JobState, Queue, Worker, connect
from bunq.errors import BackendUnavailable

HERE = Path(__file__).parent
ROOT = str(HERE.parent.parent)
pytestmark = [pytest.mark.slow, pytest.mark.redis]


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A URL under a fresh prefix on the shared server; its keys are deleted afterwards."""
    from conftest import REDIS_URL, _redis, drop_redis_keys

    probe = _redis(None)  # skips (or fails under BUNQ_REQUIRE_BACKENDS) without a server
    sep = "&" if "?" in REDIS_URL else "?"
    yield f"{REDIS_URL}{sep}prefix={probe.config.prefix}"
    probe.close()
    drop_redis_keys(probe)


def spawn(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "procs.py"), *args], text=True,
        env={**os.environ, "PYTHONPATH": ROOT, **(env or {})}, **kw,
    )  # fmt: skip


def records(path: Path) -> list[tuple[str, str, int]]:
    if not path.exists():
        return []
    text = path.read_text()  # read while workers write: up to the last whole line
    lines = text[: text.rfind("\n") + 1].splitlines()
    return [(k, j, int(a)) for k, j, a in (line.split() for line in lines)]


def test_workers_killed_mid_batch_lose_nothing_and_settle_nothing_twice(
        redis_url: str, tmp_path: Path) -> None:  # fmt: skip
    total = 2_000
    be = connect(redis_url)
    q = Queue("mp", be)
    for i in range(0, total, 500):
        q.add_bulk([("job", n) for n in range(i, i + 500)])
    env = {"EXPECT": str(total), "MAX_SECONDS": "150"}
    logs = [tmp_path / f"w{i}.log" for i in range(3)]
    procs = [spawn("worker", redis_url, str(p), "1500", "0.003", env=env) for p in logs]
    victims = procs[:2]
    deadline = time.monotonic() + 60
    while sum(len(records(p)) for p in logs[:2]) < 400:
        assert time.monotonic() < deadline, "workers made no progress"
        time.sleep(0.01)
    for v in victims:  # each dies holding a batch of leases, some jobs half run
        v.send_signal(signal.SIGKILL)
        v.wait()
    later = tmp_path / "w3.log"
    procs.append(spawn("worker", redis_url, str(later), "1500", "0.003", env=env))
    for p in procs[2:]:
        assert p.wait(150) == 0
    counts = q.counts()
    assert counts[JobState.COMPLETED] == total and sum(counts.values()) == total
    survivors = records(logs[2]) + records(later)
    killed = records(logs[0]) + records(logs[1])
    # a survivor settles what it ran exactly once; killed workers' half-run jobs ran again
    done = collections.Counter(jid for kind, jid, _ in survivors if kind == "done")
    assert [j for j, n in done.items() if n > 1] == []
    interrupted = ({j for k, j, _ in killed if k == "start"}
                   - {j for k, j, _ in killed if k == "done"})  # fmt: skip
    assert interrupted, "the kills should interrupt running jobs"
    for jid in interrupted:
        job = q.get_job(jid)
        assert job is not None and job.state is JobState.COMPLETED and job.attempts >= 2
    last = {}
    for _kind, jid, attempt in killed + survivors:
        last[jid] = max(last.get(jid, 0), attempt)
    assert len(last) == total
    wrong = [j.id for j in q.get_jobs("completed", limit=total) if j.attempts != last[j.id]]
    assert wrong == []  # the settled attempt is the last that ran: stale settles changed nothing
    be.close()


def test_killed_producer_loses_no_acknowledged_add(redis_url: str) -> None:
    proc = spawn("add-print", redis_url, stdout=subprocess.PIPE)
    acked = []
    assert proc.stdout is not None
    while len(acked) < 1_000:
        line = proc.stdout.readline().strip()
        assert line, "the producer died early"
        acked.append(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    be = connect(redis_url)
    assert [jid for jid in acked if be.get_job(jid) is None] == []
    be.close()


def test_redis_restarted_mid_run(tmp_path: Path) -> None:
    sys.path.insert(0, str(HERE.parent))
    from backends.redis.conftest import OwnRedis

    server = OwnRedis()
    server.start()
    be = connect(server.url + f"?prefix=r{uuid.uuid4().hex[:8]}")
    q = Queue("r", be)
    done: list[Any] = []
    lock = threading.Lock()

    def handler(job: Any) -> None:
        with lock:
            done.append(job.data)

    w = Worker("r", handler, be, batch=5, idle_wait_ms=200, sweep_interval_ms=200).start()
    try:
        q.add_bulk([("j", i) for i in range(20)])
        _until(lambda: len(done) == 20)
        server.kill()
        with pytest.raises(BackendUnavailable, match="cannot reach the server"):
            q.add("while-down")
        with pytest.raises(BackendUnavailable):
            q.counts()
        time.sleep(1.0)  # the Worker meets the outage too, and keeps going
        server.start()  # same port, empty: this server keeps nothing (no persistence)
        _until(lambda: _ok(lambda: q.add("after", 99)))  # the library reloads: "Function not found"
        q.add_bulk([("j", i) for i in range(100, 110)])
        _until(lambda: len([d for d in done if d == 99 or d >= 100]) >= 11)
        assert w.running  # the outage did not kill the Worker
        assert q.counts()["completed"] >= 11
    finally:
        w.close()
        be.close()
        server.kill()


def _ok(fn: Any) -> bool:
    try:
        fn()
        return True
    except BackendUnavailable:
        return False


def _until(pred: Any, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.05)
