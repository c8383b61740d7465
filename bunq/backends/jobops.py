"""Per-job operations: the part of the Backend contract behind ``Capability.JOB_OPS``.

A backend that declares :attr:`~bunq.backends.base.Capability.JOB_OPS`
implements every method of :class:`JobOps`; :class:`~bunq.queue.Queue` checks
the capability first, so a backend without it (SQS) refuses with
:class:`~bunq.errors.UnsupportedError`. The semantics are bunqueue's, the same
on every backend (``tests/contract/test_jobops.py``):

==========================  =========================================================
operation                   accepted states -> result
==========================  =========================================================
``remove_job``              any but active -> gone (False when there is no such job)
``retry_job``               failed (DLQ) or completed -> waiting, attempts and stalls 0
``promote_job``             delayed -> waiting, due now
``promote_jobs``            up to ``count`` delayed jobs of a queue, earliest first
``change_priority``         waiting, delayed, waiting-children
``change_delay``            waiting or delayed -> due ``delay`` ms from now
``update_data``             waiting, delayed, active, waiting-children
``discard_job``             waiting, delayed or active -> failed (DLQ) at once, reason
                            ``explicit_fail``; an active job's lease goes stale
``clear_logs``              any state: keep the newest ``keep`` lines
``counts_per_priority``     waiting and delayed jobs of a queue per priority (a report:
                            it reads the queue's pending jobs, as bunqueue does)
``dedup_job_id``            the job holding a unique (deduplication) key, or None
``remove_dedup_key``        release a unique key whoever holds it
==========================  =========================================================

A job in another state raises :class:`~bunq.errors.JobStateError` naming the
state and the operation; a missing job raises
:class:`~bunq.errors.JobNotFound` (``remove_job`` answers False instead).
Each operation touches one job (or ``count`` index entries); only
``counts_per_priority`` reads a queue's pending jobs.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..job import JobId


class JobOps(Protocol):
    """The per-job operations (see the module docstring for their semantics)."""

    def remove_job(self, job_id: JobId) -> bool: ...
    def retry_job(self, job_id: JobId) -> None: ...
    def promote_job(self, job_id: JobId) -> None: ...
    def promote_jobs(self, queue: str, count: int) -> int: ...
    def change_priority(self, job_id: JobId, priority: int) -> None: ...
    def change_delay(self, job_id: JobId, delay: int) -> None: ...
    def update_data(self, job_id: JobId, data: Any) -> None: ...
    def discard_job(self, job_id: JobId) -> None: ...
    def clear_logs(self, job_id: JobId, keep: int = 0) -> None: ...
    def counts_per_priority(self, queue: str) -> dict[int, int]: ...
    def dedup_job_id(self, queue: str, key: str) -> JobId | None: ...
    def remove_dedup_key(self, queue: str, key: str) -> bool: ...
