"""tick(): drain what is due in one call, then return. The serverless driver.

Sweep expired leases, fire the queue's due cron runs, lease up to ``max`` jobs,
run them, settle through the Worker's retry/DLQ policy (:mod:`bunq.execution`).
Leases come in chunks that fit half a lease (one job per slot first, then what
the observed job time and the deadline allow); a lease is extended before its
job starts if needed; a job that could not finish before the deadline is given
back unstarted. No thread, timer or loop outlives the call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, TypeVar

from .backends import resolve
from .backends.base import Backend, check_queue_name
from .backends.eventlog import publish, wants
from .errors import BackendError, BunqError, ConfigError
from .execution import Executor, Handler, JobContext, Outcome, give_back, settle_batch
from .execution.keepalive import Keepalive
from .execution.observe import Observer
from .job import Job, JobState, Lease, Settle, attach_all
from .jobevents import EventKind, active_events
from .metrics import JobMetrics
from .metrics import resolve as resolve_metrics
from .queue import Queue

log = logging.getLogger("bunq.tick")
T = TypeVar("T")
Clock = Callable[[], int]
Stopped = Literal["empty", "max", "deadline", "stopped"]  # why leasing ended
LEASE_FILL = 0.5  # a chunk is sized to finish within this share of lease_ms
DEPTH_STATES = (JobState.WAITING, JobState.DELAYED, JobState.ACTIVE, JobState.PAUSED)
SWEEP_EVERY_MS = 1000  # a backend is swept by tick() at most this often (its clock)
_last_sweep: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one tick did; ``leased`` = succeeded + failed + stale + unsettled + released.

    ``failed``: raised or timed out (``moved_to_dlq``: the dead part). ``stale``: the
    fence refused the settle (lease too short; benign). ``unsettled``: the backend
    refused the outcome (alert: the job reruns). ``may_have_more``: stopped before the
    queue ran dry. ``queue_depth``: waiting+delayed+active+paused, None if unknown.
    ``released``: leased, given back unstarted. ``stopped``: empty|max|deadline|stopped.
    """

    leased: int = 0
    succeeded: int = 0
    failed: int = 0
    stale: int = 0
    unsettled: int = 0
    moved_to_dlq: int = 0
    may_have_more: bool = False
    queue_depth: int | None = None
    released: int = 0
    cron_fired: int = 0
    swept: int = 0
    stopped: Stopped = "empty"
    duration_ms: int = 0
    ticks: int = 1

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-ready plain data."""
        return asdict(self)

    def merge(self, later: TickResult) -> TickResult:
        """Add ``later``'s counters to these; flags and depth come from ``later``."""
        return replace(later, **{k: getattr(self, k) + getattr(later, k) for k in _SUMMED})


_SUMMED = ("leased", "succeeded", "failed", "stale", "unsettled", "moved_to_dlq", "released",
           "cron_fired", "swept", "duration_ms", "ticks")  # fmt: skip


