"""Small helpers for contract tests: add through the public validation path."""

from __future__ import annotations

from typing import Any

from bunq.job import Job, Lease
from bunq.policy import decide_failure
from bunq.queue import new_job


def add(backend: Any, queue: str = "q", name: str = "job", data: Any = None, **opts: Any) -> Job:
    jobs: list[Job] = backend.add([new_job(queue, name, data, opts)])
    return jobs[0]


def lease1(backend: Any, queue: str = "q", lease_ms: int = 30_000) -> Lease:
    leases = backend.lease(queue, 1, lease_ms, "test")
    assert len(leases) == 1, f"expected one lease, got {leases}"
    return leases[0]  # type: ignore[no-any-return]


def fail(backend: Any, lease: Lease, error: str = "boom", **kw: Any) -> Any:
    decision = decide_failure(lease.job, backend.clock(), **kw)
    return backend.fail(lease, error, decision, 5)
