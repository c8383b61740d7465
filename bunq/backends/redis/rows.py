"""Job hashes (flat HGETALL replies) -> model objects, once at the boundary.

Hash fields: id, n name, d data, s state, p priority, seq, ra run_at, ca created,
sa started, fa finished, a attempts, ma max attempts, st stalls, t token, lu lease
until, o options, pg progress, r result, e error, rs reason, da dlq at, dr dlq
retries, g group, pid parent, pd pending deps, x expires, uk unique key, m lane member.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...codec import options_from_blob, unpack, unpackb
from ...job import Attempt, FailureReason, Job, JobState

_STATES = {s.value.encode(): s for s in JobState}
_REASONS = {r.value.encode(): r for r in FailureReason}


def fields(flat: Sequence[bytes]) -> dict[bytes, bytes]:
    it = iter(flat)
    return dict(zip(it, it, strict=False))


def _int(v: bytes | None) -> int | None:
    return None if v is None or v == b"" else int(v)


def job_from_hash(f: dict[bytes, bytes], queue: str, now: int,
                  history: tuple[Attempt, ...] = ()) -> Job:  # fmt: skip
    st = _STATES[f[b"s"]]
    run_at = int(f[b"ra"])
    if st is JobState.WAITING and run_at > now:
        st = JobState.DELAYED
    err = f.get(b"e")
    reason = f.get(b"rs")
    return Job(
        id=f[b"id"].decode(), queue=queue, name=f[b"n"].decode(), data=unpack(f[b"d"]),
        state=st, opts=options_from_blob(f[b"o"]), attempts=int(f[b"a"]),
        created_at=int(f[b"ca"]), run_at=run_at, started_at=_int(f.get(b"sa")),
        finished_at=_int(f.get(b"fa")), progress=int(f.get(b"pg", 0)),
        result=unpack(f.get(b"r")), error=None if not err else err.decode(),
        reason=None if not reason else _REASONS[reason], history=history,
        stalls=int(f.get(b"st", 0)),
    )  # fmt: skip


def history(entries: Sequence[bytes]) -> tuple[Attempt, ...]:
    out = []
    for raw in entries:
        attempt, err, dur, at, reason = unpackb(raw, raw=False)
        out.append(Attempt(int(attempt), err or None, int(dur), int(at),
                           _REASONS.get(reason.encode()) if reason else None))  # fmt: skip
    return tuple(out)
