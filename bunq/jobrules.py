"""Rules of the per-job operations shared by every backend (see :mod:`bunq.backends.jobops`).

Which states each operation accepts, and the checks of its arguments.
"""

from __future__ import annotations

import enum

from . import validate as v
from .errors import JobStateError
from .job import JobId, JobOptions, JobState

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


class FlowFailure(enum.Enum):
    """What a flow child's dead-lettering does to its parent (BullMQ's option names).

    ``WAIT`` (no option, BullMQ's default): the parent keeps waiting in
    waiting-children until the child is retried and completes, or the
    dependency is removed (``RemoveChildDependency``). ``FAIL``: the parent goes
    to the DLQ too (reason ``dependency_failed``), and so on up the tree.
    ``IGNORE``: the parent counts the child as done and records the failure
    (``GetIgnoredChildrenFailures``). ``REMOVE``: the parent counts it as done,
    recording nothing. ``CONTINUE``: the parent runs at once, whatever its other
    children are doing (the failure is in ``GetFailedChildrenValues``).
    """

    WAIT = "wait"
    FAIL = "fail_parent_on_failure"
    IGNORE = "ignore_dependency_on_failure"
    REMOVE = "remove_dependency_on_failure"
    CONTINUE = "continue_parent_on_failure"

    @classmethod
    def of(cls, opts: JobOptions) -> FlowFailure:
        if opts.parent_id is None:
            return cls.WAIT
        if opts.fail_parent_on_failure:
            return cls.FAIL
        if opts.ignore_dependency_on_failure:
            return cls.IGNORE
        if opts.remove_dependency_on_failure:
            return cls.REMOVE
        if opts.continue_parent_on_failure:
            return cls.CONTINUE
        return cls.WAIT
