"""Cron: pure next-run computations with a fake ``now``, and exactly-once firing."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bunq import cron
from bunq.cron import Schedule, Scheduler, job_id_for, latest_run_at, next_run_after, plan
from bunq.errors import ConfigError, ValidationError
from bunq.job import JobState
from bunq.queue import Queue


def ms(*when: int, tz: str = "UTC") -> int:
    return int(datetime(*when, tzinfo=ZoneInfo(tz)).timestamp() * 1000)  # type: ignore[misc]


def sched(**kw: Any) -> Schedule:
    kw.setdefault("cron", None if "every_ms" in kw else "*/5 * * * *")
    return Schedule("s", "q", "job", **kw)


# ---------------------------------------------------------------- pure functions


def test_five_field_cron() -> None:
    s = sched(cron="*/5 * * * *")
    assert next_run_after(s, ms(2024, 1, 1, 12, 3)) == ms(2024, 1, 1, 12, 5)
    assert next_run_after(s, ms(2024, 1, 1, 12, 5)) == ms(2024, 1, 1, 12, 10)  # strictly after
    assert latest_run_at(s, ms(2024, 1, 1, 12, 5)) == ms(2024, 1, 1, 12, 5)
    assert latest_run_at(s, ms(2024, 1, 1, 12, 9, 59)) == ms(2024, 1, 1, 12, 5)


def test_six_field_cron_has_seconds_first() -> None:
    s = sched(cron="*/10 * * * * *")
    assert next_run_after(s, ms(2024, 1, 1, 12, 0, 5)) == ms(2024, 1, 1, 12, 0, 10)
    s = sched(cron="30 0 * * * *")  # second 30 of minute 0 of every hour
    assert next_run_after(s, ms(2024, 1, 1, 12, 0, 31)) == ms(2024, 1, 1, 13, 0, 30)


def test_interval_is_epoch_aligned_or_anchored_at_start() -> None:
    s = sched(every_ms=60_000)
    assert next_run_after(s, ms(2024, 1, 1, 12, 0, 30)) == ms(2024, 1, 1, 12, 1)
    assert latest_run_at(s, ms(2024, 1, 1, 12, 0, 30)) == ms(2024, 1, 1, 12, 0)
    start = ms(2024, 1, 1, 12, 0, 7)
    s = sched(every_ms=60_000, start_at=start)
    assert next_run_after(s, ms(2024, 1, 1)) == start
    assert next_run_after(s, start) == start + 60_000
    assert latest_run_at(s, start - 1) is None


def test_timezone_and_daylight_saving() -> None:
    s = sched(cron="0 3 * * *", tz="Europe/Paris")
    assert next_run_after(s, ms(2024, 3, 29, 12)) == ms(2024, 3, 30, 2)  # CET, UTC+1
    assert next_run_after(s, ms(2024, 3, 30, 12)) == ms(2024, 3, 31, 1)  # CEST, UTC+2
    assert next_run_after(s, ms(2024, 3, 30, 12)) == ms(2024, 3, 31, 3, tz="Europe/Paris")


def test_start_and_end_bound_the_runs() -> None:
    s = sched(cron="0 * * * *", start_at=ms(2024, 1, 1, 10, 30), end_at=ms(2024, 1, 1, 12))
    assert next_run_after(s, ms(2024, 1, 1)) == ms(2024, 1, 1, 11)
    assert next_run_after(s, ms(2024, 1, 1, 11)) == ms(2024, 1, 1, 12)  # end is inclusive
    assert next_run_after(s, ms(2024, 1, 1, 12)) is None
    assert latest_run_at(s, ms(2024, 1, 1, 15)) == ms(2024, 1, 1, 12)


def test_plan_fires_the_due_run_and_computes_the_next() -> None:
    s = sched(every_ms=60_000, next_run=ms(2024, 1, 1, 12, 1))
    assert plan(s, ms(2024, 1, 1, 12, 0, 59)).fire_at is None  # not due yet
    p = plan(s, ms(2024, 1, 1, 12, 1, 3))
    assert (p.fire_at, p.next_run, p.skipped) == (ms(2024, 1, 1, 12, 1), ms(2024, 1, 1, 12, 2), 0)


def test_plan_skips_missed_runs_after_downtime_by_default() -> None:
    s = sched(every_ms=60_000, next_run=ms(2024, 1, 1, 12, 1), misfire_grace_ms=30_000)
    p = plan(s, ms(2024, 1, 1, 14, 0, 10))  # two hours down: only the latest is on time
    assert (p.fire_at, p.next_run) == (ms(2024, 1, 1, 14, 0), ms(2024, 1, 1, 14, 1))
    p = plan(s, ms(2024, 1, 1, 14, 0, 45))  # even the latest is past the grace: skip
    assert (p.fire_at, p.next_run, p.skipped) == (None, ms(2024, 1, 1, 14, 1), 1)


def test_plan_catch_up_fires_once_for_the_missed_runs() -> None:
    s = sched(cron="0 3 * * *", next_run=ms(2024, 1, 1, 3), catch_up=True)
    p = plan(s, ms(2024, 1, 3, 9))  # two days down: one late run, not three
    assert (p.fire_at, p.next_run) == (ms(2024, 1, 3, 3), ms(2024, 1, 4, 3))
    assert plan(sched(cron="0 3 * * *", next_run=ms(2024, 1, 1, 3)), ms(2024, 1, 3, 9)).fire_at \
        is None  # fmt: skip


def test_plan_limit_and_overlap() -> None:
    s = sched(every_ms=1000, next_run=5000, limit=3, runs=2)
    p = plan(s, 5000)
    assert (p.fire_at, p.next_run) == (5000, None)  # the last allowed run
    assert plan(sched(every_ms=1000, next_run=5000, limit=3, runs=3), 5000).fire_at is None
    o = sched(every_ms=1000, next_run=5000)
    assert plan(o, 5000, previous_live=True).fire_at is None
    assert plan(o, 5000, previous_live=True).next_run == 6000
    assert plan(sched(every_ms=1000, next_run=5000, prevent_overlap=False), 5000,
                previous_live=True).fire_at == 5000  # fmt: skip


@pytest.mark.parametrize("kw, error", [
    ({"cron": "61 * * * *"}, ConfigError), ({"cron": "* * *"}, ConfigError),
    ({"cron": None}, ConfigError), ({"cron": "* * * * *", "every_ms": 5}, ConfigError),
    ({"every_ms": 0, "cron": None}, ConfigError), ({"tz": "Mars/Base"}, ConfigError),
    ({"limit": 0}, ConfigError), ({"start_at": 10, "end_at": 5}, ConfigError),
    ({"opts": {"job_id": "x"}}, ValidationError), ({"opts": {"prio": 1}}, ValidationError),
    ({"data": {1, 2}}, ValidationError),
])  # fmt: skip
def test_invalid_schedules_are_refused(backend: Any, kw: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        Scheduler(backend).add(Schedule("s", "q", "job", **{"cron": "* * * * *", **kw}))


# ----------------------------------------------------------------------- scheduler


def test_add_upsert_list_remove(backend: Any, clock: Any) -> None:
    sch = Scheduler(backend)
    a = sch.add(Schedule("a", "q1", "job", every_ms=60_000))
    assert a.next_run is not None and a.next_run > clock()
    with pytest.raises(ConfigError):
        sch.add(Schedule("a", "q1", "job", every_ms=60_000))
    clock.advance(3_600_000)
    assert sch.upsert(Schedule("a", "q1", "job", every_ms=60_000)).next_run == a.next_run
    changed = sch.upsert(Schedule("a", "q1", "job", every_ms=60_000, data={"v": 2}))
    assert changed.next_run == a.next_run and changed.data == {"v": 2}  # timing unchanged
    retimed = sch.upsert(Schedule("a", "q1", "job", every_ms=120_000))
    assert retimed.next_run is not None and retimed.next_run > clock()
    sch.upsert(Schedule("b", "q2", "job", cron="0 * * * *"))
    assert [s.name for s in sch.list()] == ["a", "b"]
    assert [s.name for s in sch.list("q2")] == ["b"]
    assert sch.remove("a") and not sch.remove("a")
    assert sch.get("a") is None


def test_fire_due_adds_each_run_once_with_its_dedup_id(backend: Any, clock: Any) -> None:
    sch, q = Scheduler(backend), Queue("q", backend)
    s = sch.add(Schedule("m", "q", "job", every_ms=60_000, data={"k": 1}, prevent_overlap=False,
                         opts={"priority": 5}))  # fmt: skip
    assert sch.fire_due(clock()) == []
    clock.now = s.next_run
    [job] = sch.fire_due()
    assert (job.id, job.data, job.opts.priority) == (job_id_for("m", s.next_run), {"k": 1}, 5)
    assert sch.fire_due() == []  # same instant: nothing new
    clock.advance(60_000)
    assert len(sch.fire_due()) == 1 and q.counts()["waiting"] == 2
    state = sch.get("m")
    assert state is not None and (state.runs, state.pending) == (2, None)


def test_prevent_overlap_waits_for_the_previous_job(backend: Any, clock: Any) -> None:
    sch, q = Scheduler(backend), Queue("q", backend)
    s = sch.add(Schedule("o", "q", "job", every_ms=1000))
    clock.now = s.next_run
    assert len(sch.fire_due()) == 1
    clock.advance(1000)
    assert sch.fire_due() == []  # the first run's job is still waiting
    lease = backend.lease("q", 1, 30_000, "w")[0]
    backend.complete(lease, None)
    clock.advance(1000)
    assert len(sch.fire_due()) == 1
    st = sch.get("o")
    assert st is not None and (st.runs, st.skipped) == (2, 1)
    assert q.counts()["waiting"] == 1


def test_limit_stops_the_schedule(backend: Any, clock: Any) -> None:
    sch = Scheduler(backend)
    s = sch.add(Schedule("l", "q", "job", every_ms=1000, limit=2, prevent_overlap=False))
    fired = 0
    for _ in range(5):
        clock.now = max(clock.now, (sch.get("l") or s).next_run or clock.now)
        fired += len(sch.fire_due())
        clock.advance(1000)
    assert fired == 2 and (sch.get("l") or s).next_run is None


def test_a_crash_between_advance_and_add_is_recovered(backend: Any, clock: Any) -> None:
    sch, q = Scheduler(backend), Queue("q", backend)
    s = sch.add(Schedule("c", "q", "job", every_ms=60_000))
    # what a firer that died after its compare-and-set leaves behind:
    jid = job_id_for("c", s.next_run or 0)
    crashed = Schedule("c", "q", "job", every_ms=60_000, next_run=(s.next_run or 0) + 60_000,
                       runs=1, last_run_at=s.next_run, last_job_id=jid, pending=jid,
                       pending_at=clock())  # fmt: skip
    backend.kv_put("cron", "c", cron.encode(crashed))
    assert sch.fire_due() == [] and q.counts()["waiting"] == 0  # too early to tell
    clock.advance(cron.RECOVER_AFTER_MS)
    sch.fire_due()
    job = q.get_job(jid)
    assert job is not None and job.state is JobState.WAITING
    st = sch.get("c")
    assert st is not None and st.pending is None


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
                                  pytest.param("redis", marks=pytest.mark.redis)])  # fmt: skip
def test_racing_firers_fire_each_run_exactly_once(
        kind: str, make_backend: Callable[..., Any], clock: Any) -> None:  # fmt: skip
    first = make_backend(kind, clock=clock)
    peers = [first] + [_peer(kind, first, clock) for _ in range(5)]
    try:
        fired = _race(peers, clock)
    finally:
        for be in peers[1:]:
            be.close()
    assert len(fired) == 3 and len(set(fired)) == 3  # each run once, by exactly one firer
    assert Queue("q", first).counts()["waiting"] == 3


def _race(peers: list[Any], clock: Any) -> list[str]:
    s = Scheduler(peers[0]).add(Schedule("race", "q", "job", every_ms=60_000,
                                         prevent_overlap=False))  # fmt: skip
    fired: list[str] = []
    lock = threading.Lock()
    for run in range(3):
        clock.now = (s.next_run or 0) + run * 60_000
        barrier = threading.Barrier(len(peers))

        def fire(be: Any, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            jobs = Scheduler(be).fire_due()
            with lock:
                fired.extend(j.id for j in jobs)

        threads = [threading.Thread(target=fire, args=(be,)) for be in peers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(fired) == sorted(job_id_for("race", (s.next_run or 0) + i * 60_000)
                                   for i in range(3))  # fmt: skip
    return fired


def _peer(kind: str, first: Any, clock: Any) -> Any:
    """Another connection to the same store (another process, as far as the store knows)."""
    from bunq.backends import connect

    if kind == "sqlite":
        from bunq.backends.sql.sqlite import SQLiteBackend

        return SQLiteBackend(first.path, clock=clock)
    if kind == "redis":
        return connect(f"{first.config.client_url}?prefix={first.config.prefix}", clock=clock)

    dsn = os.environ.get("BUNQ_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    sep = "&" if "?" in dsn else "?"
    return connect(f"{dsn}{sep}schema={first._test_schema}", clock=clock)


def test_a_held_unique_key_skips_the_run_without_failing(backend: Any, clock: Any) -> None:
    sch, q = Scheduler(backend), Queue("q", backend)
    s = sch.add(Schedule("u", "q", "job", every_ms=1000, prevent_overlap=False,
                         opts={"unique_key": "one-report"}))  # fmt: skip
    clock.now = s.next_run or 0
    assert len(sch.fire_due()) == 1
    clock.advance(1000)
    assert sch.fire_due() == []  # the first run's job still holds the key
    st = sch.get("u")
    assert st is not None and st.pending is None and st.next_run == clock.now + 1000
    assert q.counts()["waiting"] == 1
