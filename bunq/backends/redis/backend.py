"""RedisBackend: the job semantics over Redis, one Lua function per multi-key step.

Admission, leases, settles, sweeps and admin steps each run as one function over one
queue's keys (one hash tag, one cluster slot); the hot paths are one FCALL per
add call, per lease batch and per settle batch (per queue). Times come from
``clock()``: by default the server's ``TIME`` (:class:`.clock.ServerClock`), an
injected clock in tests.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import redis

from ...codec import options_blob, pack
from ...errors import BackendError, DependencyError, DuplicateJob, ValidationError
from ...job import (
    Job,
    JobOptions,
    JobState,
    Lease,
    NewJob,
    Settle,
    check_new_jobs,
    refuse_group_max_size,
)
from ...policy import DEFAULT_MAX_STALLS, FailDecision, decide_stall
from ...validate import DEFAULT_MAX_PAYLOAD, duration, lease_args, storable, store_bounds
from ..base import ALL_CAPABILITIES, Capability, Clock, SweepResult
from ..base import check_queue_name as _qn
from . import jobops
from .admin import RedisAdmin
from .clock import ServerClock
from .config import RedisConfig
from .deps import RemoteDeps
from .errors import translated
from .events import RedisEventLog
from .keys import Keys
from .pages import RedisPages
from .rows import fields, job_from_hash
from .scripts import SCRIPTS, Script, missing

_pack: Callable[..., bytes] | None
try:
    import hiredis

    _pack = hiredis.pack_command
except ImportError:  # pragma: no cover - redis-py packs the commands then
    _pack = None

_STATE = {b"waiting": JobState.WAITING, b"delayed": JobState.DELAYED,
          b"waiting-children": JobState.WAITING_CHILDREN}  # fmt: skip
_OPT_ARGS: dict[int, tuple[JobOptions, list[Any]]] = {}
_NO_DEPS = [0, 0]  # add.lua's xpending and local dependency count of a job without any
WAIT_SLICE_S = 5.0  # a blocking wait is cut into slices shorter than the socket timeout
KNOWN_FOR_S = 10.0  # an add re-registers its queue at least this often


def _opt_args(o: JobOptions) -> list[Any]:
    """The script arguments a job's options give, cached by options identity."""
    hit = _OPT_ARGS.get(id(o))
    if hit is not None and hit[0] is o:
        return hit[1]
    args = [options_blob(o), o.priority, o.delay, b"1" if o.lifo else b"0",
            b"" if o.ttl is None else o.ttl, o.group or b"", o.parent_id or b"",
            b"1" if o.remove_on_complete else b"0", b"1" if o.remove_on_fail else b"0",
            b"1" if o.job_id is not None else b"0", o.unique_key or b"", o.unique_strategy.value,
            b"" if o.unique_ttl is None else o.unique_ttl, o.attempts]  # fmt: skip
    if len(_OPT_ARGS) >= 4096:
        _OPT_ARGS.clear()
    _OPT_ARGS[id(o)] = (o, args)
    return args


