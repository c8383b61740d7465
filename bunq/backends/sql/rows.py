"""Row <-> model conversion for the SQL backends, done once at the boundary.

Job rows are read by column name: :data:`COL` maps each name of
:data:`~.queries.JOB_COLUMNS` to its index (``row[COL.state]``), built from that
one list, so a column added or moved there cannot leave a reader behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from ...codec import options_from_blob, unpack
from ...job import FailureReason, Job, JobState
from .queries import JOB_COLUMNS

_STATES = {s.value: s for s in JobState}


@dataclass(frozen=True, slots=True)
class JobColumns:
    """The index of each column in a job row (built from ``JOB_COLUMNS``: every name once)."""

    id: int
    queue: int
    name: int
    data: int
    state: int
    priority: int
    seq: int
    run_at: int
    created_at: int
    started_at: int
    finished_at: int
    attempts: int
    max_attempts: int
    stalls: int
    lease_token: int
    lease_until: int
    opts: int
    progress: int
    result: int
    error: int
    reason: int
    dlq_at: int
    dlq_retries: int
    ord_at: int


COL = JobColumns(**{name: i for i, name in enumerate(JOB_COLUMNS)})

# What a Job is built from, picked by name in one C call (cheaper than 17 lookups).
_JOB_FIELDS = ("id", "queue", "name", "data", "state", "run_at", "created_at", "started_at",
               "finished_at", "attempts", "stalls", "opts", "progress", "result", "error",
               "reason")  # fmt: skip
_pick = itemgetter(*(getattr(COL, f) for f in _JOB_FIELDS))


def job_from_row(row: tuple[Any, ...], now: int) -> Job:
    """Build a Job from a row of ``JOB_COLUMNS``."""
    (jid, queue, name, data, state, run_at, created_at, started_at, finished_at, attempts,
     stalls, opts, progress, result, error, reason) = _pick(row)  # fmt: skip
    st = _STATES[state]
    if st is JobState.WAITING and run_at > now:
        st = JobState.DELAYED
    return Job(
        id=jid, queue=queue, name=name, data=unpack(data), state=st,
        opts=options_from_blob(bytes(opts)), attempts=attempts, created_at=created_at,
        run_at=run_at, started_at=started_at, finished_at=finished_at, progress=progress,
        result=unpack(result), error=error,
        reason=None if reason is None else FailureReason(reason), stalls=stalls,
    )  # fmt: skip
