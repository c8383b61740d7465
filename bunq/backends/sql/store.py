"""SqlBackend: the job semantics over SQL, shared by SQLite and PostgreSQL.

Dialect backends implement :class:`~.core.SqlCore`'s abstract methods (a
transaction, a wake-up channel, how a unit of work runs); everything else
(admission, dedup, dependencies, leases under a fence, sweep, DLQ, retention)
is here and in the parts SqlBackend is made of (:mod:`.admin`, :mod:`.sweep`,
:mod:`.groups`), once, over the named statements of :mod:`.queries`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from typing import Any

from ...batching import BULK, paused_gc
from ...codec import options_blob, pack, pack_all, setting_from_blob
from ...engine.builders import admitted_job
from ...errors import DependencyError, DuplicateJob, group_full
from ...job import (
    Job,
    JobId,
    JobState,
    Lease,
    NewJob,
    Settle,
    UniqueStrategy,
    check_new_jobs,
    now_ms,
)  # fmt: skip
from ...jobevents import EventKind, JobEvent, added_events, failed_events
from ...policy import DEFAULT_MAX_STALLS, FailDecision
from ...queueconfig import QueueLimits
from ...validate import DEFAULT_MAX_PAYLOAD, duration, lease_args, storable, store_bounds
from ..base import ALL_CAPABILITIES, Clock
from ..base import check_queue_name as _qn
from . import jobops
from .admin import SqlAdmin
from .core import Tx, iter_chunks, unit_of_work
from .groupcommit import GroupCommit
from .groups import SqlGroups
from .pages import SqlPages
from .queries import INSERT_COLS
from .rows import COL, job_from_row
from .sweep import SqlSweep

LIVE_STATES = ("waiting", "active", "waiting-children")


def is_plain(job: NewJob) -> bool:
    """A job whose admission looks nothing up: no custom id, unique key, dependency or
    group bound (PostgreSQL: one shared INSERT; SQLite: the intake)."""
    o = job.opts
    return (o.job_id is None and o.unique_key is None and not o.depends_on
            and o.group_max_size is None)  # fmt: skip


def all_plain(jobs: Sequence[NewJob]) -> bool:
    """Every job :func:`is_plain` (judged once per options object: a bulk shares one)."""
    seen = None
    for job in jobs:
        if job.opts is not seen:
            if not is_plain(job):
                return False
            seen = job.opts
    return True


class SqlBackend(SqlSweep, SqlGroups, SqlAdmin, SqlPages):
    """Backend over one SQL database that is the single source of truth.

    :param clock: epoch-ms clock for every decision (tests inject a fake one).
    :param max_payload: bytes of encoded job data accepted per job.
    :param max_stalls: expired leases a job survives before the DLQ (reason stalled).
    :param completed_max_age: completed jobs older than this (ms) are removed by sweep.
    :param completed_max_count: at most this many completed jobs are kept per queue.
    """

    kind = "sql"
    capabilities = ALL_CAPABILITIES

    def __init__(self, *, clock: Clock = now_ms, max_payload: int = DEFAULT_MAX_PAYLOAD,
                 max_stalls: int = DEFAULT_MAX_STALLS, completed_max_age: int = 24 * 3600_000,
                 completed_max_count: int = 100_000) -> None:  # fmt: skip
        self.clock = clock
        (self.max_payload, self.max_stalls, self.completed_max_age,
         self.completed_max_count) = store_bounds(max_payload, max_stalls, completed_max_age,
                                                  completed_max_count)  # fmt: skip
        self._seq = 0
        self._batch_cache: dict[tuple[str, int], str] = {}
        self._writes: GroupCommit[Tx] = GroupCommit(self._begin, lambda tx, s: tx.raw(s))
        # Job events written in the transaction of the change (SQLite: .events); None:
        # the drivers publish them (PostgreSQL, written behind).
        # (tx, the queues, build the events): build only for queues someone reads
        self._tx_events: Callable[[Tx, Iterable[str], Callable[[], list[JobEvent]]], None] \
            | None = None  # fmt: skip
        self.own_events: frozenset[EventKind] = frozenset()

    # -- per-job operations (.jobops: one keyed statement each) ---------------------------
    remove_job = jobops.remove_job
    retry_job = jobops.retry_job
    promote_job = jobops.promote_job
    promote_jobs = jobops.promote_jobs
    change_priority = jobops.change_priority
    change_delay = jobops.change_delay
    update_data = jobops.update_data
    discard_job = jobops.discard_job
    clear_logs = jobops.clear_logs
    counts_per_priority = jobops.counts_per_priority
    dedup_job_id = jobops.dedup_job_id
    remove_dedup_key = jobops.remove_dedup_key

    # -- admission -------------------------------------------------------------------
    def _next_seq(self, now: int, n: int = 1) -> int:
        """The first of ``n`` admission numbers, in one step (the last is ``+ n - 1``).

        Time-ordered: ms * 4096 + a per-process counter, so concurrent producers need
        no shared counter row (no hot spot in PG)."""
        last = self._seq = max(self._seq + n, (now << 12) + n - 1)
        return last - n + 1

    @unit_of_work(idempotent=False)
    def add(self, jobs: Sequence[NewJob]) -> list[Job]:
        if not jobs:
            return []
        check_new_jobs(jobs)
        with paused_gc() if len(jobs) >= BULK else nullcontext():
            prepared = self._prepare(jobs)
            writes = self._admission(jobs)
            out: list[Job] = writes.run(lambda tx: self._admit_logged(tx, prepared))
        for q in {j.queue for j in jobs}:
            self._ring(q)
        return out

    def _admission(self, jobs: Sequence[NewJob]) -> GroupCommit[Tx]:
        """The group commit that admits ``jobs`` (SQLite sends plain adds to its intake)."""
        return self._writes

    def _admit_logged(self, tx: Tx, prepared: list[tuple[NewJob, bytes, bytes]]) -> list[Job]:
        now = self.clock()
        out = self._admit(tx, prepared)
        if self._tx_events is not None:
            self._tx_events(tx, {j.queue for j in out}, lambda: added_events(out, now))
        return out

    def _prepare(self, jobs: Sequence[NewJob]) -> list[tuple[NewJob, bytes, bytes]]:
        """Each job beside its encoded data and options (ValidationError: data too big)."""
        if len(jobs) == 1:  # (a lone add: no lists to build around it)
            j = jobs[0]
            return [(j, pack(j.data, "data", self.max_payload), options_blob(j.opts))]
        datas = pack_all([j.data for j in jobs], "data", self.max_payload)  # one packer
        return [(j, d, options_blob(j.opts)) for j, d in zip(jobs, datas, strict=True)]

    def _admit(self, tx: Tx, prepared: list[tuple[NewJob, bytes, bytes]]) -> list[Job]:
        now = self.clock()
        out: list[Job] = []
        plain: list[dict[str, Any]] = []  # rows with no lookups, inserted in one executemany
        for job, data, opts_blob in prepared:
            o = job.opts
            if o.job_id is not None or o.unique_key is not None or o.depends_on:
                if plain:
                    tx.many("insert_job", plain)
                    plain = []
                existing = self._lookups(tx, job, now)
                if existing is not None:
                    out.append(existing)
                    continue
            pending = self._count_pending(tx, job) if o.depends_on else 0
            if o.group_max_size is not None and not pending:
                if plain:  # the group's count must see this batch's earlier jobs
                    tx.many("insert_job", plain)
                    plain = []
                self._check_group_size(tx, job.queue, o.group, o.group_max_size)
            row, admitted = self._row(job, data, opts_blob, now, pending)
            plain.append(row)
            if o.depends_on:
                tx.many("insert_job", plain)
                plain = []
                for dep in o.depends_on:
                    tx.q("insert_dep", job_id=job.id, dep_id=dep)
                    tx.q("mark_dependents", id=dep)
            out.append(admitted)
        if plain:
            tx.many("insert_job", plain)
        return out

    def _row(self, job: NewJob, data: bytes, opts_blob: bytes, now: int,
             pending: int) -> tuple[dict[str, Any], Job]:  # fmt: skip
        """A job's row (``INSERT_COLS``: value) admitted at ``now``, and the Job the add
        answers."""
        values, admitted = self._values(job, data, opts_blob, now, pending, self._next_seq(now))
        return dict(zip(INSERT_COLS, values, strict=True)), admitted

    def _values(self, job: NewJob, data: bytes, opts_blob: bytes, now: int, pending: int,
                seq: int) -> tuple[tuple[Any, ...], Job]:  # fmt: skip
        """A job's row as its values in ``INSERT_COLS`` order (admission number ``seq``,
        from :meth:`_next_seq`), and the Job the add answers."""
        o = job.opts
        run_at = now + o.delay
        values = (
            job.id, job.queue, job.name, data,
            "waiting-children" if pending else "waiting", o.priority,
            -seq if o.lifo else seq, -run_at if o.lifo else run_at, run_at, now, o.attempts,
            None if o.ttl is None else now + o.ttl, o.group, o.parent_id, pending, opts_blob,
            int(o.remove_on_complete), int(o.remove_on_fail),
        )  # fmt: skip
        st = (JobState.WAITING_CHILDREN if pending
              else (JobState.DELAYED if o.delay else JobState.WAITING))  # fmt: skip
        return values, admitted_job(job.id, job.queue, job.name, job.data, st, o, now, run_at)

    def _check_group_size(self, tx: Tx, queue: str, group: Any, most: int) -> None:
        """GroupFull when ``group`` holds ``most`` waiting or delayed jobs: an index range
        of ``jobs_group`` read up to ``most`` rows, under the group's lock (PostgreSQL)."""
        self._lock_key(tx, f"group-size:{queue}:{group}")
        if tx.q("group_pending", queue=queue, grp=group, most=most)[0][0] >= most:
            raise group_full(group, most)

    def _lookups(self, tx: Tx, job: NewJob, now: int) -> Job | None:
        """Resolve a custom id or unique key; return the job to answer instead, if any."""
        if job.opts.job_id is not None:
            self._lock_key(tx, f"id:{job.id}")
            existing = self._live_or_forget(tx, job.id)
            if existing is not None:
                return existing
        if job.opts.unique_key is not None:
            self._lock_key(tx, f"uq:{job.queue}/{job.opts.unique_key}")
            return self._claim_unique(tx, job, now)
        return None

    def _live_or_forget(self, tx: Tx, job_id: JobId) -> Job | None:
        rows = tx.q("get_job", id=job_id)
        if not rows:
            return None
        if rows[0][COL.state] in LIVE_STATES:
            return job_from_row(rows[0], self.clock())
        self._forget(tx, [job_id])  # finished: the id may be reused
        return None

    def _claim_unique(self, tx: Tx, job: NewJob, now: int) -> Job | None:
        o = job.opts
        key = o.unique_key
        until = None if o.unique_ttl is None else now + o.unique_ttl
        for holder_id, held_until in tx.q("uniq_get", queue=job.queue, key=key):
            rows = tx.q("get_job", id=holder_id)
            live = bool(rows) and rows[0][COL.state] in LIVE_STATES
            held = held_until > now if held_until is not None else live
            if not held:
                break
            if o.unique_strategy is UniqueStrategy.EXTEND:
                tx.q("uniq_extend", queue=job.queue, key=key, until=until)
                if rows:
                    return job_from_row(rows[0], now)
                raise DuplicateJob(f"unique key {key!r} is held", key=key, job_id=holder_id)
            if o.unique_strategy is UniqueStrategy.REPLACE and (
                not rows or rows[0][COL.state] != "active"
            ):
                self._forget(tx, [holder_id])
                break
            raise DuplicateJob(f"unique key {key!r} is held by job {holder_id}",
                               key=key, job_id=holder_id)  # fmt: skip
        tx.q("uniq_put", queue=job.queue, key=key, job_id=job.id, until=until)
        return None

    def _count_pending(self, tx: Tx, job: NewJob) -> int:
        pending = 0
        for dep in job.opts.depends_on:
            if dep == job.id:
                raise DependencyError(f"job {job.id} depends on itself", job_id=dep)
            rows = tx.q("job_state", id=dep)
            if not rows:
                raise DependencyError(f"unknown dependency {dep!r} of job {job.id}", job_id=dep)
            pending += rows[0][0] != "completed"
        return pending

    # -- leases ------------------------------------------------------------------------
    @unit_of_work(idempotent=True)
    def lease(self, queue: str, n: int, lease_ms: int, owner: str = "") -> list[Lease]:
        _qn(queue)
        lease_args(n, lease_ms, owner)
        if n <= 0:
            return []
        token = uuid.uuid4().hex
        with self._begin(durable=False) as tx:
            now = self.clock()
            n, tokens, limits, grouped = self._admissible(tx, queue, n, now)
            if n <= 0:
                return []
            lease = {"token": token, "owner": owner, "until": now + lease_ms, "now": now}
            if grouped:
                rows = self._claim_groups(tx, queue, n, limits, now, lease)
            else:
                rows = tx.q("lease", queue=queue, n=n, **lease)
                rows.sort(key=lambda r: (-r[COL.priority], r[COL.ord_at], r[COL.seq]))
            if rows and tokens is not None:  # a rate-limited queue spends its tokens
                tx.q("rate_set", queue=queue, tokens=tokens - len(rows), at=now)
            if rows and self._tx_events is not None:
                self._tx_events(tx, (queue,), lambda: [
                    JobEvent(EventKind.ACTIVE, queue, r[COL.id], now, {"attempt": r[COL.attempts]})
                    for r in rows])  # fmt: skip
        until = now + lease_ms
        out = []
        for r in rows:
            job = job_from_row(r, now)
            out.append(Lease(job, token, job.attempts, until, owner))
        return out

    def _admissible(self, tx: Tx, queue: str, n: int,
                    now: int) -> tuple[int, float | None, QueueLimits | None, bool]:  # fmt: skip
        """How many jobs the queue may lease now, its rate tokens (if limited), its
        limits, and whether the claim goes through the FIFO groups (:mod:`.groups`)."""
        paused, limits_blob, grouped = tx.q("claim_info", queue=queue)[0]
        if paused:
            return 0, None, None, False
        if limits_blob is None:
            return n, None, None, bool(grouped)
        limits = setting_from_blob(QueueLimits, limits_blob)
        if limits.concurrency or limits.rate_max:
            self._lock_key(tx, f"lim:{queue}")  # the count and the tokens below stay exact
        if limits.concurrency:
            n = min(n, limits.concurrency - tx.q("count_active", queue=queue)[0][0])
        tokens = None
        if limits.rate_max:
            tokens = self._rate_tokens(tx, queue, limits, now)
            n = min(n, int(tokens))
        grouped = grouped or bool(limits.group_concurrency or limits.group_rate_max)
        return n, tokens, limits, bool(grouped)

    def _rate_tokens(self, tx: Tx, queue: str, limits: QueueLimits, now: int) -> float:
        rows = tx.q("rate_get", queue=queue)
        cap = float(limits.rate_max or 0)
        tokens, at = rows[0] if rows and rows[0][0] is not None else (cap, now)
        refill = cap / max(limits.rate_duration, 1)
        return min(cap, float(tokens) + max(now - int(at), 0) * refill)

    def complete(self, lease: Lease, result: Any = None) -> Settle:
        return self.complete_many([(lease, result)])[0]

    @unit_of_work(idempotent=True)
    def complete_many(self, items: Sequence[tuple[Lease, Any]]) -> list[Settle]:
        packed = [(lease, pack(result, "result", self.max_payload)) for lease, result in items]
        if not packed:
            return []
        done: set[str] = set()
        queues = {lease.job.queue for lease, _ in items}
        with self._begin(durable=False) as tx:
            now = self.clock()
            for chunk in iter_chunks(packed, 200):
                done.update(self._complete_chunk(tx, chunk, now))
            if done and self._tx_events is not None:
                self._tx_events(tx, queues, lambda: [
                    JobEvent(EventKind.COMPLETED, le.job.queue, le.job.id, now, {"result": r})
                    for le, r in items if le.job.id in done])  # fmt: skip
            queues = {q for q in queues if not self._ring_on_commit(tx, q)}
        for q in queues:
            self._ring(q)
        return [Settle.OK if lease.job.id in done else Settle.STALE for lease, _ in items]

    def _complete_rows(self, tx: Tx, chunk: Sequence[tuple[Lease, bytes]],
                       now: int) -> list[tuple[Any, ...]]:  # fmt: skip
        """Complete a chunk under its fences; rows (id, remove_on_complete, dependents)."""
        params: dict[str, Any] = {"now": now}
        for i, (lease, blob) in enumerate(chunk):
            params.update({f"v{i}_0": lease.job.id, f"v{i}_1": lease.token,
                           f"v{i}_2": lease.attempt, f"v{i}_3": blob})  # fmt: skip
        return tx.sql(self._batch_sql("complete_batch", len(chunk), 4), params)

    def _complete_chunk(self, tx: Tx, chunk: Sequence[tuple[Lease, bytes]], now: int) -> list[str]:
        rows = self._complete_rows(tx, chunk, now)
        uniques = {lease.job.id for lease, _ in chunk if lease.job.opts.unique_key is not None}
        for jid, remove, dependents in rows:
            if dependents:
                for dependent, pending, state in tx.q("release_dependents", id=jid):
                    if pending <= 0 and state == "waiting-children":
                        tx.q("wake_parent", id=dependent, now=now)
            if jid in uniques:
                tx.q("release_unique", id=jid)
            if remove:
                self._forget(tx, [jid])
        return [r[0] for r in rows]

    @unit_of_work(idempotent=True)
    def fail(self, lease: Lease, error: str | None, decision: FailDecision,
             duration_ms: int = 0) -> Settle:  # fmt: skip
        duration(duration_ms, "duration_ms")
        error = None if error is None else storable(error)
        woken: set[str] = set()
        with self._begin() as tx:
            now = self.clock()
            fence = {"id": lease.job.id, "token": lease.token, "attempt": lease.attempt}
            if decision.kind == "dlq":
                rows = tx.q("fail_dead", now=now, error=error, reason=decision.reason.value,
                            **fence)  # fmt: skip
            else:
                run_at = max(decision.run_at, now)
                rows = tx.q("fail_retry", run_at=run_at,
                            ord_at=-run_at if lease.job.opts.lifo else run_at,
                            give_back=int(decision.kind == "delay"), error=error,
                            reason=decision.reason.value, **fence)  # fmt: skip
            if not rows:
                return Settle.STALE
            if decision.kind != "delay":
                tx.q("add_attempt", id=lease.job.id, attempt=lease.attempt, error=error,
                     duration_ms=duration_ms, now=now, reason=decision.reason.value)  # fmt: skip
            if decision.kind == "dlq":
                tx.q("release_unique", id=lease.job.id)
                if lease.job.opts.parent_id is not None:
                    woken = self._children_failed(tx, [lease.job.id], now)
                if rows[0][0]:
                    self._forget(tx, [lease.job.id])
            if self._tx_events is not None and (error is not None or decision.kind != "delay"):
                # (a job given back unstarted is no event)
                first = error and error.split("\n", 1)[0]
                self._tx_events(tx, (lease.job.queue,),
                                lambda: failed_events(lease.job, first, decision, now))  # fmt: skip
        if decision.kind != "dlq" or self._tx_events is not None:  # (wakes event readers)
            self._ring(lease.job.queue)
        for q in woken:
            self._ring(q)
        return Settle.OK

    @unit_of_work(idempotent=True)
    def extend(self, lease: Lease, lease_ms: int) -> Settle:
        duration(lease_ms, "lease_ms")
        with self._begin() as tx:
            rows = tx.q("extend", id=lease.job.id, token=lease.token, attempt=lease.attempt,
                        until=self.clock() + lease_ms)  # fmt: skip
        return Settle.OK if rows else Settle.STALE
