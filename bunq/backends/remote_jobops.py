"""Per-job operations of :class:`~bunq.backends.remote.RemoteBackend` (see :mod:`.jobops`).

Each is one request to ``bunq serve`` with bunqueue's command names
(``Cancel``, ``Promote``, ``ChangePriority``...; bunq's ``BqRetryJob`` for a
retry of a failed or completed job); errors come back typed. The functions
take the backend as ``self`` and are bound on it as methods.
"""

from __future__ import annotations

from typing import Any

from ..errors import JobNotFound
from ..job import JobId
from ..jobrules import check_count, check_delay, check_keep, check_key, check_priority
from .base import check_queue_name as _qn


def remove_job(self: Any, job_id: JobId) -> bool:
    try:
        self._call("Cancel", id=job_id, removeOnly=True)  # an active job: job_state
    except JobNotFound:
        return False
    return True


def retry_job(self: Any, job_id: JobId) -> None:
    self._call("BqRetryJob", id=job_id)


def promote_job(self: Any, job_id: JobId) -> None:
    self._call("Promote", id=job_id)


def promote_jobs(self: Any, queue: str, count: int) -> int:
    return int(self._call("PromoteJobs", queue=_qn(queue), count=check_count(count))["count"])


def change_priority(self: Any, job_id: JobId, priority: int) -> None:
    self._call("ChangePriority", id=job_id, priority=check_priority(priority))


def change_delay(self: Any, job_id: JobId, delay: int) -> None:
    self._call("ChangeDelay", id=job_id, delay=check_delay(delay))


def update_data(self: Any, job_id: JobId, data: Any) -> None:
    self._call("Update", True, id=job_id, data=data)


def discard_job(self: Any, job_id: JobId) -> None:
    self._call("Discard", id=job_id)


def clear_logs(self: Any, job_id: JobId, keep: int = 0) -> None:
    self._call("ClearLogs", True, id=job_id, keepLogs=check_keep(keep))


def counts_per_priority(self: Any, queue: str) -> dict[int, int]:
    counts = self._read("GetCountsPerPriority", queue=_qn(queue))["counts"]
    return {int(p): int(n) for p, n in counts.items()}


def dedup_job_id(self: Any, queue: str, key: str) -> JobId | None:
    reply = self._read("GetDeduplicationJobId", queue=_qn(queue), deduplicationId=check_key(key))
    job_id = reply["data"]["jobId"]
    return None if job_id is None else str(job_id)


def remove_dedup_key(self: Any, queue: str, key: str) -> bool:
    reply = self._call("RemoveDeduplicationKey", queue=_qn(queue), deduplicationId=check_key(key))
    return bool(reply["data"]["count"])
