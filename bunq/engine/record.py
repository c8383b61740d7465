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
    draft_class,
)
from .builders import admitted_job

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


# Job and Lease are built through writable twins of their layouts
# (:func:`bunq.job.draft_class`): the engine builds one Job (and Lease) per job
# leased or read. ``tests/engine`` checks both builders against the constructors.
_new = object.__new__
_JobDraft = draft_class(Job)
_LeaseDraft = draft_class(Lease)


def job_of(rec: Rec, state: JobState, data: Any, result: Any = None,
           history: tuple[Attempt, ...] = ()) -> Job:  # fmt: skip
    """Build the public :class:`~bunq.job.Job` of ``rec`` as it is now.

    :param state: the public state (``DELAYED`` is derived by the caller).
    :param data: the decoded payload (the caller's own object at admission).
    """
    job: Any = _new(_JobDraft)
    job.id = rec.id
    job.queue = rec.queue
    job.name = rec.name
    job.data = data
    job.state = state
    job.opts = rec.opts
    job.attempts = rec.attempts
    job.created_at = rec.created_at
    job.run_at = rec.run_at
    job.started_at = rec.started_at
    job.finished_at = rec.finished_at
    job.progress = rec.progress
    job.result = result
    job.error = rec.error
    job.reason = rec.reason
    job.history = history
    job.stalls = rec.stalls
    job.__class__ = Job
    return job  # type: ignore[no-any-return]


def admitted(rec: Rec, state: JobState, data: Any) -> Job:
    """The :class:`~bunq.job.Job` of a ``rec`` just admitted (:data:`.builders.admitted_job`: no
    attempt, start, finish, progress, result, error or history yet)."""
    return admitted_job(rec.id, rec.queue, rec.name, data, state, rec.opts, rec.created_at,
                        rec.run_at)  # fmt: skip


def leases_of(recs: list[Rec], token: str, expires_at: int, owner: str) -> list[Lease]:
    """Build the :class:`~bunq.job.Lease` (and active :class:`~bunq.job.Job`) of each of
    ``recs``, just leased under ``token``: as ``Lease(job_of(rec, ACTIVE, data), ...)``,
    with :func:`job_of` written out in the loop (the lease is the drain's hot path: no
    call per job), the payload decoded with the bare ``unpackb`` (``rec.data`` is never
    None)."""
    out: list[Lease] = []
    append = out.append
    for rec in recs:
        job: Any = _new(_JobDraft)
        job.id = rec.id
        job.queue = rec.queue
        job.name = rec.name
        job.data = unpackb(rec.data, raw=False, strict_map_key=False)
        job.state = ACTIVE
        job.opts = rec.opts
        job.attempts = rec.attempts
        job.created_at = rec.created_at
        job.run_at = rec.run_at
        job.started_at = rec.started_at
        job.finished_at = rec.finished_at
        job.progress = rec.progress
        job.result = None
        job.error = rec.error
        job.reason = rec.reason
        job.history = ()
        job.stalls = rec.stalls
        job.__class__ = Job
        lease: Any = _new(_LeaseDraft)
        lease.job = job
        lease.token = token
        lease.attempt = rec.attempts
        lease.expires_at = expires_at
        lease.owner = owner
        lease.__class__ = Lease
        append(lease)
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
