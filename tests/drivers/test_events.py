"""QueueEvents and queue.wait() across processes (and through ``bunq serve``).

A Worker runs in another process (``events_proc.py``) over the same store: a SQLite
file, a PostgreSQL schema, a Redis prefix, or a ``bunq serve`` it reaches over
``bunq://``. This process listens with QueueEvents and waits with ``queue.wait``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import PG_DSN, REDIS_URL

import bunq
from bunq import EventKind, JobEvent, Queue, QueueEvents

HERE = Path(__file__).parent
SHARED = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
          pytest.param("redis", marks=pytest.mark.redis), "remote"]  # fmt: skip


def url_of(kind: str, backend: Any) -> str:
    """The URL another process opens to reach the same store."""
    if kind == "sqlite":
        return f"sqlite:///{backend.path}"
    if kind == "postgres":
        return f"{PG_DSN}{'&' if '?' in PG_DSN else '?'}schema={backend._test_schema}"
    if kind == "redis":
        return f"{REDIS_URL}{'&' if '?' in REDIS_URL else '?'}prefix={backend._test_prefix}"
    return f"bunq://127.0.0.1:{backend.server.port}"


@pytest.fixture
def shared(request: pytest.FixtureRequest, make_backend: Callable[..., Any]) -> Any:
    return make_backend(request.param)


@pytest.fixture
def worker_proc(shared: Any, request: pytest.FixtureRequest) -> Iterator[Callable[[str], None]]:
    """``start(queue)``: a Worker process on ``queue`` of the shared store."""
    procs: list[subprocess.Popen[str]] = []
    kind = request.node.callspec.params["shared"]

    def start(queue: str) -> None:
        p = subprocess.Popen(
            [sys.executable, str(HERE / "events_proc.py"), url_of(kind, shared), queue, "60"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"

    yield start
    for p in procs:
        assert p.stdin is not None
        p.stdin.close()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def until(pred: Callable[[], bool], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.02)


@pytest.mark.parametrize("shared", SHARED, indirect=True)
def test_listener_sees_another_process_run_jobs(shared: Any, worker_proc: Any) -> None:
    seen: list[JobEvent] = []
    with QueueEvents("xp", shared) as events:
        events.on("*", seen.append).start()
        q = Queue("xp", shared)
        ok = q.add("double", {"x": 21})
        bad = q.add("fail", {"fail": True}, attempts=2, backoff=0)
        worker_proc("xp")
        assert q.wait(ok.id, 20) == {"double": 42}

        def kinds(job_id: str) -> list[EventKind]:
            return [e.kind for e in seen if e.job_id == job_id]

        until(lambda: kinds(bad.id).count(EventKind.FAILED) == 2)
        until(lambda: EventKind.COMPLETED in kinds(ok.id))
    done = next(e for e in seen if e.job_id == ok.id and e.kind is EventKind.COMPLETED)
    assert done.data["result"] == {"double": 42}
    assert EventKind.PROGRESS in kinds(ok.id) and EventKind.ACTIVE in kinds(ok.id)
    fails = [e for e in seen if e.job_id == bad.id and e.kind is EventKind.FAILED]
    assert [f.data["will_retry"] for f in fails] == [True, False]
    assert "asked to fail" in fails[-1].data["error"]
    with pytest.raises(bunq.JobFailed) as err:
        q.wait(bad.id, 5)
    assert err.value.data["reason"] == "max_attempts_exceeded"


@pytest.mark.parametrize("shared", SHARED, indirect=True)
def test_progress_and_log_visible_while_the_job_runs(shared: Any, worker_proc: Any) -> None:
    q = Queue("live", shared)
    with QueueEvents("live", shared) as events:
        job = q.add("held", {"hold": "release", "x": 1})
        worker_proc("live")
        progress = next(e for e in events.stream(timeout=20) if e.kind is EventKind.PROGRESS)
    assert progress.job_id == job.id and progress.data["progress"] == 50
    try:
        running = q.get_job(job.id)
        assert running is not None and running.state is bunq.JobState.ACTIVE
        assert running.progress == 50
        until(lambda: q.get_logs(job.id) == [f"working on {job.id}"])  # written after progress
        assert q.get_state(job.id) is bunq.JobState.ACTIVE
    finally:
        shared.kv_put("release", job.id, b"1")
    assert q.wait(job.id, 20) == {"double": 2}


def test_stream_and_listeners_in_process() -> None:
    backend = bunq.connect("memory://")
    try:
        q = Queue("s", backend)
        got: list[str] = []
        with QueueEvents("s", backend) as events:
            fn = got.append
            events.on("added", lambda e: fn(e.job_id))
            events.off("added")
            events.on(EventKind.WAITING, lambda e: fn(e.job_id)).start()
            a = q.add("a")
            until(lambda: got == [a.id])
        with QueueEvents("s", backend) as events:
            q.pause()
            q.resume()
            b = q.add("b", delay=5000)
            kinds = [(e.kind, e.job_id) for e in events.stream(timeout=0.3)]
        assert kinds == [(EventKind.PAUSED, ""), (EventKind.RESUMED, ""),
                         (EventKind.ADDED, b.id), (EventKind.DELAYED, b.id)]  # fmt: skip
    finally:
        backend.close()


def test_async_stream() -> None:
    import asyncio

    backend = bunq.connect("memory://")

    async def main() -> list[EventKind]:
        with QueueEvents("a", backend) as events:
            Queue("a", backend).add("x")
            return [e.kind async for e in events.astream(timeout=0.3)]

    try:
        assert asyncio.run(main()) == [EventKind.ADDED, EventKind.WAITING]
    finally:
        backend.close()


def test_unknown_event_name_is_a_config_error() -> None:
    backend = bunq.connect("memory://")
    try:
        with QueueEvents("a", backend) as events, pytest.raises(bunq.ConfigError):
            events.on("finished", print)
    finally:
        backend.close()


def test_memory_ring_counts_what_a_slow_reader_missed() -> None:
    from bunq.backends.eventlog import MemoryEventLog

    log = MemoryEventLog(ring=3)
    reader = log.event_reader("q")
    log.publish_events([JobEvent(EventKind.WAITING, "q", str(i), i) for i in range(5)])
    assert [e.job_id for e in reader.read(0)] == ["2", "3", "4"]
    assert reader.missed == 2
    assert reader.read(0) == []


@pytest.mark.postgres
def test_postgres_reader_survives_a_dropped_listen_connection(make_backend: Any) -> None:
    import psycopg

    backend = make_backend("postgres")
    q = Queue("drop", backend)
    with QueueEvents("drop", backend) as events:
        first = q.add("a")
        assert [e.job_id for e in events.stream(timeout=1.0)] == [first.id, first.id]
        listener = backend._events.listener
        with psycopg.connect(PG_DSN, autocommit=True) as conn:  # kill its LISTEN session
            killed = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE query LIKE %s", (f"LISTEN {listener.channel}%",)).fetchall()  # fmt: skip
        assert killed
        second = q.add("b")  # published while the listener reconnects
        ids = [e.job_id for e in events.stream(timeout=3.0)]
    assert ids == [second.id, second.id]


def test_sqs_has_no_events(make_backend: Any) -> None:
    pytest.importorskip("moto")
    backend = make_backend("sqs")
    with pytest.raises(bunq.UnsupportedError):
        QueueEvents("q", backend)
    with pytest.raises(bunq.UnsupportedError):
        Queue("q", backend).wait("some-id", 1)
