"""The Backend contract: what every storage backend implements.

Drivers (Queue, Worker, FlowProducer, tick) talk to storage only through
this Protocol; the contract suite in ``tests/contract`` runs the same tests
against every implementation. A feature a backend cannot honour is left out
of :attr:`Backend.capabilities` and raises :class:`~bunq.errors.UnsupportedError`.

Times are epoch milliseconds from the backend's clock (``clock()``); a
backend built with an injected clock uses it for every decision, which is how
tests drive delays, backoff and lease expiry without sleeping.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import UnsupportedError
from ..job import DlqEntry, Job, JobId, JobState, Lease, NewJob, Settle
from ..pages import JobPage
from ..policy import FailDecision
from ..queueconfig import DlqConfig as DlqConfig  # model value types, re-exported
from ..queueconfig import QueueLimits as QueueLimits
from ..validate import QUEUE_NAME_PATTERN, queue_name
from ..values import ALL_CAPABILITIES as ALL_CAPABILITIES  # model value types, re-exported
from ..values import Capability as Capability
from ..values import Clock as Clock
from ..values import SweepResult as SweepResult

QUEUE_NAME = re.compile(QUEUE_NAME_PATTERN)  # use .fullmatch (``$`` matches before a newline)
check_queue_name = queue_name  # the model's check (bunq.validate), re-exported


@runtime_checkable
class Backend(Protocol):
    """Storage of jobs; every method is safe to call from several threads."""

    kind: str
    capabilities: frozenset[Capability]
    clock: Clock
    max_stalls: int  # expired leases a job survives before the DLQ (reason stalled)

    # -- admission -------------------------------------------------------------
    def add(self, jobs: Sequence[NewJob]) -> list[Job]:
        """Admit jobs atomically (all or none); return them as stored.

        A live job holding a ``job_id`` is returned instead of a new one; a
        unique key held by a live job rejects (DuplicateJob), extends or
        replaces per the job's strategy. Unknown ``depends_on`` ids raise
        DependencyError and admit nothing.
        """
        ...

    # -- leases ----------------------------------------------------------------
    def lease(self, queue: str, n: int, lease_ms: int, owner: str = "") -> list[Lease]:
        """Lease up to ``n`` due jobs in one atomic step.

        Order: priority (higher first), then run time, then admission order
        (LIFO jobs first at equal priority). Each lease spends one attempt.
        Paused queues and exhausted limits yield fewer or no jobs, never an error.
        """
        ...

    def wait(self, queue: str, timeout_ms: int) -> bool:
        """Block up to ``timeout_ms`` until a job may be leasable (a hint, may be early)."""
        ...

    def complete(self, lease: Lease, result: Any = None) -> Settle:
        """Mark the leased job completed under its fence; STALE changes nothing."""
        ...

    def complete_many(self, items: Sequence[tuple[Lease, Any]]) -> list[Settle]:
        """Complete several leases in one transaction; one Settle per item."""
        ...

    def fail(self, lease: Lease, error: str | None, decision: FailDecision,
             duration_ms: int = 0) -> Settle:  # fmt: skip
        """Record a failed attempt and apply ``decision`` under the fence."""
        ...

    def extend(self, lease: Lease, lease_ms: int) -> Settle:
        """Push the lease's expiry to now + ``lease_ms`` under the fence."""
        ...

    def sweep(self) -> SweepResult:
        """Recover expired leases, expire TTLs, run DLQ maintenance. Idempotent."""
        ...

    # -- queries ---------------------------------------------------------------
    def get_job(self, job_id: JobId) -> Job | None: ...
    def get_jobs(self, queue: str, state: JobState, offset: int = 0,
                 limit: int = 100) -> list[Job]: ...  # fmt: skip
    def get_jobs_page(self, queue: str, state: JobState, limit: int = 100,
                      after: str | None = None) -> JobPage:  # fmt: skip
        """The page of ``get_jobs``' order after the opaque cursor ``after`` (:mod:`bunq.pages`).

        Part of ``Capability.LIST_JOBS``; a keyset read, never a skip over earlier jobs.
        """
        ...

    def counts(self, queue: str) -> dict[JobState, int]: ...
    def queues(self) -> list[str]: ...
    def get_children_results(self, parent_id: JobId) -> dict[JobId, Any]: ...

    # -- queue control ---------------------------------------------------------
    def pause(self, queue: str) -> None: ...
    def resume(self, queue: str) -> None: ...
    def is_paused(self, queue: str) -> bool: ...
    def drain(self, queue: str) -> int:
        """Remove waiting and delayed jobs; return how many."""
        ...

    def clean(self, queue: str, grace_ms: int, limit: int, state: JobState) -> list[JobId]:
        """Remove up to ``limit`` jobs in ``state`` finished more than ``grace_ms`` ago."""
        ...

    def obliterate(self, queue: str, force: bool = False) -> None:
        """Remove the queue and everything in it (refused while jobs are active, unless forced)."""
        ...

    def set_limits(self, queue: str, limits: QueueLimits) -> None: ...
    def get_limits(self, queue: str) -> QueueLimits: ...

    # -- per-job data ----------------------------------------------------------
    def update_progress(self, job_id: JobId, progress: int) -> None: ...
    def add_log(self, job_id: JobId, line: str) -> None: ...
    def get_logs(self, job_id: JobId) -> list[str]: ...

    # -- dead-letter queue -----------------------------------------------------
    def dlq_list(self, queue: str, limit: int = 100, offset: int = 0) -> list[DlqEntry]: ...
    def dlq_retry(self, queue: str, job_id: JobId | None = None) -> int: ...
    def dlq_purge(self, queue: str) -> int: ...
    def dlq_size(self, queue: str) -> int: ...
    def dlq_remove(self, queue: str, job_id: JobId) -> bool: ...
    def dlq_config(self, queue: str, config: DlqConfig | None = None) -> DlqConfig: ...

    # -- small shared records (cron schedules live here) ---------------------------------
    def kv_get(self, ns: str, key: str) -> bytes | None:
        """Return the value stored under (ns, key), or None."""
        ...

    def kv_put(self, ns: str, key: str, value: bytes, expected: bytes | None = None,
               create: bool = False) -> bool:  # fmt: skip
        """Compare-and-set: write ``value`` if the current value equals ``expected``.

        With ``create=True`` write only if the key is absent. Return whether
        it was written. Two racing writers with the same ``expected`` cannot both win.
        """
        ...

    def kv_delete(self, ns: str, key: str) -> bool: ...
    def kv_list(self, ns: str) -> dict[str, bytes]: ...

    def close(self) -> None: ...


def require(backend: Backend, feature: Capability) -> None:
    """Raise UnsupportedError unless ``backend`` has ``feature``."""
    if feature not in backend.capabilities:
        raise UnsupportedError(backend.kind, feature.value)
