"""The engine's per-group count of pending jobs (``group_max_size``) stays exact through
every transition: random operations on grouped jobs, ``Engine._check()`` after each."""

from __future__ import annotations

import random
from typing import Any

import pytest

from bunq.engine import Engine
from bunq.errors import BunqError
from bunq.policy import decide_failure
from bunq.queue import new_job


class Run:
    def __init__(self, clock: Any, seed: int) -> None:
        self.rnd, self.clock = random.Random(seed), clock
        self.engine = Engine(clock=clock)
        self.leases: list[Any] = []
        self.ids: list[str] = []

    def add(self) -> None:
        group = self.rnd.choice(["a", "b", None])
        opts: dict[str, Any] = {"delay": self.rnd.choice([0, 0, 30]), "attempts": 2}
        if group is not None:
            opts.update(group=group, group_max_size=self.rnd.choice([3, 50]))
        self.ids.append(self.engine.add([new_job("q", "j", None, opts)])[0].id)

    def lease(self) -> None:
        self.leases += self.engine.lease("q", self.rnd.randint(1, 3), 1000, "t")

    def settle(self) -> None:
        if self.leases:
            lease = self.leases.pop(self.rnd.randrange(len(self.leases)))
            if self.rnd.random() < 0.5:
                self.engine.complete(lease, None)
            else:
                self.engine.fail(lease, "x", decide_failure(lease.job, self.clock()), 1)

    def on_a_job(self) -> None:
        if self.ids:
            op = self.rnd.choice([self.engine.remove_job, self.engine.discard_job,
                                  self.engine.retry_job])  # fmt: skip
            op(self.rnd.choice(self.ids))

    def time(self) -> None:
        self.clock.advance(self.rnd.choice([5, 40, 2000]))
        self.engine.sweep()
        if self.rnd.random() < 0.1:
            self.engine.drain("q")


@pytest.mark.parametrize("seed", range(5))
def test_group_pending_counts_survive_random_operations(clock: Any, seed: int) -> None:
    run = Run(clock, seed)
    ops = [run.add, run.add, run.lease, run.settle, run.on_a_job, run.time]
    for _ in range(400):
        try:
            run.rnd.choice(ops)()
        except BunqError:
            pass  # a full group, a job in the wrong state: refused, nothing changed
        run.engine._check()
