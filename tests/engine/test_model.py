"""The engine against a small model: random add/lease/complete/fail/sweep/pause."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bunq.engine import Engine
from bunq.job import JobState, Lease, Settle
from bunq.policy import DEFAULT_MAX_STALLS, decide_failure, decide_stall
from bunq.queue import new_job

QUEUES = ("a", "b", "c")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class EngineModel(RuleBasedStateMachine):
    """Model: per job (queue, priority, seq, state, run_at, attempts, max_attempts, stalls)."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.engine = Engine(clock=self.clock, shards=2)
        self.jobs: dict[str, dict[str, Any]] = {}
        self.leases: list[Lease] = []
        self.paused: set[str] = set()
        self.seq = 0

    def teardown(self) -> None:
        self.engine.close()

    @rule(queue=st.sampled_from(QUEUES), prio=st.integers(0, 2), delay=st.sampled_from([0, 0, 50]),
          attempts=st.integers(1, 3))  # fmt: skip
    def add(self, queue: str, prio: int, delay: int, attempts: int) -> None:
        opts = {"priority": prio, "delay": delay, "attempts": attempts, "backoff": 10}
        job = self.engine.add([new_job(queue, "j", self.seq, opts)])[0]
        self.jobs[job.id] = {"queue": queue, "prio": prio, "seq": self.seq, "state": "waiting",
                             "run_at": self.clock.now + delay, "attempts": 0,
                             "max": attempts, "stalls": 0}  # fmt: skip
        self.seq += 1

    def ready(self, queue: str) -> list[str]:
        now = self.clock.now
        ids = [
            i
            for i, j in self.jobs.items()
            if j["queue"] == queue and j["state"] == "waiting" and j["run_at"] <= now
        ]
        return sorted(ids, key=lambda i: (-self.jobs[i]["prio"], self.jobs[i]["run_at"],
                                          self.jobs[i]["seq"]))  # fmt: skip

    @rule(queue=st.sampled_from(QUEUES), n=st.integers(1, 4))
    def lease(self, queue: str, n: int) -> None:
        want = [] if queue in self.paused else self.ready(queue)[:n]
        got = self.engine.lease(queue, n, 100, "m")
        assert [x.id for x in got] == want
        for x in got:
            j = self.jobs[x.id]
            j["state"], j["attempts"], j["lease_until"] = (
                "active",
                j["attempts"] + 1,
                self.clock.now + 100,
            )
            assert x.attempt == j["attempts"]
        self.leases.extend(got)

    @precondition(lambda self: self.leases)
    @rule(i=st.integers(0, 100), ok=st.booleans())
    def settle(self, i: int, ok: bool) -> None:
        lease = self.leases.pop(i % len(self.leases))
        j = self.jobs[lease.id]
        live = j["state"] == "active" and j["attempts"] == lease.attempt
        if ok:
            res = self.engine.complete(lease, lease.job.data)
            if live:
                j["state"] = "completed"
        else:
            decision = decide_failure(lease.job, self.clock.now)
            res = self.engine.fail(lease, "x", decision)
            if live:
                j["state"] = "failed" if decision.is_dead else "waiting"
                j["run_at"] = max(decision.run_at, self.clock.now)
        assert res is (Settle.OK if live else Settle.STALE)

    @rule(ms=st.sampled_from([1, 10, 60, 120]))
    def tick(self, ms: int) -> None:
        self.clock.now += ms

    @rule()
    def sweep(self) -> None:
        now = self.clock.now
        requeued = dead = 0
        for j in self.jobs.values():
            if j["state"] == "active" and j["lease_until"] < now:
                j["stalls"] += 1
                if decide_stall(j["attempts"], j["max"], j["stalls"], DEFAULT_MAX_STALLS):
                    j["state"], dead = "failed", dead + 1
                else:
                    j["state"], j["run_at"], requeued = "waiting", now, requeued + 1
        res = self.engine.sweep()
        assert (res.requeued, res.dead) == (requeued, dead)

    @rule(queue=st.sampled_from(QUEUES))
    def pause_or_resume(self, queue: str) -> None:
        if queue in self.paused:
            self.engine.resume(queue)
            self.paused.discard(queue)
        else:
            self.engine.pause(queue)
            self.paused.add(queue)

    @invariant()
    def counts_match(self) -> None:
        now = self.clock.now
        for queue in QUEUES:
            mine = [j for j in self.jobs.values() if j["queue"] == queue]
            want = dict.fromkeys(JobState, 0)
            for j in mine:
                if j["state"] == "waiting":
                    if j["run_at"] > now:
                        want[JobState.DELAYED] += 1
                    else:
                        want[JobState.PAUSED if queue in self.paused else JobState.WAITING] += 1
                else:
                    want[JobState(j["state"])] += 1
            assert self.engine.counts(queue) == want
        self.engine._check()


TestEngineModel = EngineModel.TestCase
TestEngineModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
