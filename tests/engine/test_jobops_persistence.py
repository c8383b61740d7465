"""Per-job operations on the memory engine survive a restart through write-behind."""

from __future__ import annotations

from typing import Any

from engine.test_persistence import add, reopen, state

from bunq.backends.embedded import EmbeddedBackend
from bunq.job import JobState
from bunq.policy import decide_failure


def test_restart_after_each_per_job_operation(tmp_path: Any, clock: Any) -> None:
    b = EmbeddedBackend(str(tmp_path / "e.db"), clock=clock, shards=2)
    a = add(b, data={"v": 1}, priority=1)
    d = add(b, delay=60_000, unique_key="k")
    gone = add(b)
    done = add(b, queue="r")
    b.complete(b.lease("r", 1, 1_000)[0], "ok")
    dead = add(b, queue="f", attempts=1)
    lease = b.lease("f", 1, 1_000)[0]
    b.fail(lease, "boom", decide_failure(lease.job, clock()), 1)
    b.sync()  # every row saved: later changes are written as updates
    steps = [
        lambda: b.update_data(a.id, {"v": 2}),
        lambda: b.change_priority(a.id, 9),
        lambda: b.change_delay(a.id, 5_000),
        lambda: b.promote_job(a.id),
        lambda: b.promote_jobs("q", 10),
        lambda: b.remove_job(gone.id),
        lambda: b.retry_job(done.id),
        lambda: b.retry_job(dead.id),
        lambda: b.discard_job(a.id),
        lambda: b.remove_dedup_key("q", "k"),
    ]
    for step in steps:
        step()
        before = state(b)
        b = reopen(b, clock)
        assert state(b) == before
    assert b.get_job(gone.id) is None
    assert b.get_job(a.id).state is JobState.FAILED and b.get_job(a.id).data == {"v": 2}
    assert b.get_job(a.id).priority == 9
    assert b.get_job(d.id).state is JobState.WAITING
    assert b.get_job(done.id).state is JobState.WAITING
    assert b.get_job(dead.id).state is JobState.WAITING
    assert b.dedup_job_id("q", "k") is None
    b.close()
