"""Rules of the per-job operations shared by every backend (see :mod:`bunq.backends.jobops`).

Which states each operation accepts, and the checks of its arguments.
"""

from __future__ import annotations

from . import validate as v
from .errors import JobStateError
from .job import JobId, JobState

REMOVABLE = frozenset(
    (JobState.WAITING, JobState.DELAYED, JobState.COMPLETED, JobState.FAILED,
     JobState.WAITING_CHILDREN)
)  # fmt: skip
RETRYABLE = frozenset((JobState.FAILED, JobState.COMPLETED))
PENDING = frozenset((JobState.WAITING, JobState.DELAYED))
REPRIORITISABLE = frozenset((JobState.WAITING, JobState.DELAYED, JobState.WAITING_CHILDREN))
UPDATABLE = frozenset((JobState.WAITING, JobState.DELAYED, JobState.ACTIVE,
                       JobState.WAITING_CHILDREN))  # fmt: skip
DISCARDABLE = frozenset((JobState.WAITING, JobState.DELAYED, JobState.ACTIVE))
DISCARDED = "discarded"  # the error recorded on a discarded job
MAX_PROMOTE = 10_000  # jobs one promote_jobs call moves at most


def expect(job_id: JobId, state: JobState, allowed: frozenset[JobState], operation: str) -> None:
    """Raise JobStateError unless ``state`` is one of ``allowed``."""
    if state not in allowed:
        raise JobStateError(job_id, state.value, operation)


def check_priority(priority: object) -> int:
    return v.integer(priority, "priority", v.MIN_PRIORITY, v.MAX_PRIORITY)


def check_delay(delay: object) -> int:
    return v.duration(delay, "delay")


def check_count(count: object) -> int:
    return v.integer(count, "count", 0, MAX_PROMOTE)


def check_keep(keep: object) -> int:
    return v.integer(keep, "keep", 0, 1 << 31)


def check_key(key: object) -> str:
    return v.text(key, "key", v.MAX_KEY_BYTES)
