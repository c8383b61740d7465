"""The drivers over Redis on the real server: Worker, tick, cron, and ``bunq serve``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bunq import Queue, Worker, tick

pytestmark = pytest.mark.redis

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def real(make_backend: Callable[..., Any]) -> Any:
    """A Redis backend on the server's clock (no fake clock: Workers sleep for real)."""
    return make_backend("redis")


def wait_for(pred: Callable[[], bool], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def test_workers_process_every_job_once(real: Any) -> None:
    q = Queue("w", real)
    q.add_bulk([("n", i) for i in range(300)])
    seen: list[int] = []
    lock = threading.Lock()

    def handler(job: Any) -> int:
        with lock:
            seen.append(job.data)
        return int(job.data) * 2

    workers = [Worker("w", handler, real, batch=10).start() for _ in range(3)]
    wait_for(lambda: q.counts()["completed"] == 300)
    for w in workers:
        w.close()
    assert sorted(seen) == list(range(300))
    done = q.get_jobs("completed", limit=1)[0]
    assert done.result == done.data * 2


def test_idle_worker_wakes_fast_on_add(real: Any) -> None:
    q = Queue("w", real)
    done = threading.Event()
    w = Worker("w", lambda job: done.set(), real, idle_wait_ms=5_000).start()
    time.sleep(0.3)  # let it go idle
    t0 = time.monotonic()
    q.add("ping")
    assert done.wait(3)
    w.close()
    assert time.monotonic() - t0 < 2.0


def test_worker_retries_then_dead_letters(real: Any) -> None:
    q = Queue("w", real)
    job = q.add("bad", attempts=2, backoff=10)
    w = Worker("w", lambda job: 1 / 0, real).start()
    wait_for(lambda: q.dlq.size() == 1)
    w.close()
    [entry] = q.dlq.list()
    assert entry.job.id == job.id and [a.attempt for a in entry.history] == [1, 2]


def test_tick_over_redis(real: Any) -> None:
    q = Queue("t", real)
    q.add_bulk([("n", i) for i in range(5)])
    q.add("bad", attempts=1)
    r = tick("t", lambda job: 1 / 0 if job.name == "bad" else job.data, real, max=4,
             loop_while_more=True)  # fmt: skip
    assert (r.leased, r.succeeded, r.failed, r.moved_to_dlq, r.ticks) == (6, 5, 1, 1, 2)
    assert (r.may_have_more, r.queue_depth) == (False, 0)
    assert q.dlq.size() == 1


def test_bunq_serve_over_redis(real: Any) -> None:
    from server.raw import Raw

    url = real.config.client_url + f"?prefix={real.config.prefix}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BUNQ_LOG_LEVEL": "CRITICAL"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bunq", "serve", "--port", "0", "--http-port", "-1",
         "--backend", url],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        port = int(line.split("tcp 127.0.0.1:")[1].split(",")[0])
        c = Raw(port, timeout=10)
        try:
            r = c.call({"cmd": "PUSH", "queue": "srv", "name": "h", "data": {"x": 1}})
            assert r["ok"], r
            got = c.call({"cmd": "PULL", "queue": "srv", "owner": "h", "timeout": 1000})
            assert got["ok"] and got["job"]["data"] == {"x": 1}
            assert c.call({"cmd": "ACK", "id": got["job"]["id"], "token": got["token"],
                           "result": 7})["ok"]  # fmt: skip
        finally:
            c.close()
        job = real.get_job(got["job"]["id"])  # the server wrote to this Redis
        assert job is not None and job.result == 7 and job.state.value == "completed"
    finally:
        proc.kill()
        proc.wait()


def test_unique_prefixes_do_not_see_each_other(make_backend: Callable[..., Any]) -> None:
    a, b = make_backend("redis"), make_backend("redis")
    Queue("q", a).add("j")
    assert Queue("q", b).counts()["waiting"] == 0 and "q" not in b.queues()
