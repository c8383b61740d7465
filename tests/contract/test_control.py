"""Pause, drain, clean, obliterate, progress, logs, limits and records."""

from __future__ import annotations

from typing import Any

import pytest
from contract.capability import requires
from contract.helpers import add, lease1

from bunq import ConfigError, JobNotFound, JobState, Queue, Settle, ValidationError
from bunq.backends.base import Capability as C
from bunq.backends.base import QueueLimits


@requires(C.PAUSE)
def test_pause_stops_leases_and_counts_as_paused(backend: Any) -> None:
    q = Queue("q", backend)
    job = q.add("j")
    q.pause()
    assert q.is_paused() and backend.lease("q", 5, 30_000) == []
    assert q.counts()["paused"] == 1 and q.counts()["waiting"] == 0
    assert q.get_state(job.id) is JobState.PAUSED
    q.resume()
    assert not q.is_paused() and lease1(backend).id == job.id


def test_drain_removes_waiting_and_spares_active(backend: Any) -> None:
    for _ in range(3):
        add(backend)
    active = lease1(backend)
    assert backend.drain("q") == 2
    counts = backend.counts("q")
    assert counts[JobState.ACTIVE] == 1 and counts[JobState.WAITING] == 0
    assert backend.complete(active) is Settle.OK


@requires(C.CLOCK)
def test_drain_removes_waiting_and_delayed_only(backend: Any) -> None:
    add(backend)
    add(backend, delay=10_000)
    add(backend)
    active = lease1(backend)
    assert backend.drain("q") == 2
    counts = backend.counts("q")
    assert counts[JobState.ACTIVE] == 1 and counts[JobState.WAITING] == 0
    assert counts[JobState.DELAYED] == 0
    assert backend.get_job(active.id) is not None


@requires(C.CLEAN)
def test_clean_respects_grace_and_limit(backend: Any, clock: Any) -> None:
    for _ in range(3):
        add(backend)
    for lease in backend.lease("q", 3, 30_000):
        backend.complete(lease)
    assert backend.clean("q", 1_000, 10, JobState.COMPLETED) == []
    clock.advance(1_000)
    assert len(backend.clean("q", 1_000, 2, JobState.COMPLETED)) == 2
    assert backend.counts("q")[JobState.COMPLETED] == 1
    with pytest.raises(ConfigError):
        backend.clean("q", 0, 10, JobState.ACTIVE)


def test_obliterate_refuses_active_jobs_unless_forced(backend: Any) -> None:
    add(backend)
    add(backend)
    lease1(backend)
    with pytest.raises(ConfigError):
        backend.obliterate("q")
    backend.obliterate("q", force=True)
    assert sum(backend.counts("q").values()) == 0


@requires(C.PROGRESS, C.LOGS)
def test_progress_and_logs(backend: Any) -> None:
    job = add(backend)
    backend.update_progress(job.id, 40)
    assert backend.get_job(job.id).progress == 40
    backend.add_log(job.id, "step 1")
    backend.add_log(job.id, "step 2")
    assert backend.get_logs(job.id) == ["step 1", "step 2"]
    with pytest.raises(ValidationError):
        backend.update_progress(job.id, 101)
    with pytest.raises(JobNotFound):
        backend.update_progress("missing", 1)


@requires(C.CONCURRENCY_LIMIT)
def test_concurrency_limit_returns_fewer_jobs(backend: Any) -> None:
    for _ in range(5):
        add(backend)
    backend.set_limits("q", QueueLimits(concurrency=2))
    assert len(backend.lease("q", 5, 30_000)) == 2
    assert backend.lease("q", 5, 30_000) == []
    assert backend.get_limits("q").concurrency == 2


@requires(C.RATE_LIMIT, C.CLOCK)
def test_rate_limit_returns_fewer_jobs_then_refills(backend: Any, clock: Any) -> None:
    for _ in range(10):
        add(backend)
    backend.set_limits("q", QueueLimits(rate_max=3, rate_duration=1_000))
    assert len(backend.lease("q", 10, 30_000)) == 3
    assert backend.lease("q", 10, 30_000) == []
    clock.advance(1_000)
    assert len(backend.lease("q", 10, 30_000)) == 3


@requires(C.CRON)
def test_kv_compare_and_set(backend: Any) -> None:
    assert backend.kv_put("ns", "k", b"1", create=True) is True
    assert backend.kv_put("ns", "k", b"x", create=True) is False
    assert backend.kv_put("ns", "k", b"2", expected=b"1") is True
    assert backend.kv_put("ns", "k", b"3", expected=b"1") is False
    assert backend.kv_get("ns", "k") == b"2"
    assert backend.kv_list("ns") == {"k": b"2"}
    assert backend.kv_delete("ns", "k") is True
    assert backend.kv_get("ns", "k") is None
