"""A job that runs longer than its lease keeps it inside a tick (the keepalive thread)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bunq import JobState, Queue, tick

BACKENDS = ["sqlite", "memory", pytest.param("postgres", marks=pytest.mark.postgres),
            pytest.param("redis", marks=pytest.mark.redis)]  # fmt: skip


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_job_three_leases_long_keeps_its_lease(kind: str, concurrency: int,
                                                 make_backend: Any) -> None:  # fmt: skip
    backend = make_backend(kind)  # the real clock: the lease runs out in real time
    q = Queue("k", backend)
    job = q.add("long")
    stolen: list[Any] = []

    def handler(j: Any) -> str:
        end = time.monotonic() + 0.9  # three times its 300 ms lease
        while time.monotonic() < end:
            backend.sweep()  # any other process sweeping: nothing has expired
            stolen.extend(backend.lease("k", 1, 300, "other"))
            time.sleep(0.05)
        return "done"

    r = tick("k", handler, backend, lease_ms=300, concurrency=concurrency)
    assert (r.succeeded, r.stale, r.failed) == (1, 0, 0)
    assert stolen == []
    done = q.get_job(job.id)
    assert done is not None and done.state is JobState.COMPLETED and done.attempts == 1
