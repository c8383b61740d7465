"""Per-job operations over SQL (see :mod:`bunq.backends.jobops`), SQLite and PostgreSQL.

Each operation is one short write transaction: the job's row is read (and on
PostgreSQL locked, ``FOR UPDATE``) by its primary key, its state checked, then
one keyed statement changes it. The per-queue counters follow through the
triggers on the jobs table, as for every other change. ``promote_jobs`` reads a
range of the ``jobs_delayed`` index with a LIMIT.

The functions take the :class:`~.store.SqlBackend` as ``self`` and are bound
on it as methods; the statements are rendered with the others
(their statements are :data:`.queries.JOB_OPS`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...codec import options_blob, options_from_blob, pack
from ...errors import JobNotFound
from ...job import JobId, JobState
from ...jobrules import (
    DISCARDABLE,
    DISCARDED,
    PENDING,
    REMOVABLE,
    REPRIORITISABLE,
    RETRYABLE,
    UPDATABLE,
    check_count,
    check_delay,
    check_keep,
    check_key,
    check_priority,
    expect,
)
from ..base import check_queue_name as _qn
from .core import Tx, unit_of_work

_STATES = {s.value: s for s in JobState}


def _row(tx: Tx, job_id: JobId, now: int) -> tuple[JobState, str, bytes, int]:
    """Lock the job's row; return (public state, queue, opts blob, attempts)."""
    rows = tx.q("op_row", id=job_id)
    if not rows:
        raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
    state, run_at, queue, opts, attempts = rows[0]
    st = _STATES[state]
    if st is JobState.WAITING and run_at > now:
        st = JobState.DELAYED
    return st, queue, bytes(opts), attempts


def _one(self: Any, job_id: JobId, allowed: frozenset[JobState], operation: str,
         act: Any) -> Any:  # fmt: skip
    """Run ``act(tx, queue, now, state, opts, attempts)`` on a job in ``allowed``; ring."""
    with self._begin() as tx:
        now = self.clock()
        state, queue, opts, attempts = _row(tx, job_id, now)
        expect(job_id, state, allowed, operation)
        out = act(tx, queue, now, state, opts, attempts)
    self._ring(queue)
    return out


@unit_of_work(idempotent=False)
def remove_job(self: Any, job_id: JobId) -> bool:
    try:
        return bool(_one(self, job_id, REMOVABLE, "remove",
                         lambda tx, *_: self._forget(tx, [job_id]) or True))  # fmt: skip
    except JobNotFound:
        return False


@unit_of_work(idempotent=False)
def retry_job(self: Any, job_id: JobId) -> None:
    _one(self, job_id, RETRYABLE, "retry",
         lambda tx, q, now, *_: tx.q("op_requeue", id=job_id, run_at=now))  # fmt: skip


@unit_of_work(idempotent=False)
def promote_job(self: Any, job_id: JobId) -> None:
    _one(self, job_id, frozenset((JobState.DELAYED,)), "promote",
         lambda tx, q, now, *_: tx.q("op_run_at", id=job_id, run_at=now))  # fmt: skip


@unit_of_work(idempotent=False)
def promote_jobs(self: Any, queue: str, count: int) -> int:
    _qn(queue)
    count = check_count(count)
    if count == 0:
        return 0
    with self._begin() as tx:
        n = len(tx.q("op_promote_many", queue=queue, run_at=self.clock(), n=count))
    if n:
        self._ring(queue)
    return n


@unit_of_work(idempotent=True)
def change_priority(self: Any, job_id: JobId, priority: int) -> None:
    priority = check_priority(priority)

    def act(tx: Tx, q: str, now: int, state: JobState, opts: bytes, attempts: int) -> None:
        new = options_blob(replace(options_from_blob(opts), priority=priority))
        tx.q("op_priority", id=job_id, priority=priority, opts=new)

    _one(self, job_id, REPRIORITISABLE, "change the priority of", act)


@unit_of_work(idempotent=True)
def change_delay(self: Any, job_id: JobId, delay: int) -> None:
    delay = check_delay(delay)
    _one(self, job_id, PENDING, "change the delay of",
         lambda tx, q, now, *_: tx.q("op_run_at", id=job_id, run_at=now + delay))  # fmt: skip


@unit_of_work(idempotent=True)
def update_data(self: Any, job_id: JobId, data: Any) -> None:
    blob = pack(data, "data", self.max_payload)
    _one(self, job_id, UPDATABLE, "update",
         lambda tx, *_: tx.q("op_data", id=job_id, data=blob))  # fmt: skip


@unit_of_work(idempotent=False)
def discard_job(self: Any, job_id: JobId) -> None:
    def act(tx: Tx, q: str, now: int, state: JobState, opts: bytes, attempts: int) -> None:
        tx.q("op_discard", id=job_id, now=now, error=DISCARDED)
        if state is JobState.ACTIVE:
            tx.q("add_attempt", id=job_id, attempt=attempts, error=DISCARDED, duration_ms=0,
                 now=now, reason="explicit_fail")  # fmt: skip
        tx.q("release_unique", id=job_id)
        woken.update(self._children_failed(tx, [job_id], now))

    woken: set[str] = set()
    _one(self, job_id, DISCARDABLE, "discard", act)
    for q in woken:
        self._ring(q)


@unit_of_work(idempotent=False)
def clear_logs(self: Any, job_id: JobId, keep: int = 0) -> None:
    keep = check_keep(keep)
    every = frozenset(JobState)
    _one(self, job_id, every, "clear the logs of",
         lambda tx, *_: tx.q("op_clear_logs", id=job_id, keep=keep))  # fmt: skip


@unit_of_work(idempotent=True)
def counts_per_priority(self: Any, queue: str) -> dict[int, int]:
    _qn(queue)
    with self._read() as tx:
        return {int(p): int(n) for p, n in tx.q("op_by_priority", queue=queue)}


@unit_of_work(idempotent=True)
def dedup_job_id(self: Any, queue: str, key: str) -> JobId | None:
    _qn(queue)
    key = check_key(key)
    with self._read() as tx:
        rows = tx.q("uniq_get", queue=queue, key=key)
        now = self.clock()
    if not rows:
        return None
    job_id, until = rows[0]
    return None if until is not None and until <= now else str(job_id)


@unit_of_work(idempotent=False)
def remove_dedup_key(self: Any, queue: str, key: str) -> bool:
    _qn(queue)
    key = check_key(key)
    with self._begin() as tx:
        return bool(tx.q("op_uniq_delete", queue=queue, key=key))


METHODS = {
    f.__name__: f
    for f in (remove_job, retry_job, promote_job, promote_jobs, change_priority, change_delay,
              update_data, discard_job, clear_logs, dedup_job_id, remove_dedup_key)
}  # fmt: skip
