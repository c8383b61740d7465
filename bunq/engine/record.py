"""The compact job record the engine stores, and the Job snapshots built from it.

A job lives in the engine as one :class:`Rec` (:class:`bunq._core.Record`: a
compiled object with no dict that the cyclic GC does not track, so jobs held
add nothing to each collection): its payload is the msgpack bytes validated at
admission, its options the caller's (shared, frozen)
:class:`~bunq.job.JobOptions`. Public
:class:`~bunq.job.Job` objects are built only when a caller asks for one
(lease, get, list): no dataclass is created or copied on internal transitions.

``state`` holds :class:`~bunq.job.JobState` members; waiting and delayed jobs
share ``WAITING`` (as in the SQL backends) and a job is *delayed* while
``run_at > now``. ``PAUSED`` is never stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core import Record
from ..codec import unpack, unpackb
from ..job import (
    Attempt,
    FailureReason,
    Job,
    JobOptions,
    JobState,
    Lease,
)
from .builders import admitted_job, job_with, lease_with

WAITING = JobState.WAITING
DELAYED = JobState.DELAYED
ACTIVE = JobState.ACTIVE
COMPLETED = JobState.COMPLETED
FAILED = JobState.FAILED
CHILDREN = JobState.WAITING_CHILDREN
LIVE = frozenset((WAITING, ACTIVE, CHILDREN))


if TYPE_CHECKING:
    Rec = Record[JobOptions, JobState, FailureReason, Attempt]
else:
    Rec = Record  # the class itself: no alias to go through per job


def job_of(rec: Rec, state: JobState, data: Any, result: Any = None,
           history: tuple[Attempt, ...] = ()) -> Job:  # fmt: skip
    """Build the public :class:`~bunq.job.Job` of ``rec`` as it is now.

    :param state: the public state (``DELAYED`` is derived by the caller).
    :param data: the decoded payload (the caller's own object at admission).
    """
    return job_with(rec.id, rec.queue, rec.name, data, state, rec.opts, rec.attempts,
                    rec.created_at, rec.run_at, rec.started_at, rec.finished_at, rec.progress,
                    result, rec.error, rec.reason, history, rec.stalls)  # fmt: skip


def admitted(rec: Rec, state: JobState, data: Any) -> Job:
    """The :class:`~bunq.job.Job` of a ``rec`` just admitted (:data:`.builders.admitted_job`: no
    attempt, start, finish, progress, result, error or history yet)."""
    return admitted_job(rec.id, rec.queue, rec.name, data, state, rec.opts, rec.created_at,
                        rec.run_at)  # fmt: skip


def leases_of(recs: list[Rec], token: str, expires_at: int, owner: str) -> list[Lease]:
    """Build the :class:`~bunq.job.Lease` (and active :class:`~bunq.job.Job`) of each of
    ``recs``, just leased under ``token``: as ``Lease(job_of(rec, ACTIVE, data), ...)``,
    with :func:`job_of`'s builder called in the loop (the lease is the drain's hot path),
    the payload decoded with the bare ``unpackb`` (``rec.data`` is never None)."""
    job, lease, out = job_with, lease_with, []
    for rec in recs:
        data = unpackb(rec.data, raw=False, strict_map_key=False)
        out.append(lease(job(rec.id, rec.queue, rec.name, data, ACTIVE, rec.opts, rec.attempts,
                             rec.created_at, rec.run_at, rec.started_at, rec.finished_at,
                             rec.progress, None, rec.error, rec.reason, (), rec.stalls),
                         token, rec.attempts, expires_at, owner))  # fmt: skip
    return out


def snapshot(rec: Rec, now: int, result: Any = None, history: bool = False) -> Job:
    """Return the public view of ``rec`` (delayed derived from ``run_at > now``).

    :param result: the decoded result (completed jobs only).
    :param history: include the attempt history (get_job, DLQ listings).
    """
    state = rec.state
    if state is WAITING and rec.run_at > now:
        state = DELAYED
    hist = tuple(rec.history) if history and rec.history else ()
    return job_of(rec, state, unpack(rec.data), result, hist)
