"""The server's guarantees for wire clients' leases: timeouts, lost workers, stalled events."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from server.raw import Raw
from server.remote_factory import behind

from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig


@pytest.fixture
def sweeping(tmp_path: Any) -> Iterator[BackgroundServer]:
    """A server that sweeps every 0.05 s."""
    cfg = ServerConfig(port=0, http_port=None, sweep_interval=0.05, cron_interval=3600.0)
    with BackgroundServer(behind(tmp_path, "sqlite"), cfg, close_backend=True) as srv:
        yield srv


def eventually(check: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def state(c: Raw, job_id: str) -> str:
    return str(c.call({"cmd": "GetState", "id": job_id})["state"])


def push(c: Raw, **fields: Any) -> str:
    reply = c.call({"cmd": "PUSH", "queue": "q", "name": "j", "data": 1, **fields})
    assert reply["ok"], reply
    return str(reply["id"])


def test_a_pulled_job_past_its_timeout_fails_with_reason_timeout(server: Any) -> None:
    c = Raw(server.port)
    job_id = push(c, timeout=150, maxAttempts=1)
    pulled = c.call({"cmd": "PULL", "queue": "q", "lockTtl": 60_000})
    token = pulled["token"]
    assert c.call({"cmd": "JobHeartbeat", "id": job_id, "token": token})["ok"]  # beats don't help
    eventually(lambda: state(c, job_id) == "failed")
    job = c.call({"cmd": "BqGetJob", "id": job_id})
    assert "timed out after 150 ms" in str(job) and "timeout" in str(job)
    late = c.call({"cmd": "ACK", "id": job_id, "token": token, "result": 1})
    assert late.get("data", {}).get("applied") is False or late["ok"] is False
    c.close()


def test_a_job_settled_in_time_is_not_timed_out(server: Any) -> None:
    c = Raw(server.port)
    job_id = push(c, timeout=150, maxAttempts=1)
    token = c.call({"cmd": "PULL", "queue": "q"})["token"]
    assert c.call({"cmd": "ACK", "id": job_id, "token": token, "result": 7})["ok"]
    time.sleep(0.3)
    assert state(c, job_id) == "completed"
    c.close()


def test_a_dropped_connection_gives_its_unrenewed_jobs_back_at_once(server: Any) -> None:
    c = Raw(server.port)
    quiet, beating = push(c), push(c)
    worker = Raw(server.port)
    pulled = worker.call({"cmd": "PULLB", "queue": "q", "count": 2, "lockTtl": 60_000})
    tokens = dict(zip([j["id"] for j in pulled["jobs"]], pulled["tokens"], strict=True))
    beat = worker.call({"cmd": "JobHeartbeat", "id": beating, "token": tokens[beating]})
    assert beat["ok"]
    worker.close()
    eventually(lambda: state(c, quiet) == "waiting")
    again = c.call({"cmd": "PULL", "queue": "q"})["job"]
    assert again["id"] == quiet and again["attempts"] == 0  # the attempt was given back
    assert state(c, beating) == "active"  # a renewed lock is left to its lease
    c.close()


def test_stalled_events_for_leases_the_sweep_takes_back(sweeping: Any) -> None:
    sub = Raw(sweeping.port)
    assert sub.call({"cmd": "SubscribeEvents", "queue": "q"})["ok"]
    c = Raw(sweeping.port)
    job_id = push(c)
    c.call({"cmd": "PULL", "queue": "q", "lockTtl": 50})
    seen: list[dict[str, Any]] = []

    def stalled() -> bool:
        try:
            frame = sub.recv(0.1)
        except TimeoutError:
            return False
        seen.append(frame)
        return frame.get("event", {}).get("eventType") == "stalled"

    eventually(stalled)
    assert seen[-1]["event"]["jobId"] == job_id and seen[-1]["event"]["prev"] == "active"
    assert state(c, job_id) == "waiting"
    c.close()
    sub.close()


def test_a_settled_or_dropped_lease_cancels_its_timeout_timer() -> None:
    import asyncio

    from bunq.job import Job, JobOptions, JobState, Lease
    from bunq.server.state import LeaseTable

    def lease(job_id: str) -> Lease:
        job = Job(job_id, "q", "j", None, JobState.ACTIVE, JobOptions(timeout=60_000), attempts=1)
        return Lease(job, "tok", 1, 10**13)

    async def run() -> list[bool]:
        loop = asyncio.get_running_loop()
        table = LeaseTable()
        a, b, c = lease("a"), lease("b"), lease("c")
        wires = table.add([a, b, c], 30_000, locked=True)
        timers = [loop.call_later(60, lambda: None) for _ in range(3)]
        for job_id, timer in zip("abc", timers, strict=True):
            table.set_timer(job_id, timer)
        table.forget(a)  # settled
        assert table.take_unrenewed([("b", wires[1])]) == [b]  # its connection closed
        return [t.cancelled() for t in timers]

    assert asyncio.run(run()) == [True, True, False]  # c is still held: its timer stands


def test_a_lease_that_runs_out_while_the_sweep_runs_is_announced(tmp_path: Any) -> None:
    """The sweep's stall candidates are read after it ran: a lease that ran out while
    the sweep ran was taken back by it, and is announced (read before, it never was:
    later sweeps took nothing back, so nothing was announced)."""
    now = [1_000_000_000]
    backend = behind(tmp_path, "sqlite", clock=lambda: now[0])
    real_sweep = backend.sweep

    def sweep() -> Any:
        now[0] += 10_000  # a lease pulled before this sweep runs out during it
        return real_sweep()

    backend.sweep = sweep
    cfg = ServerConfig(port=0, http_port=None, sweep_interval=0.05, cron_interval=3600.0)
    with BackgroundServer(backend, cfg, close_backend=True) as srv:
        sub = Raw(srv.port)
        assert sub.call({"cmd": "SubscribeEvents", "queue": "q"})["ok"]
        c = Raw(srv.port)
        job_id = push(c)
        assert c.call({"cmd": "PULL", "queue": "q", "lockTtl": 5_000})["job"]["id"] == job_id
        stalled: list[str] = []

        def announced() -> bool:
            try:
                frame = sub.recv(0.1)
            except TimeoutError:
                return False
            if frame.get("event", {}).get("eventType") == "stalled":
                stalled.append(frame["event"]["jobId"])
            return job_id in stalled

        eventually(announced)
        assert state(c, job_id) == "waiting"
        c.close()
        sub.close()
