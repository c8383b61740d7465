"""Reads, queue control, per-job data, the DLQ and small records over SQL.

The half of :class:`~.store.SqlBackend` that is not on the job's hot path:
everything here is one short transaction over the named statements of
:mod:`.queries`, shared by SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...codec import options_blob, options_from_blob, setting_blob, setting_from_blob, unpack
from ...errors import ConfigError, JobNotFound, ValidationError
from ...job import Attempt, DlqEntry, FailureReason, Job, JobId, JobState, check_relink
from ...queueconfig import DlqConfig, QueueLimits
from ...validate import MAX_LIMIT, duration, integer, kv_key, page, storable
from ..base import check_queue_name as _qn
from ..eventlog import LISTEN_NS
from .core import SqlCore, Tx, unit_of_work
from .events import SqlEventLog
from .groups import CURSOR_NS
from .rows import COL, job_from_row

MAX_LOG_LINES = 1000
MAX_PAGE = 10_000  # jobs or DLQ entries returned by one listing call
OBLITERATE_BATCH = 5_000  # jobs an obliterate deletes per statement (and per early transaction)


class SqlAdmin(SqlCore):
    """Part of SqlBackend: reads, queue control, per-job data, the DLQ, kv records."""

    _events: SqlEventLog

    # -- queries -----------------------------------------------------------------------
    @unit_of_work(idempotent=True)
    def get_job(self, job_id: JobId) -> Job | None:
        with self._read() as tx:
            rows = tx.q("get_job", id=job_id)
            if not rows:
                return None
            job = job_from_row(rows[0], self.clock())
            hist = self._history(tx, job_id)
        return Job(**{**_fields(job), "history": hist})

    def _history(self, tx: Tx, job_id: JobId) -> tuple[Attempt, ...]:
        return tuple(
            Attempt(a, e, d, at, None if r is None else FailureReason(r))
            for a, e, d, at, r in tx.q("attempts_of", id=job_id)
        )

    @unit_of_work(idempotent=True)
    def get_jobs(self, queue: str, state: JobState, offset: int = 0, limit: int = 100) -> list[Job]:
        _qn(queue)
        state = JobState.parse(state)
        offset, limit = page(offset, limit)
        page_ = {"queue": queue, "offset": offset, "limit": min(limit, MAX_PAGE)}
        with self._read() as tx:
            now = self.clock()
            if state is JobState.PAUSED or state is JobState.WAITING:
                if (state is JobState.PAUSED) != self._paused(tx, queue):
                    return []
                rows = tx.q("jobs_waiting", now=now, **page_)
            elif state is JobState.DELAYED:
                rows = tx.q("jobs_delayed", now=now, **page_)
            elif state in (JobState.COMPLETED, JobState.FAILED):
                rows = tx.q("jobs_finished", state=state.value, **page_)
            else:
                rows = tx.q("jobs_in_state", state=state.value, **page_)
        return [job_from_row(r, now) for r in rows]

    @unit_of_work(idempotent=True)
    def counts(self, queue: str) -> dict[JobState, int]:
        _qn(queue)
        out = dict.fromkeys(JobState, 0)
        with self._read() as tx:
            # The counters (waiting includes delayed) and the delayed part, in one read.
            for state, n in tx.q("counts", queue=queue, now=self.clock()):
                if state != "retired":  # see completed_retired
                    out[JobState(state)] += int(n or 0)
            out[JobState.WAITING] -= out[JobState.DELAYED]
            if self._paused(tx, queue):
                out[JobState.PAUSED], out[JobState.WAITING] = out[JobState.WAITING], 0
        return out

    @unit_of_work(idempotent=True)
    def queues(self) -> list[str]:
        with self._read() as tx:
            return sorted(r[0] for r in tx.q("queue_names"))

    @unit_of_work(idempotent=True)
    def get_children_results(self, parent_id: JobId) -> dict[JobId, Any]:
        with self._read() as tx:
            return {jid: unpack(res) for jid, res in tx.q("children_results", id=parent_id)}

    def set_parent(self, job_id: JobId, parent_id: JobId) -> None:
        """Make ``parent_id`` the parent of ``job_id`` (JobNotFound names a missing one)."""
        check_relink(job_id, parent_id)
        with self._begin() as tx:
            if not tx.q("job_opts", id=parent_id):
                raise JobNotFound(f"Parent job not found: {parent_id}", job_id=parent_id)
            rows = tx.q("job_opts", id=job_id)
            if not rows:
                raise JobNotFound(f"Child job not found: {job_id}", job_id=job_id)
            opts = replace(options_from_blob(bytes(rows[0][0])), parent_id=parent_id)
            tx.q("set_parent", id=job_id, parent=parent_id, opts=options_blob(opts))

    # -- queue control -----------------------------------------------------------------
    def _paused(self, tx: Tx, queue: str) -> bool:
        rows = tx.q("queue_get", queue=queue)
        return bool(rows and rows[0][0])  # (paused, limits, dlq)

    @unit_of_work(idempotent=True)
    def pause(self, queue: str) -> None:
        with self._begin() as tx:
            tx.q("queue_upsert_paused", queue=_qn(queue), paused=1)

    @unit_of_work(idempotent=True)
    def resume(self, queue: str) -> None:
        with self._begin() as tx:
            tx.q("queue_upsert_paused", queue=_qn(queue), paused=0)
        self._ring(queue)

    @unit_of_work(idempotent=True)
    def is_paused(self, queue: str) -> bool:
        with self._read() as tx:
            return self._paused(tx, _qn(queue))

    @unit_of_work(idempotent=True)
    def drain(self, queue: str) -> int:
        with self._begin() as tx:
            gone = [r[0] for r in tx.q("drain", queue=_qn(queue))]
            self._forget(tx, gone)
        return len(gone)

    @unit_of_work(idempotent=True)
    def clean(self, queue: str, grace_ms: int, limit: int, state: JobState) -> list[JobId]:
        _qn(queue)
        state = JobState.parse(state)
        if state in (JobState.ACTIVE, JobState.WAITING_CHILDREN, JobState.PAUSED):
            raise ConfigError(f"clean does not remove {state.value} jobs")
        grace_ms, limit = duration(grace_ms, "grace_ms"), integer(limit, "limit", 0, MAX_LIMIT)
        with self._begin() as tx:
            now = self.clock()
            args = {"queue": queue, "before": now - grace_ms, "limit": limit}
            if state in (JobState.WAITING, JobState.DELAYED):
                rows = tx.q("clean_waiting", now=now, delayed=state is JobState.DELAYED, **args)
            else:
                rows = tx.q("clean", state=state.value, **args)
            gone = [r[0] for r in rows]
            self._forget(tx, gone)
            if gone and state is JobState.COMPLETED:  # older than any kept: reached too
                tx.q("unretire_completed", queue=queue)
        return gone

    @unit_of_work(idempotent=True)
    def completed_retired(self, queue: str) -> int:
        """Completed jobs of ``queue`` the retention bounds deleted since the last clean
        of completed jobs or obliterate (``bunq serve`` adds them to GetJobCounts)."""
        with self._read() as tx:
            return int(tx.q("count_state", queue=_qn(queue), state="retired")[0][0])

    @unit_of_work(idempotent=True)
    def obliterate(self, queue: str, force: bool = False) -> None:
        # Most jobs go first, in transactions of their own, so that the last one, which
        # holds the locks below, deletes only what was added since (on PostgreSQL it
        # holds off every plain add of the schema until it commits).
        with self._read() as tx:
            self._may_obliterate(tx, queue, force)
        while True:
            with self._begin() as tx:
                if self._obliterate_batch(tx, queue) < OBLITERATE_BATCH:
                    break
        with self._begin() as tx:
            self._may_obliterate(tx, queue, force)
            # The registry row first: an add registering the queue meanwhile waits for
            # this commit and registers it again; then the counter rows, held to the
            # commit (see "obliterate_lock_counts"), so an add that bumped one of them
            # keeps its job, registration and count, or loses all three.
            later = "obliterate_deltas" in self._sql  # PostgreSQL: counts appended later
            if later:  # held to the commit: a job and its appended count go together
                tx.q("obliterate_lock_deltas")
            tx.q("obliterate_queue", queue=queue)
            tx.q("obliterate_lock_counts", queue=queue)
            while self._obliterate_batch(tx, queue) == OBLITERATE_BATCH:
                pass
            for name in ("obliterate_counts", "obliterate_groups"):
                tx.q(name, queue=queue)
            if later:
                tx.q("obliterate_deltas", queue=queue)
            tx.q("kv_delete", ns=CURSOR_NS, key=queue)  # the groups' round-robin cursor

    def _may_obliterate(self, tx: Tx, queue: str, force: bool) -> None:
        if not force and tx.q("count_state", queue=_qn(queue), state="active")[0][0]:
            raise ConfigError(f"queue {queue!r} has active jobs; obliterate(force=True)")

    def _obliterate_batch(self, tx: Tx, queue: str) -> int:
        """Delete up to OBLITERATE_BATCH jobs of ``queue`` (their attempts and logs too)."""
        gone = [r[0] for r in tx.q("obliterate", queue=queue, lim=OBLITERATE_BATCH)]
        self._forget(tx, gone)
        return len(gone)

    @unit_of_work(idempotent=True)
    def set_limits(self, queue: str, limits: QueueLimits) -> None:
        with self._begin() as tx:
            tx.q("queue_set_limits", queue=_qn(queue), limits=setting_blob(limits))
            tx.q("rate_set", queue=queue, tokens=None, at=None)
            tx.q("group_rate_reset", queue=queue)

    @unit_of_work(idempotent=True)
    def get_limits(self, queue: str) -> QueueLimits:
        with self._read() as tx:
            rows = tx.q("queue_get", queue=_qn(queue))
        _paused, limits, _dlq = rows[0] if rows else (0, None, None)
        return QueueLimits() if limits is None else setting_from_blob(QueueLimits, limits)

    # -- per-job data ------------------------------------------------------------------
    @unit_of_work(idempotent=True)
    def update_progress(self, job_id: JobId, progress: int) -> None:
        if isinstance(progress, bool) or not isinstance(progress, int) or not 0 <= progress <= 100:
            raise ValidationError("progress must be an integer in [0, 100]", field="progress")
        with self._begin() as tx:
            if not tx.q("progress", id=job_id, progress=progress):
                raise JobNotFound(f"no job {job_id!r}", job_id=job_id)

    @unit_of_work(idempotent=False)
    def add_log(self, job_id: JobId, line: str) -> None:
        if not isinstance(line, str):
            raise ValidationError("a log line must be a string", field="line")
        with self._begin() as tx:
            row = tx.q("log_opts", id=job_id)
            if not row:
                raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
            keep = options_from_blob(bytes(row[0][0])).keep_logs
            keep = MAX_LOG_LINES if keep is None else min(keep, MAX_LOG_LINES)
            n = tx.q("log_next", id=job_id)[0][0]
            tx.q("log_add", id=job_id, n=n, line=storable(line, 10_000))
            tx.q("log_trim", id=job_id, n=n - keep)

    @unit_of_work(idempotent=True)
    def get_logs(self, job_id: JobId) -> list[str]:
        with self._read() as tx:
            return [r[0] for r in tx.q("logs", id=job_id)]

    # -- dead-letter queue -------------------------------------------------------------
    @unit_of_work(idempotent=True)
    def dlq_list(self, queue: str, limit: int = 100, offset: int = 0) -> list[DlqEntry]:
        offset, limit = page(offset, limit)
        with self._read() as tx:
            now = self.clock()
            out = []
            for row in tx.q("dlq_list", queue=_qn(queue), limit=min(limit, MAX_PAGE),
                            offset=offset):  # fmt: skip
                job = job_from_row(row, now)
                hist = self._history(tx, job.id)
                out.append(DlqEntry(Job(**{**_fields(job), "history": hist}),
                                    job.reason or FailureReason.UNKNOWN, job.error, hist,
                                    row[COL.dlq_at] or 0, row[COL.dlq_retries]))  # fmt: skip
        return out

    @unit_of_work(idempotent=True)
    def dlq_retry(self, queue: str, job_id: JobId | None = None) -> int:
        with self._begin() as tx:
            now = self.clock()
            if job_id is None:
                rows = tx.q("dlq_retry_all", queue=_qn(queue), now=now, auto=0)
            else:
                rows = tx.q("dlq_retry_one", queue=_qn(queue), id=job_id, now=now, auto=0)
        self._ring(queue)
        return len(rows)

    @unit_of_work(idempotent=True)
    def dlq_purge(self, queue: str) -> int:
        with self._begin() as tx:
            gone = [r[0] for r in tx.q("dlq_purge", queue=_qn(queue))]
            self._forget(tx, gone)
        return len(gone)

    @unit_of_work(idempotent=True)
    def dlq_size(self, queue: str) -> int:
        with self._read() as tx:
            return int(tx.q("count_state", queue=_qn(queue), state="failed")[0][0])

    @unit_of_work(idempotent=True)
    def dlq_remove(self, queue: str, job_id: JobId) -> bool:
        with self._begin() as tx:
            gone = [r[0] for r in tx.q("dlq_remove", queue=_qn(queue), id=job_id)]
            self._forget(tx, gone)
        return bool(gone)

    @unit_of_work(idempotent=True)
    def dlq_config(self, queue: str, config: DlqConfig | None = None) -> DlqConfig:
        _qn(queue)
        if config is not None:
            with self._begin() as tx:
                tx.q("queue_set_dlq", queue=queue, dlq=setting_blob(config))
            return config
        with self._read() as tx:
            rows = tx.q("queue_get", queue=queue)
        _paused, _limits, dlq = rows[0] if rows else (0, None, None)
        return DlqConfig() if dlq is None else setting_from_blob(DlqConfig, dlq)

    # -- small shared records ----------------------------------------------------------
    @unit_of_work(idempotent=True)
    def kv_get(self, ns: str, key: str) -> bytes | None:
        with self._read() as tx:
            rows = tx.q("kv_get", ns=ns, key=key)
        return bytes(rows[0][0]) if rows else None

    @unit_of_work(idempotent=False)
    def kv_put(self, ns: str, key: str, value: bytes, expected: bytes | None = None,
               create: bool = False) -> bool:  # fmt: skip
        kv_key(ns, key)
        with self._begin() as tx:
            if ns == LISTEN_NS:  # in the transaction: see SqlEventLog._until
                self._events.registrations_changed()
            if create:
                return bool(tx.q("kv_create", ns=ns, key=key, value=value))
            if expected is None:
                return bool(tx.q("kv_set", ns=ns, key=key, value=value))
            return bool(tx.q("kv_cas", ns=ns, key=key, value=value, expected=expected))

    @unit_of_work(idempotent=True)
    def kv_delete(self, ns: str, key: str) -> bool:
        with self._begin() as tx:
            if ns == LISTEN_NS:
                self._events.registrations_changed()
            return bool(tx.q("kv_delete", ns=ns, key=key))

    @unit_of_work(idempotent=True)
    def kv_list(self, ns: str) -> dict[str, bytes]:
        with self._read() as tx:
            return {k: bytes(v) for k, v in tx.q("kv_list", ns=ns)}


def _fields(job: Job) -> dict[str, Any]:
    return {name: getattr(job, name) for name in job.__dataclass_fields__}