class _Tick:
    """One tick's state; ``run()`` is the whole algorithm."""

    def __init__(self, queue: str, handler: Handler, backend: Backend, max_jobs: int,
                 lease_ms: int, concurrency: int, deadline_at: int | None, clock: Clock,
                 stop: Callable[[], bool] | None,
                 observer: Observer | None = None) -> None:  # fmt: skip
        self.queue, self.handler, self.backend = queue, handler, backend
        self.handle = Queue(queue, backend, metrics=False)  # what leased jobs carry
        self.observer = observer
        self.max, self.lease_ms, self.c = max_jobs, lease_ms, concurrency
        self.deadline, self.clock, self.stop_fn = deadline_at, clock, stop
        self.owner = f"tick:{os.uname().nodename}:{os.getpid()}"
        self.n: dict[str, int] = dict.fromkeys(_SUMMED[:-2], 0)
        self.stopped: Stopped | None = None
        self.dry = False  # a lease came back short: the queue ran dry
        self.pending: deque[Lease] = deque()  # leased, not started
        self.inflight: dict[int, Lease] = {}  # by id(lease): what ex.done hands back
        self.done: list[tuple[Lease, Outcome]] = []  # finished, not settled
        self.done_expiry: int | None = None  # earliest lease expiry among `done`
        self.runs: deque[int] = deque(maxlen=16)  # recent job and settle times (ms); the
        self.settles: deque[int] = deque(maxlen=16)  # estimates (est_*) are their maxima
        self.est_run = self.est_settle = 0
        self.margin = min(1000, max(lease_ms // 10, 1))
        self.keep = Keepalive(backend, queue, lease_ms)  # extends running jobs' leases

    def run(self) -> TickResult:
        start = self.clock()
        try:
            with self.keep, Executor(self.handler, self.c, clock=self.clock,
                                     name="bunq-tick") as ex:  # fmt: skip
                self._drive(ex)
        except BackendError as exc:
            exc.data["tick"] = self._result(start).to_dict()
            raise
        return self._result(start)

    def _drive(self, ex: Executor) -> None:
        try:
            while True:
                while len(self.inflight) < self.c:
                    lease = self._next()
                    if lease is None:
                        break
                    ctx = JobContext(lease.job, self.backend, lease, self.lease_ms)
                    self.keep.started(lease, ctx)
                    if ex.inline:
                        self._record(lease, ex.run(lease.job, ctx))
                    else:
                        self.inflight[id(lease)] = lease
                        ex.start([(lease, lease.job, ctx)])
                if not self.inflight:
                    break
                self._collect(ex.done.get())  # block until one finishes
                with contextlib.suppress(queue.Empty):
                    while True:
                        self._collect(ex.done.get_nowait())
                self._flush()
        finally:
            while self.inflight:
                self._collect(ex.done.get())
            self._flush()
            self._release()

    def _collect(self, item: tuple[Lease, Outcome]) -> None:
        self._record(self.inflight.pop(id(item[0])), item[1])

    def _next(self) -> Lease | None:
        """Return the next lease to start, leasing a chunk when none is pending."""
        while self.stopped is None:
            self._guard()
            if not self.pending and not self._refill():
                return None
            if not self._may_start(self.pending[0].job):
                return None
            covered = self._cover(self.pending.popleft())
            if covered is not None:
                return covered
        return None

    def _guard(self) -> None:
        """Before a job starts: settle finished jobs whose leases would lapse while it
        runs, give back pending jobs that slower-than-sized jobs leave no time for."""
        now, est = self.clock(), max(self.est_run, 1)
        need = self._need(self.pending[0].job) if self.pending else est
        if self.done_expiry is not None and self.done_expiry - now < need + self.margin:
            self._flush()
        keep = max(self.c * ((self.pending[-1].expires_at - now - self.margin) // est), 1) \
            if len(self.pending) > 1 and self.runs else len(self.pending)  # fmt: skip
        if keep < len(self.pending):
            self._release([self.pending.pop() for _ in range(len(self.pending) - keep)])
            self.dry = False  # they are due again: the queue has not run dry

    def _refill(self) -> bool:
        self._flush()
        remaining = self.max - self.n["leased"] + self.n["released"]
        if self.dry or remaining <= 0:
            self.stopped = "empty" if self.dry else "max"
        if not self._may_start(None):
            return False
        n = min(self._chunk(self.clock()), remaining)
        leases = self.backend.lease(self.queue, n, self.lease_ms, self.owner)
        self.n["leased"] += len(leases)
        attach_all([lease.job for lease in leases], self.handle)
        if leases and wants(self.backend, EventKind.ACTIVE, self.queue):
            publish(self.backend, active_events(leases, self.backend.clock()))
        self.dry = len(leases) < n
        self.pending.extend(leases)
        self.stopped = None if leases else "empty"
        return bool(leases)

    def _chunk(self, now: int) -> int:
        free = self.c - len(self.inflight)
        if not self.runs:
            return max(free, 1)
        est = max(self.est_run, 1)
        n = max(free, self.c * max(1, int(self.lease_ms * LEASE_FILL) // est) - len(self.inflight))
        if self.deadline is not None:
            room = self.deadline - now - self.est_settle
            n = min(n, self.c * max(1, room // est))
        return max(n, 1)

    def _need(self, job: Job | None) -> int:  # ms to run and settle job (None: a typical one)
        t = job.opts.timeout if job is not None else None
        return (self.est_run if t is None else t) + self.est_settle

    def _may_start(self, job: Job | None) -> bool:
        if self.stopped is not None:
            return False
        if self.stop_fn is not None and self.stop_fn():
            self.stopped = "stopped"
        elif self.deadline is not None and self.clock() + self._need(job) >= self.deadline:
            self.stopped = "deadline"
        return self.stopped is None

    def _cover(self, lease: Lease) -> Lease | None:
        """Extend ``lease`` if it might lapse before the job ends; None if it was lost."""
        now, need = self.clock(), self._need(lease.job) + self.margin
        if lease.expires_at - now >= need:
            return lease
        ms = max(self.lease_ms, need)
        try:
            answer = self.backend.extend(lease, ms)
        except BackendError:
            self.pending.appendleft(lease)  # given back (or left to expire) by _release
            raise
        if answer is Settle.STALE:
            self.n["stale"] += 1
            return None
        return replace(lease, expires_at=now + ms)

    def _record(self, lease: Lease, outcome: Outcome) -> None:
        lease = self.keep.finished(lease)  # with the expiry the keepalive gave it
        self.runs.append(max(outcome.took, 0))
        self.est_run = max(self.runs)
        self.done.append((lease, outcome))
        self.done_expiry = min(self.done_expiry or lease.expires_at, lease.expires_at)

    def _flush(self) -> None:
        """Settle finished jobs (one transaction for the completions); count how it went."""
        done, self.done, self.done_expiry = self.done, [], None
        if not done:
            return
        t0 = self.clock()
        for s in settle_batch(self.backend, done, self.observer):
            self.n[s.kind] += 1
            if s.dead:
                self.n["moved_to_dlq"] += 1
        self.settles.append(max(self.clock() - t0, 0))
        self.est_settle = max(self.settles)

    def _release(self, leases: Iterable[Lease] | None = None) -> None:
        """Give back leased-but-unstarted jobs (default: all pending), attempts unspent."""
        if leases is None:
            leases, self.pending = self.pending, deque()
        for answer in give_back(self.backend, leases, observer=self.observer):
            self.n["stale" if answer is Settle.STALE else "released"] += 1

    def _result(self, start: int) -> TickResult:
        s = self.stopped or "empty"
        return TickResult(**self.n, may_have_more=s != "empty", stopped=s,
                          duration_ms=self.clock() - start)  # fmt: skip


def _safely(what: str, fn: Callable[[], T], default: T) -> T:
    """Housekeeping and depth never stop a tick: log the failure, return ``default``."""
    try:
        return fn()
    except (BunqError, ValueError) as exc:  # BackendError, UnsupportedError (SQS), a bad record
        log.warning("%s skipped: %s", what, exc)
        return default


def _housekeeping(backend: Backend, queue: str, now: int) -> dict[str, Any]:
    """Sweep expired leases (every queue of the backend) and fire this queue's cron runs."""
    from .cron import Scheduler

    swept = _safely("sweep", backend.sweep, None) if _sweep_due(backend, now) else None
    fired = _safely("cron", lambda: len(Scheduler(backend).fire_due(now, queue)), 0)
    return {"swept": swept.requeued + swept.dead if swept else 0, "cron_fired": fired}


def _sweep_due(backend: Backend, now: int) -> bool:
    """Whether this backend's last sweep by tick() is ``SWEEP_EVERY_MS`` old (or never ran).

    A loop of ticks sweeps once a second, not once per tick: the sweep recovers
    leases that expired, so sweeping more often than leases expire buys nothing.
    """
    try:
        last = _last_sweep.get(backend)
        if last is not None and 0 <= now - last < SWEEP_EVERY_MS:
            return False
        _last_sweep[backend] = now
    except TypeError:  # not weak-referenceable: sweep every time
        pass
    return True


def tick(queue: str, handler: Handler, backend: Backend | str | None = None, *, max: int = 10,
         lease_ms: int = 30_000, concurrency: int = 1, deadline_ms: int | None = None,
         deadline_at: int | None = None, clock: Clock | None = None,
         stop: Callable[[], bool] | None = None, loop_while_more: bool = False,
         housekeeping: bool = True, progress: Callable[[TickResult], None] | None = None,
         metrics: JobMetrics | bool | None = None) -> TickResult:  # fmt: skip
    """Drain up to ``max`` due jobs of ``queue`` once; return what happened.

    :param handler: ``handler(job)`` or ``handler(job, ctx)`` (a
        :class:`~bunq.execution.JobContext`): a function or a coroutine function.
    :param backend: a Backend, or a URL opened and closed here (default BUNQ_BACKEND).
    :param lease_ms: lease per job; a running job's lease is extended every third of
        it (a keepalive thread while jobs run, joined before the tick returns).
    :param concurrency: jobs at once (threads for functions, one event loop for
        coroutines; both joined before returning).
    :param deadline_ms: budget in ms from now (``deadline_at``: an epoch-ms time of
        ``clock``): no job starts that could not finish before it (by its
        ``timeout``, else the longest recent job).
    :param clock: epoch-ms clock for deadlines and timings (default the backend's).
    :param stop: polled before each job; True stops leasing (e.g. after SIGTERM).
    :param loop_while_more: tick again while a tick fills its batch, within the
        deadline; results are merged. ``housekeeping``: sweep and fire cron first.
    :param progress: called between the ticks of a loop with the counters so far.
    :param metrics: where the tick is counted (:mod:`bunq.metrics`): the process's
        registry (default), another :class:`~bunq.metrics.JobMetrics`, or False.
    :raises BackendError: lease or extend failed (``err.data["tick"]``: counters so
        far). Settle failures do not raise: they count as ``unsettled``.
    """
    check_queue_name(queue)
    if not callable(handler):
        raise ConfigError("handler must be callable: handler(job) -> result")
    for name, v in (("max", max), ("lease_ms", lease_ms), ("concurrency", concurrency)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    if deadline_ms is not None and deadline_at is not None:
        raise ConfigError("give deadline_ms (a budget) or deadline_at (a time), not both")
    observer = resolve_metrics(metrics)
    be, owned = resolve(backend)
    try:
        now_fn = clock or be.clock
        if deadline_ms is not None:
            deadline_at = now_fn() + int(deadline_ms)
        done = _housekeeping(be, queue, now_fn()) if housekeeping else {}
        args = (queue, handler, be, max, lease_ms, concurrency, deadline_at, now_fn, stop,
                observer)  # fmt: skip
        result = _Tick(*args).run()
        while loop_while_more and result.stopped == "max":
            if progress is not None:
                progress(result)
            result = result.merge(_Tick(*args).run())
        counts = _safely("queue depth", lambda: be.counts(queue), None)
        depth = None if counts is None else sum(counts.get(s, 0) for s in DEPTH_STATES)
        result = replace(result, queue_depth=depth, **done)
        if observer is not None:
            observer.ticked(queue, result.duration_ms, depth)
        return result
    finally:
        if owned:
            be.close()


def load_handler(path: str | None) -> Handler:
    """Import the handler ``module:function``; ConfigError says what is wrong and what to set."""
    import importlib

    mod_name, _, attr = (path or "").partition(":")
    if not mod_name or not attr:
        raise ConfigError(f"handler {path!r} must look like module:function "
                          "(e.g. myapp.jobs:handle); set --handler or BUNQ_HANDLER")  # fmt: skip
    try:  # the user's module: report what broke, do not crash
        obj: Any = importlib.import_module(mod_name)
    except Exception as exc:
        raise ConfigError(f"cannot import {mod_name!r}: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    if not callable(obj):
        raise ConfigError(f"{path!r}: {mod_name} has no callable {attr!r}")
    return obj  # type: ignore[no-any-return]
