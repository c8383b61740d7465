"""Per-job operations over SQL (see :mod:`bunq.backends.jobops`), SQLite and PostgreSQL.

Each operation is one short write transaction: the job's row is read (and on
PostgreSQL locked, ``FOR UPDATE``) by its primary key, its state checked, then
one keyed statement changes it. The per-queue counters follow through the
triggers on the jobs table, as for every other change. ``promote_jobs`` reads a
range of the ``jobs_delayed`` index with a LIMIT.

The functions take the :class:`~.store.SqlBackend` as ``self`` and are bound
on it as methods; the statements are rendered with the others
(:func:`.queries.render_all` merges :data:`STATEMENTS`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from .store import Tx

_ORD = "CASE WHEN seq < 0 THEN -:run_at ELSE :run_at END"  # LIFO jobs order by -run_at

STATEMENTS = {
    # {dep_lock} is FOR UPDATE on PostgreSQL: the row stays ours until commit.
    "op_row": "SELECT state, run_at, queue, opts, attempts FROM {jobs} WHERE id = :id {dep_lock}",
    "op_requeue": (
        "UPDATE {jobs} SET state = 'waiting', run_at = :run_at, ord_at = " + _ORD + ","
        " attempts = 0, stalls = 0, started_at = NULL, finished_at = NULL, dlq_at = NULL,"
        " result = NULL WHERE id = :id"
    ),
    "op_run_at": "UPDATE {jobs} SET run_at = :run_at, ord_at = " + _ORD + " WHERE id = :id",
    "op_promote_many": (
        "UPDATE {jobs} SET run_at = :run_at, ord_at = " + _ORD + " WHERE id IN (SELECT id"
        " FROM {jobs} WHERE queue = :queue AND state = 'waiting' AND run_at > created_at"
        " AND run_at > :run_at ORDER BY run_at, seq LIMIT :n {skip_locked}) RETURNING id"
    ),
    "op_priority": "UPDATE {jobs} SET priority = :priority, opts = :opts WHERE id = :id",
    "op_data": "UPDATE {jobs} SET data = :data WHERE id = :id",
    "op_discard": (
        "UPDATE {jobs} SET state = 'failed', finished_at = :now, dlq_at = :now,"
        " lease_token = NULL, lease_until = NULL, error = :error, reason = 'explicit_fail'"
        " WHERE id = :id"
    ),
    "op_clear_logs": (
        "DELETE FROM {logs} WHERE job_id = :id AND n <= (SELECT COALESCE(MAX(n), 0)"
        " FROM {logs} WHERE job_id = :id) - :keep"
    ),
    # An index range of jobs_queue (queue, 'waiting', priority): the queue's pending jobs.
    "op_by_priority": (
        "SELECT priority, COUNT(*) FROM {jobs} WHERE queue = :queue AND state = 'waiting'"
        " GROUP BY priority"
    ),
    "op_uniq_delete": "DELETE FROM {uniq} WHERE queue = :queue AND key = :key RETURNING key",
}

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


def remove_job(self: Any, job_id: JobId) -> bool:
    try:
        return bool(_one(self, job_id, REMOVABLE, "remove",
                         lambda tx, *_: self._forget(tx, [job_id]) or True))  # fmt: skip
    except JobNotFound:
        return False


def retry_job(self: Any, job_id: JobId) -> None:
    _one(self, job_id, RETRYABLE, "retry",
         lambda tx, q, now, *_: tx.q("op_requeue", id=job_id, run_at=now))  # fmt: skip


def promote_job(self: Any, job_id: JobId) -> None:
    _one(self, job_id, frozenset((JobState.DELAYED,)), "promote",
         lambda tx, q, now, *_: tx.q("op_run_at", id=job_id, run_at=now))  # fmt: skip


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


def change_priority(self: Any, job_id: JobId, priority: int) -> None:
    priority = check_priority(priority)

    def act(tx: Tx, q: str, now: int, state: JobState, opts: bytes, attempts: int) -> None:
        new = options_blob(replace(options_from_blob(opts), priority=priority))
        tx.q("op_priority", id=job_id, priority=priority, opts=new)

    _one(self, job_id, REPRIORITISABLE, "change the priority of", act)


def change_delay(self: Any, job_id: JobId, delay: int) -> None:
    delay = check_delay(delay)
    _one(self, job_id, PENDING, "change the delay of",
         lambda tx, q, now, *_: tx.q("op_run_at", id=job_id, run_at=now + delay))  # fmt: skip


def update_data(self: Any, job_id: JobId, data: Any) -> None:
    blob = pack(data, "data", self.max_payload)
    _one(self, job_id, UPDATABLE, "update",
         lambda tx, *_: tx.q("op_data", id=job_id, data=blob))  # fmt: skip


def discard_job(self: Any, job_id: JobId) -> None:
    def act(tx: Tx, q: str, now: int, state: JobState, opts: bytes, attempts: int) -> None:
        tx.q("op_discard", id=job_id, now=now, error=DISCARDED)
        if state is JobState.ACTIVE:
            tx.q("add_attempt", id=job_id, attempt=attempts, error=DISCARDED, duration_ms=0,
                 now=now, reason="explicit_fail")  # fmt: skip
        tx.q("release_unique", id=job_id)

    _one(self, job_id, DISCARDABLE, "discard", act)


def clear_logs(self: Any, job_id: JobId, keep: int = 0) -> None:
    keep = check_keep(keep)
    every = frozenset(JobState)
    _one(self, job_id, every, "clear the logs of",
         lambda tx, *_: tx.q("op_clear_logs", id=job_id, keep=keep))  # fmt: skip


def counts_per_priority(self: Any, queue: str) -> dict[int, int]:
    _qn(queue)
    with self._read() as tx:
        return {int(p): int(n) for p, n in tx.q("op_by_priority", queue=queue)}


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
