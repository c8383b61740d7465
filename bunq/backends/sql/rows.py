"""Row <-> model conversion for the SQL backends, done once at the boundary."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgpack

from ...errors import PayloadTooLarge, ValidationError
from ...job import Backoff, FailureReason, Job, JobOptions, JobState, UniqueStrategy

_STATES = {s.value: s for s in JobState}


def pack(value: Any, what: str = "data", limit: int | None = None) -> bytes:
    """Encode a value as msgpack; raise ValidationError / PayloadTooLarge."""
    try:
        out: bytes = msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(f"job {what} is not serialisable: {exc}", field=what) from None
    if limit is not None and len(out) > limit:
        raise PayloadTooLarge(
            f"job {what} is {len(out)} bytes encoded; the limit is {limit}",
            size=len(out),
            limit=limit,
        )
    return out


def unpack(blob: bytes | memoryview | None) -> Any:
    if blob is None:
        return None
    return msgpack.unpackb(bytes(blob), raw=False, strict_map_key=False)


@lru_cache(maxsize=4096)
def options_from_blob(blob: bytes) -> JobOptions:
    """Decode stored options (trusted: validated at admission). Cached: jobs share them."""
    d = unpack(blob)
    d["backoff"] = Backoff(**d["backoff"])
    d["unique_strategy"] = UniqueStrategy(d["unique_strategy"])
    d["depends_on"] = tuple(d["depends_on"])
    return JobOptions(**d)


@lru_cache(maxsize=4096)
def options_blob(opts: JobOptions) -> bytes:
    return pack(opts.to_dict(), "options")


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
