"""Row <-> model conversion for the SQL backends, done once at the boundary."""

from __future__ import annotations

from typing import Any

from ...codec import options_from_blob, unpack
from ...job import FailureReason, Job, JobState

_STATES = {s.value: s for s in JobState}


def job_from_row(row: tuple[Any, ...], now: int) -> Job:
    """Build a Job from a row in ``queries.JOB_COLS`` order."""
    (jid, queue, name, data, state, _prio, _seq, run_at, created_at, started_at, finished_at,
     attempts, _max_attempts, stalls, _token, _until, opts, progress, result, error, reason,
     _dlq_at, _dlq_retries, _ord_at) = row  # fmt: skip
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
