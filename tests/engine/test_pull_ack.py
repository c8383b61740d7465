"""Lease, wait and settle flows (bunq.engine.pull, bunq.engine.ack) on their own."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from bunq.backends.base import QueueLimits
from bunq.engine import Engine
from bunq.engine.record import job_of, leases_of
from bunq.job import FailureReason, Job, JobState, Lease, Settle
from bunq.policy import FailDecision, decide_failure


def test_fast_constructors_equal_the_dataclasses(engine: Engine, put: Any, take: Any) -> None:
    job = put(data=[1])
    lease = take()[0]
    rebuilt = Job(**{f: getattr(lease.job, f) for f in Job.__dataclass_fields__})
    assert lease.job == rebuilt
    assert lease == Lease(rebuilt, lease.token, lease.attempt, lease.expires_at, lease.owner)
    rec = engine.route("q").jobs[job.id]
    fields = {f: getattr(lease.job, f) for f in Job.__dataclass_fields__}
    fields.update(state=JobState.COMPLETED, result={"r": 1}, history=("h",))
    assert job_of(rec, JobState.COMPLETED, [1], {"r": 1}, ("h",)) == Job(**fields)
    active = Job(**{**fields, "state": JobState.ACTIVE, "result": None, "history": ()})
    assert leases_of([rec], "t", 2, "o") == [Lease(active, "t", rec.attempts, 2, "o")]


def test_order_priority_lifo_runtime(engine: Engine, put: Any, clock: Any, take: Any) -> None:
    a = put(data="a", delay=10)
    b = put(data="b")
    clock.advance(20)
    c = put(data="c", priority=1)
    d = put(data="d", lifo=True)
    assert [x.id for x in take(n=4)] == [c.id, d.id, b.id, a.id]


def test_ttl_expired_job_is_parked_then_dead_lettered(engine: Engine, put: Any, clock: Any,
                                                      take: Any) -> None:  # fmt: skip
    old = put(ttl=5)
    ok = put()
    clock.advance(5)
    assert [x.id for x in take(n=5)] == [ok.id]
    assert engine.counts("q")[JobState.WAITING] == 1  # parked: still waiting until swept
    engine._check()
    assert engine.sweep().ttl_expired == 1
    assert engine.get_job(old.id).reason is FailureReason.TTL_EXPIRED
    engine._check()


def test_fence_and_stale_answers(engine: Engine, put: Any, take: Any) -> None:
    put()
    lease = take()[0]
    assert engine.extend(replace(lease, attempt=9), 10) is Settle.STALE
    retry = FailDecision("retry", 0, FailureReason.EXPLICIT_FAIL)
    assert engine.fail(replace(lease, token="x"), "e", retry) is Settle.STALE
    assert engine.complete_many([(lease, 1), (lease, 2)]) == [Settle.OK, Settle.STALE]
    assert engine.get_job(lease.id).result == 1


def test_fail_retry_delay_and_dlq(engine: Engine, put: Any, clock: Any, take: Any) -> None:
    job = put(attempts=2, backoff=100)
    lease = take()[0]
    engine.fail(lease, "x" * 10_000, decide_failure(lease.job, clock()), 7)
    got = engine.get_job(job.id)
    assert got.state is JobState.DELAYED and len(got.error) == engine.config.error_max
    assert got.history[0].duration_ms == 7
    clock.advance(100)
    lease = take()[0]
    engine.fail(lease, "d", FailDecision("delay", clock() + 50, FailureReason.EXPLICIT_FAIL))
    assert engine.get_job(job.id).attempts == 1
    clock.advance(50)
    lease = take()[0]
    assert lease.attempt == 2
    engine.fail(lease, "dead", decide_failure(lease.job, clock()))
    got = engine.get_job(job.id)
    assert got.state is JobState.FAILED and got.reason is FailureReason.MAX_ATTEMPTS_EXCEEDED
    engine._check()


def test_results_are_kept_in_a_bounded_lru(clock: Any) -> None:
    from bunq.queue import new_job

    e = Engine(clock=clock, shards=1, results_max=2)
    ids = [j.id for j in e.add([new_job("q", "j", i, {}) for i in range(3)])]
    e.complete_many([(lease, lease.job.data) for lease in e.lease("q", 3, 1000)])
    assert [e.get_job(i).result for i in ids] == [None, 1, 2]
    assert e.counts("q")[JobState.COMPLETED] == 3


def test_wait_wakes_on_add_without_polling(engine: Engine, put: Any) -> None:
    woke: list[bool] = []
    t = threading.Thread(target=lambda: woke.append(engine.wait("q", 5_000)))
    t.start()
    time.sleep(0.05)
    assert t.is_alive()
    put()
    t.join(2)
    assert woke == [True]


def test_wait_times_out_and_returns_at_once_when_work_exists(engine: Engine, put: Any) -> None:
    t0 = time.monotonic()
    assert engine.wait("q", 50) is False
    assert time.monotonic() - t0 >= 0.04
    put()
    assert engine.wait("q", 5_000) is True


def test_wait_blocks_while_concurrency_is_full(engine: Engine, put: Any, take: Any) -> None:
    engine.set_limits("q", QueueLimits(concurrency=1))
    put()
    put()
    lease = take()[0]
    assert take() == []
    t0 = time.monotonic()
    assert engine.wait("q", 60) is False  # no busy loop: it really waited
    assert time.monotonic() - t0 >= 0.05
    woke: list[bool] = []
    t = threading.Thread(target=lambda: woke.append(engine.wait("q", 5_000)))
    t.start()
    time.sleep(0.05)
    engine.complete(lease)
    t.join(2)
    assert woke == [True] and len(take()) == 1


def test_paused_queue_wait_wakes_on_resume(engine: Engine, put: Any) -> None:
    put()
    engine.pause("q")
    woke: list[bool] = []
    t = threading.Thread(target=lambda: woke.append(engine.wait("q", 5_000)))
    t.start()
    time.sleep(0.05)
    assert t.is_alive()
    engine.resume("q")
    t.join(2)
    assert woke == [True]


def test_many_threads_add_lease_complete(engine: Engine) -> None:
    from bunq.queue import new_job

    done: list[str] = []
    lock = threading.Lock()

    def producer(k: int) -> None:
        for i in range(200):
            engine.add([new_job(f"q{(i + k) % 3}", "j", i, {})])

    def consumer(queue: str) -> None:
        idle = 0
        while idle < 20:
            leases = engine.lease(queue, 5, 30_000)
            if not leases:
                idle += 1
                engine.wait(queue, 5)
                continue
            idle = 0
            engine.complete_many([(x, None) for x in leases])
            with lock:
                done.extend(x.id for x in leases)

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(3)]
    threads += [threading.Thread(target=consumer, args=(f"q{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(done) == 600 and len(set(done)) == 600
    engine._check()
