"""Reads, queue control, per-job data, the DLQ and small records over Redis.

The half of :class:`~.backend.RedisBackend` off the job's hot path. Jobs are
found by id through the id index (job id -> queue); per-queue steps are one
script each; bulk removals run in bounded batches of :data:`BATCH` jobs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any

from ...codec import options_blob, options_from_blob, setting_blob, setting_from_blob, unpack
from ...errors import ConfigError, JobNotFound, ValidationError
from ...job import DlqEntry, FailureReason, Job, JobId, JobState, check_relink
from ...queueconfig import DlqConfig, QueueLimits, from_stored
from ...validate import MAX_LIMIT, duration, integer, kv_key, page, storable
from ..base import Clock
from ..base import check_queue_name as _qn
from .errors import translated
from .keys import Keys
from .rows import fields, history, job_from_hash
from .scripts import SCRIPTS

BATCH = 1000
MAX_LOG_LINE = 10_000
_COUNT_STATES = (JobState.WAITING, JobState.DELAYED, JobState.ACTIVE, JobState.COMPLETED,
                 JobState.FAILED, JobState.WAITING_CHILDREN)  # fmt: skip
_LIMIT_FIELDS = ("conc", "rate_max", "rate_dur", "gconc", "grate", "grate_dur")


class RedisAdmin(ABC):
    """Mixin of RedisBackend: needs ``_r``, ``keys``, ``clock``, ``_now``, ``_known``."""

    _r: Any  # redis.Redis (bytes replies)
    keys: Keys
    clock: Clock
    _known: set[str]

    @abstractmethod
    def _now(self) -> int: ...

    # -- the id index ----------------------------------------------------------------
    def _queue_of(self, job_id: JobId) -> str | None:
        with translated("lookup"):
            q = self._r.hget(self.keys.ids(job_id), job_id)
        return None if q is None else q.decode()

    def _unindex(self, ids: list[str]) -> None:
        shards: dict[str, list[str]] = {}
        for jid in ids:
            shards.setdefault(self.keys.ids(jid), []).append(jid)
        with translated("unindex"):
            pipe = self._r.pipeline(transaction=False)
            for key, members in shards.items():
                pipe.hdel(key, *members)
            pipe.execute()

    def _read(self, queue: str, ids: list[str]) -> list[tuple[dict[bytes, bytes], Any]]:
        """Job hashes and histories of ``ids`` in ``queue`` (missing ones left out)."""
        if not ids:
            return []
        with translated("read"):
            rows = SCRIPTS.read.run(self._r, [self.keys.queue(queue)], ids)
        return [(fields(flat), hist) for flat, hist in rows if flat]

    def _register(self, queue: str) -> None:
        if queue not in self._known:
            with translated("register"):
                self._r.sadd(self.keys.registry, queue)
            self._known.add(queue)

    # -- queries -----------------------------------------------------------------------
    def get_job(self, job_id: JobId) -> Job | None:
        queue = self._queue_of(job_id)
        if queue is None:
            return None
        rows = self._read(queue, [job_id])
        if not rows:
            return None
        f, hist = rows[0]
        return job_from_hash(f, queue, self._now(), history(hist))

    def get_jobs(self, queue: str, state: JobState, offset: int = 0, limit: int = 100) -> list[Job]:
        _qn(queue)
        state = JobState.parse(state)
        offset, limit = page(offset, limit)
        limit = min(limit, 10_000)
        if limit == 0:
            return []
        now = self._now()
        with translated("get_jobs"):
            args = [now, state.value, offset, limit]
            rows = SCRIPTS.list.run(self._r, [self.keys.queue(queue)], args)
        return [job_from_hash(fields(flat), queue, now) for flat in rows]

    def counts(self, queue: str) -> dict[JobState, int]:
        _qn(queue)
        with translated("counts"):
            got = SCRIPTS.counts.run(self._r, [self.keys.queue(queue)], [self._now()])
        out = dict.fromkeys(JobState, 0)
        for state, n in zip(_COUNT_STATES, got[:-1], strict=True):
            out[state] = int(n)
        if got[-1]:
            out[JobState.PAUSED], out[JobState.WAITING] = out[JobState.WAITING], 0
        return out

    def set_parent(self, job_id: JobId, parent_id: JobId) -> None:
        """Make ``parent_id`` the parent of ``job_id`` (JobNotFound names a missing one).
        A child already completed has its result filed under the new parent."""
        check_relink(job_id, parent_id)
        home = self._queue_of(parent_id)
        if home is None:
            raise JobNotFound(f"Parent job not found: {parent_id}", job_id=parent_id)
        queue = self._queue_of(job_id)
        if queue is None:
            raise JobNotFound(f"Child job not found: {job_id}", job_id=job_id)
        key = self.keys.job(queue, job_id)
        with translated("set_parent"):
            blob, state, result = self._r.hmget(key, "o", "s", "r")
            if blob is None:
                raise JobNotFound(f"Child job not found: {job_id}", job_id=job_id)
            opts = replace(options_from_blob(bytes(blob)), parent_id=parent_id)
            self._r.hset(key, mapping={"pid": parent_id, "o": options_blob(opts)})
            if state == b"completed" and result is not None:
                self._r.hset(self.keys.results(home, parent_id), job_id, result)

    def queues(self) -> list[str]:
        with translated("queues"):
            return sorted(q.decode() for q in self._r.smembers(self.keys.registry))

    def get_children_results(self, parent_id: JobId) -> dict[JobId, Any]:
        queue = self._queue_of(parent_id)
        if queue is None:
            return {}
        with translated("children"):
            got = self._r.hgetall(self.keys.results(queue, parent_id))
        return {k.decode(): unpack(v) for k, v in got.items()}

    # -- queue control -----------------------------------------------------------------
    def pause(self, queue: str) -> None:
        self._register(_qn(queue))
        with translated("pause"):
            self._r.hset(self.keys.meta(queue), "paused", "1")

    def resume(self, queue: str) -> None:
        _qn(queue)
        with translated("resume"):
            pipe = self._r.pipeline(transaction=False)
            pipe.hset(self.keys.meta(queue), "paused", "0")
            pipe.rpush(self.keys.wake(queue), "1")
            pipe.ltrim(self.keys.wake(queue), -8, -1)
            pipe.execute()

    def is_paused(self, queue: str) -> bool:
        with translated("is_paused"):
            flag = self._r.hget(self.keys.meta(_qn(queue)), "paused")
        return bool(flag == b"1")

    def _remove(self, queue: str, what: str, limit: int = BATCH, grace: int = 0,
                extra: list[str] | None = None, unindex: bool = True) -> list[str]:  # fmt: skip
        """Remove jobs of ``queue`` in batches of ``limit`` until ``limit`` total or none left."""
        gone: list[str] = []
        tag = self.keys.queue(queue)
        while True:
            with translated(what):
                got = SCRIPTS.remove.run(self._r, [tag], [self._now(), what, min(limit - len(gone),
                                         BATCH), grace, *(extra or ())])  # fmt: skip
            ids = [g.decode() for g in got]
            if ids and unindex:
                self._unindex(ids)
            gone += ids
            if what in ("ids", "dlq_one") or not ids or len(gone) >= limit:
                return gone

    def drain(self, queue: str) -> int:
        return len(self._remove(_qn(queue), "drain", limit=1 << 62))

    def clean(self, queue: str, grace_ms: int, limit: int, state: JobState) -> list[JobId]:
        _qn(queue)
        state = JobState.parse(state)
        grace_ms, limit = duration(grace_ms, "grace_ms"), integer(limit, "limit", 0, MAX_LIMIT)
        if state in (JobState.ACTIVE, JobState.WAITING_CHILDREN, JobState.PAUSED):
            raise ConfigError(f"clean does not remove {state.value} jobs")
        if limit <= 0:
            return []
        gone = self._remove(queue, state.value, limit=limit, grace=grace_ms)
        if gone and state is JobState.COMPLETED:  # older than any kept: reached too
            with translated("clean"):
                self._r.hdel(f"{self.keys.queue(queue)}:cnt", "retired")
        return gone

    def completed_retired(self, queue: str) -> int:
        """Completed jobs of ``queue`` the retention bounds dropped since the last clean of
        completed jobs or obliterate (``bunq serve`` adds them to GetJobCounts)."""
        with translated("counts"):
            return int(self._r.hget(f"{self.keys.queue(_qn(queue))}:cnt", "retired") or 0)

    def obliterate(self, queue: str, force: bool = False) -> None:
        _qn(queue)
        with translated("obliterate"):
            active = self._r.zcard(self.keys.queue(queue) + ":active")
        if active and not force:
            raise ConfigError(f"queue {queue!r} has active jobs; obliterate(force=True)")
        self._remove(queue, "all", limit=1 << 62)
        with translated("obliterate"):
            self._r.srem(self.keys.registry, queue)
        self._known.discard(queue)

    def set_limits(self, queue: str, limits: QueueLimits) -> None:
        self._register(_qn(queue))
        values = (limits.concurrency, limits.rate_max, limits.rate_duration,
                  limits.group_concurrency, limits.group_rate_max,
                  limits.group_rate_duration)  # fmt: skip
        with translated("set_limits"):
            pipe = self._r.pipeline(transaction=False)
            pipe.hset(self.keys.meta(queue), mapping={
                k: int(v or 0) for k, v in zip(_LIMIT_FIELDS, values, strict=True)})  # fmt: skip
            pipe.hdel(self.keys.meta(queue), "tokens", "rate_at")
            pipe.execute()

    def get_limits(self, queue: str) -> QueueLimits:
        with translated("get_limits"):
            got = self._r.hmget(self.keys.meta(_qn(queue)), _LIMIT_FIELDS)
        if got[0] is None:
            return QueueLimits()
        conc, rate_max, rate_dur, gconc, grate, grate_dur = (int(v or 0) for v in got)
        return from_stored(QueueLimits, rate_max or None, rate_dur or 1000, conc or None,
                           gconc or None, grate or None, grate_dur or 1000)  # fmt: skip

    # -- per-job data ------------------------------------------------------------------
    def _jobdata(self, job_id: JobId, what: str, value: Any) -> None:
        queue = self._queue_of(job_id)
        ok = 0
        if queue is not None:
            with translated(what):
                ok = SCRIPTS.jobdata.run(self._r, [self.keys.queue(queue)], [job_id, what, value])
        if not ok:
            raise JobNotFound(f"no job {job_id!r}", job_id=job_id)

    def update_progress(self, job_id: JobId, progress: int) -> None:
        if isinstance(progress, bool) or not isinstance(progress, int) or not 0 <= progress <= 100:
            raise ValidationError("progress must be an integer in [0, 100]", field="progress")
        self._jobdata(job_id, "progress", progress)

    def add_log(self, job_id: JobId, line: str) -> None:
        if not isinstance(line, str):
            raise ValidationError("a log line must be a string", field="line")
        self._jobdata(job_id, "log", storable(line, MAX_LOG_LINE))

    def get_logs(self, job_id: JobId) -> list[str]:
        queue = self._queue_of(job_id)
        if queue is None:
            return []
        with translated("get_logs"):
            return [x.decode() for x in self._r.lrange(self.keys.logs(queue, job_id), 0, -1)]

    # -- dead-letter queue -------------------------------------------------------------
    def dlq_list(self, queue: str, limit: int = 100, offset: int = 0) -> list[DlqEntry]:
        _qn(queue)
        start, limit = page(offset, limit)
        if limit <= 0:
            return []
        with translated("dlq_list"):
            got = self._r.zrevrange(self.keys.queue(queue) + ":dlq", start, start + limit - 1)
        ids = [i.decode() for i in got]
        now = self._now()
        out = []
        for f, raw in self._read(queue, ids):
            hist = history(raw)
            job = job_from_hash(f, queue, now, hist)
            out.append(DlqEntry(job, job.reason or FailureReason.UNKNOWN, job.error, hist,
                                int(f.get(b"da", 0)), int(f.get(b"dr", 0))))  # fmt: skip
        return out

    def dlq_retry(self, queue: str, job_id: JobId | None = None) -> int:
        tag = self.keys.queue(_qn(queue))
        total = 0
        while True:
            args: list[Any] = [self._now(), BATCH] + ([] if job_id is None else [job_id])
            with translated("dlq_retry"):
                n = int(SCRIPTS.dlq_retry.run(self._r, [tag], args))
            total += n
            if job_id is not None or n < BATCH:
                return total

    def dlq_purge(self, queue: str) -> int:
        return len(self._remove(_qn(queue), "dlq_all", limit=1 << 62))

    def dlq_size(self, queue: str) -> int:
        with translated("dlq_size"):
            return int(self._r.zcard(self.keys.queue(_qn(queue)) + ":dlq"))

    def dlq_remove(self, queue: str, job_id: JobId) -> bool:
        return bool(self._remove(_qn(queue), "dlq_one", extra=[job_id]))

    def dlq_config(self, queue: str, config: DlqConfig | None = None) -> DlqConfig:
        meta = self.keys.meta(_qn(queue))
        if config is None:
            with translated("dlq_config"):
                blob = self._r.hget(meta, "dlq")
            return DlqConfig() if blob is None else setting_from_blob(DlqConfig, blob)
        self._register(queue)
        with translated("dlq_config"):
            self._r.hset(meta, mapping={
                "dlq": setting_blob(config), "dlq_auto": "1" if config.auto_retry else "0",
                "dlq_interval": config.auto_retry_interval,
                "dlq_max_retries": config.max_auto_retries,
                "dlq_max_age": "none" if config.max_age is None else config.max_age,
                "dlq_max_entries": config.max_entries,
            })  # fmt: skip
        return config

    # -- small shared records ----------------------------------------------------------
    def kv_get(self, ns: str, key: str) -> bytes | None:
        with translated("kv_get"):
            v = self._r.hget(self.keys.kv(ns), key)
        return None if v is None else bytes(v)

    def kv_put(self, ns: str, key: str, value: bytes, expected: bytes | None = None,
               create: bool = False) -> bool:  # fmt: skip
        kv_key(ns, key)
        mode = "create" if create else ("set" if expected is None else "cas")
        with translated("kv_put"):
            return bool(SCRIPTS.kv_put.run(self._r, [self.keys.kv(ns)],
                                           [key, value, mode, expected or b""]))  # fmt: skip

    def kv_delete(self, ns: str, key: str) -> bool:
        with translated("kv_delete"):
            return bool(self._r.hdel(self.keys.kv(ns), key))

    def kv_list(self, ns: str) -> dict[str, bytes]:
        with translated("kv_list"):
            got = self._r.hgetall(self.keys.kv(ns))
        return {k.decode(): bytes(v) for k, v in sorted(got.items())}