class RedisBackend(RemoteDeps, RedisAdmin, RedisPages):
    """Backend over one Redis server (or one cluster slot per queue).

    :param url: ``redis://host:port/db?prefix=bunq`` (see :mod:`.config`).
    :param clock: epoch-ms clock for every decision (default: the server's TIME).
    :param max_payload: bytes of encoded job data accepted per job.
    :param max_stalls: expired leases a job survives before the DLQ (reason stalled).
    :param completed_max_age: completed jobs older than this (ms) are removed by sweep.
    :param completed_max_count: at most this many completed jobs are kept per queue.
    """

    kind = "redis"
    capabilities = ALL_CAPABILITIES - {Capability.GROUP_MAX_SIZE}

    # per-job operations (.jobops: one jobop.lua call each)
    remove_job = jobops.remove_job
    retry_job = jobops.retry_job
    promote_job = jobops.promote_job
    promote_jobs = jobops.promote_jobs
    change_priority = jobops.change_priority
    change_delay = jobops.change_delay
    update_data = jobops.update_data
    discard_job = jobops.discard_job
    remove_child_dependency = jobops.remove_child_dependency
    clear_logs = jobops.clear_logs
    counts_per_priority = jobops.counts_per_priority
    dedup_job_id = jobops.dedup_job_id
    remove_dedup_key = jobops.remove_dedup_key

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", *, clock: Clock | None = None,
                 max_payload: int = DEFAULT_MAX_PAYLOAD, max_stalls: int = DEFAULT_MAX_STALLS,
                 completed_max_age: int = 24 * 3600_000,
                 completed_max_count: int = 100_000) -> None:  # fmt: skip
        self.config = RedisConfig.parse(url)
        opts: dict[str, Any] = {"socket_timeout": 30.0, "socket_connect_timeout": 5.0}
        self._r: Any = redis.Redis.from_url(self.config.client_url, **opts)
        self.keys = Keys(self.config.prefix)
        self._server_clock = None if clock is not None else ServerClock()
        self.clock: Clock = clock or self._server_clock or ServerClock()
        (self.max_payload, self.max_stalls, self.completed_max_age,
         self.completed_max_count) = store_bounds(max_payload, max_stalls, completed_max_age,
                                                  completed_max_count)  # fmt: skip
        self._known: set[str] = set()  # queues this process has registered lately
        self._known_at = time.monotonic()
        self._local = threading.local()
        self._conns: weakref.WeakSet[Any] = weakref.WeakSet()  # per-thread connections
        self._events = RedisEventLog(self, self._r, self.keys)  # job events: a stream per queue
        self.publish_events = self._events.publish_events
        self.has_readers = self._events.has_readers
        self.event_reader = self._events.event_reader
        with translated("connect"):
            self._r.ping()
            SCRIPTS.load(self._r)
            if self._server_clock is not None:
                self._server_clock.sync(self._r)

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> RedisBackend:
        return cls(url, **kw)

    def _now(self) -> int:
        sc = self._server_clock
        if sc is not None and time.monotonic() >= sc.due:
            with translated("clock"):
                sc.sync(self._r)
        return self.clock()

    def close(self) -> None:
        self._events.close()  # writes the events still buffered
        for conn in list(self._conns):
            conn.disconnect()
        self._r.close()
        self._r.connection_pool.disconnect()

    # -- admission -------------------------------------------------------------------
    def add(self, jobs: Sequence[NewJob]) -> list[Job]:
        if not jobs:
            return []
        check_new_jobs(jobs)  # the bounds every backend shares (bunq.validate)
        refuse_group_max_size(jobs, self.kind)
        if len(jobs) == 1:  # the common call: one queue, nothing to undo on refusal
            job = jobs[0]
            one = self._add_queue(_qn(job.queue), [job], [self._job_args(job)])[0]
            if job.opts.durable:
                self._durable()
            return one
        runs: list[tuple[str, list[int]]] = []  # consecutive jobs of one queue, in order
        for i, job in enumerate(jobs):
            if runs and runs[-1][0] == job.queue:
                runs[-1][1].append(i)
            else:
                runs.append((_qn(job.queue), [i]))
        args_of = [self._job_args(job) for job in jobs]
        out: list[Job | None] = [None] * len(jobs)
        done: list[tuple[str, list[str]]] = []  # admitted so far (undone if a later run fails)
        try:
            for queue, idx in runs:
                new, admitted = self._add_queue(queue, [jobs[i] for i in idx],
                                                [args_of[i] for i in idx])  # fmt: skip
                for i, added in zip(idx, new, strict=True):
                    out[i] = added
                done.append((queue, admitted))
        except Exception:
            for queue, ids in done:  # a batch over several queues: all or none
                self._remove(queue, "ids", extra=ids)
            raise
        if any(job.opts.durable for job in jobs):
            self._durable()
        return [j for j in out if j is not None]

    def _job_args(self, job: NewJob) -> list[Any]:
        if not isinstance(job.name, str) or not job.name or len(job.name) > 256:
            raise ValidationError("job name must be a non-empty string of at most 256")
        return [job.id, job.name, pack(job.data, "data", self.max_payload), *_opt_args(job.opts)]

    def _add_queue(self, queue: str, jobs: list[NewJob],
                   argss: list[list[Any]]) -> tuple[list[Job], list[str]]:  # fmt: skip
        if any(job.opts.depends_on for job in jobs):
            deps, done = self._resolve_deps(queue, jobs)
        else:
            deps, done = [_NO_DEPS] * len(jobs), []
        now = self._now()
        args: list[Any] = [now, len(jobs)]
        for a, d in zip(argss, deps, strict=True):
            args += a
            args += d
        tag = self.keys.queue(queue)
        cmds: list[tuple[Any, ...]] = [SCRIPTS.add.command(tag, *args)]
        single = len(jobs) == 1
        if single:  # the common case: one plain command, no script
            cmds.append(("HSETNX", self.keys.ids(jobs[0].id), jobs[0].id, queue))
            shards = 1
        else:
            by_shard: dict[str, list[str]] = {}
            for job in jobs:
                by_shard.setdefault(self.keys.ids(job.id), []).append(job.id)
            for key, ids in by_shard.items():
                cmds.append(SCRIPTS.index_put.command(key, queue, *ids))
            shards = len(by_shard)
        mono = time.monotonic()
        if mono - self._known_at > KNOWN_FOR_S:  # a restarted server forgot them
            self._known.clear()
            self._known_at = mono
        if queue not in self._known:
            cmds.append(("SADD", self.keys.registry, queue))
        with translated("add"):
            res = self._scripted(cmds)
        self._known.add(queue)
        reply = res[0]
        if reply[0] == b"err":
            self._refuse(queue, reply)
        out, admitted = self._answers(queue, jobs, reply, now)
        if done:
            self._store_results(queue, done)
        if single:
            clashes = [] if res[1] else self._clash_of(jobs[0].id, queue)
        else:
            clashes = [(c[0].decode(), c[1].decode()) for r in res[1 : 1 + shards] for c in r]
        if clashes:
            out, admitted = self._clashes(queue, jobs, out, admitted, clashes)
        return out, admitted

    def _clash_of(self, job_id: str, queue: str) -> list[tuple[str, str]]:
        """``[(job_id, other queue)]`` when the index maps the id to another queue."""
        other = self._queue_of(job_id)
        return [] if other is None or other == queue else [(job_id, other)]

    def _clashes(self, queue: str, jobs: list[NewJob], out: list[Job], admitted: list[str],
                 clashes: list[tuple[str, str]]) -> tuple[list[Job], list[str]]:  # fmt: skip
        """Ids this add admitted that the index maps to another queue (job ids are global).

        A stale entry (no such job there) is taken over. A live job with that idempotent
        job id is the answer (this add's copy is removed); a finished one is removed so
        the id is reused, as on SQL. Any other id is a duplicate: the whole call is
        undone and DuplicateJob raised.
        """
        mine = set(admitted)
        by_id = {job.id: job for job in jobs}
        take_over: list[str] = []
        for jid, other in clashes:
            if jid not in mine:
                continue
            rows = self._read(other, [jid])
            if not rows:
                take_over.append(jid)
                continue
            job = by_id[jid]
            state = rows[0][0][b"s"]
            if job.opts.job_id is None:
                self._remove(queue, "ids", extra=admitted, unindex=False)
                clashing = {c for c, _ in clashes}
                self._unindex([a for a in admitted if a not in clashing])
                raise DuplicateJob(f"a job with id {jid!r} exists (queue {other!r})", job_id=jid)
            if state in (b"waiting", b"active", b"waiting-children"):
                self._remove(queue, "ids", extra=[jid], unindex=False)
                existing = job_from_hash(rows[0][0], other, self._now())
                out = [existing if j.id == jid and j.queue == queue else j for j in out]
                admitted = [a for a in admitted if a != jid]
            else:
                self._remove(other, "ids", extra=[jid], unindex=False)
                take_over.append(jid)
        if take_over:
            with translated("index"):
                pipe = self._r.pipeline(transaction=False)
                for jid in take_over:
                    pipe.hset(self.keys.ids(jid), jid, queue)
                pipe.execute()
        return out, admitted

    def _answers(self, queue: str, jobs: list[NewJob], reply: list[Any],
                 now: int) -> tuple[list[Job], list[str]]:  # fmt: skip
        """The jobs an add script's reply stands for, and the ids it admitted."""
        out: list[Job] = []
        admitted: list[str] = []
        for k, job in enumerate(jobs):
            kind, payload = reply[1 + 2 * k], reply[2 + 2 * k]
            if kind == b"old":
                out.append(job_from_hash(fields(payload), queue, now))
            elif kind == b"batch":
                out.append(out[int(payload) - 1])
            else:
                admitted.append(job.id)
                out.append(Job(id=job.id, queue=queue, name=job.name, data=job.data,
                               state=_STATE[kind], opts=job.opts, created_at=now,
                               run_at=now + job.opts.delay))  # fmt: skip
        removed = reply[-1]
        if removed:
            self._unindex([r.decode() for r in removed])
        return out, admitted

    def _conn(self) -> Any:
        """This thread's own connection for the hot paths (no pool check-out per call)."""
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            conn = local.conn = self._r.connection_pool.make_connection()
            local.pid = os.getpid()
            self._conns.add(conn)
        return conn

    def _roundtrip(self, cmds: list[tuple[Any, ...]]) -> list[Any]:
        """Send ``cmds`` in one write and read every reply (errors returned, not raised).

        A pipeline without redis-py's pipeline object, on this thread's connection. A
        connection that fails mid-way is dropped (the next call reconnects) and nothing
        is resent: a lost reply must not apply a step twice.
        """
        conn = self._conn()
        try:
            if _pack is None:
                conn.send_packed_command(conn.pack_commands(cmds))
            else:  # hiredis packs the arguments in C (they are bytes, str and int only)
                conn.send_packed_command([b"".join([_pack(c) for c in cmds])])
            out: list[Any] = []
            for _ in cmds:
                try:
                    out.append(conn.read_response())
                except redis.exceptions.ResponseError as exc:
                    out.append(exc)
            return out
        except BaseException:
            conn.disconnect()
            raise

    def _scripted(self, cmds: list[tuple[Any, ...]]) -> list[Any]:
        """``_roundtrip`` that loads the library and resends the calls that found no
        function (such a call did nothing); raises the first other error."""
        res = self._roundtrip(cmds)
        redo = [i for i, r in enumerate(res) if missing(r)]
        if redo:
            SCRIPTS.load(self._r)
            for i, r in zip(redo, self._roundtrip([cmds[i] for i in redo]), strict=True):
                res[i] = r
        for r in res:
            if isinstance(r, Exception):
                raise r
        return res

    def _eval(self, script: Script, tag: str, args: list[Any]) -> Any:
        """One function call on one queue in one round trip (loading the library if missing)."""
        return self._pipelined(script, {tag: args})[0]

    def _pipelined(self, script: Script, calls: dict[str, list[Any]]) -> list[Any]:
        """Run one script over several queues in one round trip."""
        return self._scripted([script.command(tag, *a) for tag, a in calls.items()])

    def _refuse(self, queue: str, reply: list[Any]) -> None:
        code, *rest = (x.decode() if isinstance(x, bytes) else x for x in reply[1:])
        if code == "duplicate_id":
            raise DuplicateJob(f"a job with id {rest[0]!r} exists", job_id=rest[0])
        if code == "duplicate_key":
            raise DuplicateJob(f"unique key {rest[0]!r} is held by job {rest[1]}",
                               key=rest[0], job_id=rest[1])  # fmt: skip
        if code == "dep_self":
            raise DependencyError(f"job {rest[0]} depends on itself", job_id=rest[0])
        raise DependencyError(f"unknown dependency {rest[0]!r} of job {rest[1]}", job_id=rest[0])

    def _durable(self) -> None:
        """Wait for the configured replicas (WAIT) before acknowledging a durable add."""
        n = self.config.replicas
        if n <= 0:
            return
        with translated("durable add"):
            acked = int(self._r.execute_command("WAIT", n, self.config.wait_timeout))
        if acked < n:
            raise BackendError(f"redis: durable add: {acked} of {n} replicas acknowledged "
                               f"within {self.config.wait_timeout} ms (the job is admitted "
                               "on the primary)", replicas=acked)  # fmt: skip

    # -- leases ----------------------------------------------------------------------
    def lease(self, queue: str, n: int, lease_ms: int, owner: str = "") -> list[Lease]:
        _qn(queue)
        lease_args(n, lease_ms, owner)
        if n <= 0:
            return []
        token = os.urandom(12).hex()
        now = self._now()
        with translated("lease"):
            args = [now, n, lease_ms, token, owner]
            res = self._eval(SCRIPTS.lease, self.keys.queue(queue), args)
        until = now + lease_ms
        out = []
        for flat in res[1:]:
            job = job_from_hash(fields(flat), queue, now)
            out.append(Lease(job, token, job.attempts, until, owner))
        return out

    def wait(self, queue: str, timeout_ms: int) -> bool:
        _qn(queue)
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        with translated("wait"):
            first = self._r.zrange(self.keys.delayed(queue), 0, 0, withscores=True)
            if first:
                due_in = int(first[0][1]) - self.clock()
                if due_in <= 0:
                    return True
                deadline = min(deadline, time.monotonic() + due_in / 1000.0)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return bool(first)
                got = self._r.blpop([self.keys.wake(queue)], timeout=min(left, WAIT_SLICE_S))
                if got is not None:
                    return True

    def complete(self, lease: Lease, result: Any = None) -> Settle:
        return self.complete_many([(lease, result)])[0]

    def complete_many(self, items: Sequence[tuple[Lease, Any]]) -> list[Settle]:
        if not items:
            return []
        by_queue: dict[str, list[int]] = {}
        for i, (lease, _) in enumerate(items):
            by_queue.setdefault(lease.job.queue, []).append(i)
        args: dict[str, list[Any]] = {}
        for queue, idx in by_queue.items():
            a: list[Any] = []
            for i in idx:
                lease, result = items[i]
                blob = pack(result, "result", self.max_payload)
                a += (lease.job.id, lease.token, lease.attempt, blob)
            args[queue] = a
        now = self._now()
        with translated("complete"):
            replies = self._pipelined(SCRIPTS.complete, {
                self.keys.queue(q): [now, *a] for q, a in args.items()})  # fmt: skip
        out = [Settle.STALE] * len(items)
        removed: list[str] = []
        for (queue, idx), reply in zip(by_queue.items(), replies, strict=True):
            for i, ok in zip(idx, reply[:-2], strict=True):
                if ok:
                    out[i] = Settle.OK
            removed += [r.decode() for r in reply[-2]]
            if reply[-1]:
                self._deliver(queue)
        if removed:
            self._unindex(removed)
        return out

    def fail(self, lease: Lease, error: str | None, decision: FailDecision,
             duration_ms: int = 0) -> Settle:  # fmt: skip
        duration(duration_ms, "duration_ms")
        err = "" if error is None else storable(error)
        now = self._now()
        with translated("fail"):
            ok, removed = self._eval(SCRIPTS.fail, self.keys.queue(lease.job.queue), [
                now, lease.job.id, lease.token, lease.attempt, decision.kind, decision.run_at,
                decision.reason.value, err, max(int(duration_ms), 0)])  # fmt: skip
        if removed:
            self._unindex([r.decode() for r in removed])
        if ok and decision.kind == "dlq" and lease.job.opts.parent_id is not None:
            self._deliver(lease.job.queue)  # its flow policy, if it has one (common.lua)
        return Settle.OK if ok else Settle.STALE

    def extend(self, lease: Lease, lease_ms: int) -> Settle:
        duration(lease_ms, "lease_ms")
        with translated("extend"):
            args = [lease.job.id, lease.token, lease.attempt, self._now() + lease_ms]
            ok = self._eval(SCRIPTS.extend, self.keys.queue(lease.job.queue), args)
        return Settle.OK if ok else Settle.STALE

    # -- sweep -----------------------------------------------------------------------
    def sweep(self) -> SweepResult:
        with translated("sweep"):
            queues = sorted(q.decode() for q in self._r.smembers(self.keys.registry))
            if not queues:
                return SweepResult()
            now = self._now()
            tags = {self.keys.queue(q): [now] for q in queues}
            expired = self._pipelined(SCRIPTS.sweep_read, tags)
            apply: dict[str, list[Any]] = {}
            for tag, rows in zip(tags, expired, strict=True):
                a: list[Any] = [now]
                for jid, attempts, max_attempts, stalls, token in rows:
                    dead = decide_stall(int(attempts), int(max_attempts), int(stalls) + 1,
                                        self.max_stalls)  # fmt: skip
                    a += (jid, token, b"1" if dead else b"0")
                if len(a) > 1:
                    apply[tag] = a
            requeued = dead_n = 0
            if apply:
                for r, d in self._pipelined(SCRIPTS.sweep_apply, apply):
                    requeued += int(r)
                    dead_n += int(d)
            keep = [now, self.completed_max_age, self.completed_max_count]
            house = self._pipelined(SCRIPTS.house, dict.fromkeys(tags, keep))
        ttl = retried = dropped = 0
        removed: list[str] = []
        for queue, (t, r, d, gone, outbox) in zip(queues, house, strict=True):
            ttl, retried, dropped = ttl + int(t), retried + int(r), dropped + int(d)
            removed += [g.decode() for g in gone]
            if outbox:
                self._deliver(queue)
        if removed:
            self._unindex(removed)
        return SweepResult(requeued, dead_n, ttl, retried, dropped)
