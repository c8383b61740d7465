"""What SQS cannot do: each raises UnsupportedError naming the backend and the feature.

The feature named is the :class:`~bunq.backends.base.Capability` value the
operation needs, so callers (and the contract suite) can match it against
``backend.capabilities``. Queries whose true answer SQS does know are
answered: a queue is never paused and has no limits.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ...errors import UnsupportedError
from ...job import Job, JobId, JobState
from ...pages import JobPage
from ..base import QueueLimits, check_queue_name


def refusal(feature: str, why: str) -> UnsupportedError:
    """Return the UnsupportedError for ``feature`` (a Capability value) and why."""
    return UnsupportedError("sqs", feature, f"backend 'sqs' does not support {feature}: {why}")


class Refusals:
    """The Backend operations SQS has no equivalent for."""

    kind: str

    def _refuse(self, feature: str, why: str) -> NoReturn:
        raise refusal(feature, why)

    def get_job(self, job_id: JobId) -> Job | None:
        self._refuse("get_job", "SQS cannot look a message up by id")

    def get_jobs(self, queue: str, state: JobState, offset: int = 0,
                 limit: int = 100) -> list[Job]:  # fmt: skip
        self._refuse("list_jobs", "SQS cannot list messages by state; counts() is approximate")

    def get_jobs_page(self, queue: str, state: JobState, limit: int = 100,
                      after: str | None = None) -> JobPage:  # fmt: skip
        self._refuse("list_jobs", "SQS cannot list messages by state; counts() is approximate")

    def get_children_results(self, parent_id: JobId) -> dict[JobId, Any]:
        self._refuse("flows", "SQS has no dependencies between messages")

    def pause(self, queue: str) -> None:
        self._refuse("pause", "an SQS queue cannot be paused (stop the consumers instead)")

    def resume(self, queue: str) -> None:
        self._refuse("pause", "an SQS queue cannot be paused (stop the consumers instead)")

    def is_paused(self, queue: str) -> bool:
        """Always False: an SQS queue is never paused."""
        check_queue_name(queue)
        return False

    def clean(self, queue: str, grace_ms: int, limit: int, state: JobState) -> list[JobId]:
        self._refuse("clean", "SQS keeps no completed jobs and cannot select messages by age")

    def set_limits(self, queue: str, limits: QueueLimits) -> None:
        feature = "concurrency_limit" if limits.concurrency or limits.group_concurrency \
            else "rate_limit"  # fmt: skip
        self._refuse(
            feature,
            "SQS has no per-queue lease limits (use Lambda's reserved "
            "concurrency or the event source's MaximumConcurrency)",
        )

    def get_limits(self, queue: str) -> QueueLimits:
        """No limits: SQS has none."""
        check_queue_name(queue)
        return QueueLimits()

    def update_progress(self, job_id: JobId, progress: int) -> None:
        self._refuse("progress", "SQS messages are immutable")

    def add_log(self, job_id: JobId, line: str) -> None:
        self._refuse("logs", "SQS messages are immutable")

    def get_logs(self, job_id: JobId) -> list[str]:
        self._refuse("logs", "SQS messages are immutable")

    def kv_get(self, ns: str, key: str) -> bytes | None:
        self._refuse(
            "cron",
            "SQS has no compare-and-set store for schedules (use EventBridge "
            "Scheduler, or a SQLite/PostgreSQL backend for bunq cron)",
        )

    def kv_put(self, ns: str, key: str, value: bytes, expected: bytes | None = None,
               create: bool = False) -> bool:  # fmt: skip
        self._refuse("cron", "SQS has no compare-and-set store for schedules")

    def kv_delete(self, ns: str, key: str) -> bool:
        self._refuse("cron", "SQS has no compare-and-set store for schedules")

    def kv_list(self, ns: str) -> dict[str, bytes]:
        self._refuse("cron", "SQS has no compare-and-set store for schedules")
