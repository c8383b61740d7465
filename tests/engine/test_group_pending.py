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


@pytest.mark.parametrize("seed", range(5))
def test_group_pending_counts_survive_random_operations(clock: Any, seed: int) -> None:
    rnd = random.Random(seed)
    engine = Engine(clock=clock)
    groups = ["a", "b", None]
    leases: list[Any] = []
    ids: list[str] = []
    for _ in range(400):
        op = rnd.choice(["add", "add", "lease", "settle", "remove", "discard", "sweep", "tick",
                         "retry", "drain"])  # fmt: skip
        try:
            if op == "add":
                group = rnd.choice(groups)
                opts: dict[str, Any] = {"delay": rnd.choice([0, 0, 30]), "attempts": 2}
                if group is not None:
                    opts.update(group=group, group_max_size=rnd.choice([3, 50]))
                ids.append(engine.add([new_job("q", "j", None, opts)])[0].id)
            elif op == "lease":
                leases += engine.lease("q", rnd.randint(1, 3), rnd.choice([10, 1000]), "t")
            elif op == "settle" and leases:
                lease = leases.pop(rnd.randrange(len(leases)))
                if rnd.random() < 0.5:
                    engine.complete(lease, None)
                else:
                    engine.fail(lease, "x", decide_failure(lease.job, clock()), 1)
            elif op == "remove" and ids:
                engine.remove_job(rnd.choice(ids))
            elif op == "discard" and ids:
                engine.discard_job(rnd.choice(ids))
            elif op == "retry" and ids:
                engine.retry_job(rnd.choice(ids))
            elif op == "sweep":
                engine.sweep()
            elif op == "tick":
                clock.advance(rnd.choice([5, 40]))
            elif op == "drain" and rnd.random() < 0.1:
                engine.drain("q")
        except BunqError:
            pass  # a full group, a job in the wrong state: refused, nothing changed
        engine._check()
