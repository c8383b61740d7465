"""tick(): drain what is due in one call, then return. The serverless driver.

Sweep expired leases (once), fire this queue's due cron schedules, lease up
to ``max`` due jobs, run the handler, settle each outcome through the Worker's
retry/backoff/DLQ policy (:mod:`bunq.execution`), return a :class:`TickResult`.
No thread, timer or event loop outlives the call.

Leases come in chunks that finish well inside their lease: one job per slot
first, then as many as the observed job time fits in half of ``lease_ms``
(and before the deadline). A job's lease is extended before it starts if it
might not cover it; a job that could not finish before the deadline is given
back unstarted, its attempt not spent. No heartbeat runs while a handler does.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any, TypeVar

from .backends import resolve
from .backends.base import Backend, check_queue_name
from .errors import BackendError, BackendUnavailable, BunqError, ConfigError, ValidationError
from .execution import Handler, Outcome, is_async, run_async, run_sync, settle
from .job import FailureReason, Job, JobState, Lease, Settle
from .policy import FailDecision

log = logging.getLogger("bunq.tick")
T = TypeVar("T")
Clock = Callable[[], int]
LEASE_FILL = 0.5  # a chunk is sized to finish within this share of lease_ms
SETTLE_RETRIES = (0.01, 0.05)  # seconds between settle attempts on BackendUnavailable
DEPTH_STATES = (JobState.WAITING, JobState.DELAYED, JobState.ACTIVE, JobState.PAUSED)
GIVE_BACK = partial(FailDecision, "delay", reason=FailureReason.UNKNOWN)  # attempt not spent


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one tick did (``leased`` = succeeded + failed + stale + unsettled + released).

    ``failed``: the handler raised or timed out and that was recorded (retried or
    dead-lettered; ``moved_to_dlq`` is the dead part). ``stale``: the fence refused
    the settle, another worker owns the job (benign; the lease was too short).
    ``unsettled``: the backend refused the outcome after retries (alert: the job
    will run again). ``may_have_more``: leasing stopped before the queue ran dry
    (tick again). ``queue_depth``: waiting + delayed + active + paused, None when
    unknown. ``released``: leased, not started (deadline/stop), given back.
    ``stopped``: ``empty``, ``max``, ``deadline`` or ``stopped``.
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
    stopped: str = "empty"
    duration_ms: int = 0
    ticks: int = 1

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-ready plain data."""
        return asdict(self)

    def merge(self, later: TickResult) -> TickResult:
        """Add ``later``'s counters to these; flags and depth come from ``later``."""
        summed = {k: getattr(self, k) + getattr(later, k) for k in _SUMMED}
        return replace(later, **summed)


_SUMMED = ("leased", "succeeded", "failed", "stale", "unsettled", "moved_to_dlq", "released",
           "cron_fired", "swept", "duration_ms", "ticks")  # fmt: skip


class _Recent:
    """The largest of the last 16 observed durations (ms): a cautious estimate."""

    def __init__(self) -> None:
        self.values: deque[int] = deque(maxlen=16)
        self.value: int | None = None

    def add(self, ms: int) -> None:
        self.values.append(max(ms, 0))
        self.value = max(self.values)


class _Tick:
    """One tick's state; ``run()`` is the whole algorithm."""

    def __init__(self, queue: str, handler: Handler, backend: Backend, max_jobs: int,
                 lease_ms: int, concurrency: int, deadline_at: int | None, clock: Clock,
                 stop: Callable[[], bool] | None, housekeeping: bool) -> None:  # fmt: skip
        self.queue, self.handler, self.backend = queue, handler, backend
        self.max, self.lease_ms, self.c = max_jobs, lease_ms, concurrency
        self.deadline, self.clock, self.stop_fn = deadline_at, clock, stop
        self.housekeeping, self.is_async = housekeeping, is_async(handler)
        self.inline = concurrency == 1 and not self.is_async
        self.owner = f"tick:{os.uname().nodename}:{os.getpid()}"
        self.n: dict[str, int] = dict.fromkeys(_SUMMED[:-2], 0)
        self.stopped: str | None = None  # why leasing ended
        self.dry = False  # a lease came back short: the queue ran dry
        self.pending: deque[Lease] = deque()  # leased, not started
        self.inflight: dict[cf.Future[tuple[Outcome, int]], Lease] = {}
        self.done: list[tuple[Lease, Outcome]] = []  # finished, not settled
        self.done_expiry: int | None = None  # earliest lease expiry among `done`
        self.run_est, self.settle_est = _Recent(), _Recent()
        self.margin = min(1000, max(lease_ms // 10, 1))

    def run(self) -> TickResult:
        start = self.clock()
        if self.housekeeping:
            self._sweep()
            self._fire_cron()
        try:
            with self._executor() as submit:
                self._drive(submit)
        except BackendError as exc:
            exc.data["tick"] = self._result(start, None).to_dict()
            raise
        return self._result(start, self._depth())

    def _drive(self, submit: Callable[[Lease], cf.Future[tuple[Outcome, int]]] | None) -> None:
        try:
            while True:
                while len(self.inflight) < self.c:
                    lease = self._next()
                    if lease is None:
                        break
                    if submit is None:
                        self._record(lease, *self._run_one(lease))
                    else:
                        self.inflight[submit(lease)] = lease
                if not self.inflight:
                    break
                ready, _ = cf.wait(list(self.inflight), return_when=cf.FIRST_COMPLETED)
                for fut in ready:
                    self._record(self.inflight.pop(fut), *fut.result())
                self._flush()
        finally:
            if self.inflight:
                for fut in cf.as_completed(list(self.inflight)):
                    self._record(self.inflight.pop(fut), *fut.result())
            self._flush()
            self._release(list(self.pending))

    def _next(self) -> Lease | None:
        """Return the next lease to start, leasing a chunk when none is pending."""
        while self.stopped is None:
            if not self.pending and not self._refill():
                return None
            lease = self.pending[0]
            if not self._may_start(lease.job):
                return None
            self.pending.popleft()
            if self.inline and self.done_expiry is not None and \
                    self.done_expiry - self.clock() < self._need(lease.job) + self.margin:
                self._flush()  # finished jobs' leases would lapse while this one runs
            covered = self._cover(lease)
            if covered is not None:
                return covered
        return None

    def _refill(self) -> bool:
        self._flush()
        remaining = self.max - self.n["leased"]
        if self.dry or remaining <= 0:
            self.stopped = "empty" if self.dry else "max"
            return False
        now = self.clock()
        if not self._may_start(None):
            return False
        n = min(self._chunk(now), remaining)
        leases = self.backend.lease(self.queue, n, self.lease_ms, self.owner)
        self.n["leased"] += len(leases)
        self.dry = len(leases) < n
        self.pending.extend(leases)
        if not leases:
            self.stopped = "empty"
        return bool(leases)

    def _chunk(self, now: int) -> int:
        free = self.c - len(self.inflight)
        est = self.run_est.value
        if est is None:
            return max(free, 1)
        per_slot = max(1, int(self.lease_ms * LEASE_FILL) // max(est, 1))
        n = max(free, self.c * per_slot - len(self.inflight))
        if self.deadline is not None:
            room = self.deadline - now - (self.settle_est.value or 0)
            n = min(n, self.c * max(1, room // max(est, 1)))
        return max(n, 1)

    def _need(self, job: Job | None) -> int:
        """Time (ms) to budget for running and settling ``job`` (None: a typical job)."""
        timeout = job.opts.timeout if job is not None else None
        run = timeout if timeout is not None else (self.run_est.value or 0)
        return run + (self.settle_est.value or 0)

    def _may_start(self, job: Job | None) -> bool:
        if self.stop_fn is not None and self.stop_fn():
            self.stopped = "stopped"
        elif self.deadline is not None and self.clock() + self._need(job) >= self.deadline:
            self.stopped = "deadline"
        return self.stopped is None

    def _cover(self, lease: Lease) -> Lease | None:
        """Extend ``lease`` if it might lapse before the job ends; None if it was lost."""
        now = self.clock()
        need = self._need(lease.job) + self.margin
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

    def _run_one(self, lease: Lease) -> tuple[Outcome, int]:
        t0, o = self.clock(), run_sync(self.handler, lease.job)
        limit = lease.job.opts.timeout  # a function that ran past its timeout failed: timeout
        if limit is not None and not o.timed_out and o.duration_ms > limit:
            err = TimeoutError(f"ran {o.duration_ms} ms, past its timeout of {limit} ms")
            o = Outcome(False, error=err, duration_ms=o.duration_ms, timed_out=True)
        return o, self.clock() - t0

    async def _run_one_async(self, lease: Lease) -> tuple[Outcome, int]:
        t0 = self.clock()
        return await run_async(self.handler, lease.job), self.clock() - t0

    def _record(self, lease: Lease, outcome: Outcome, took: int) -> None:
        self.run_est.add(took)
        self.done.append((lease, outcome))
        if self.done_expiry is None or lease.expires_at < self.done_expiry:
            self.done_expiry = lease.expires_at

    @contextmanager
    def _executor(self) -> Iterator[Callable[[Lease], cf.Future[tuple[Outcome, int]]] | None]:
        """Yield how to start a job off this thread (None: run inline); join it after."""
        if self.inline:
            yield None
        elif not self.is_async:
            with cf.ThreadPoolExecutor(self.c, thread_name_prefix="bunq-tick") as pool:
                yield lambda lease: pool.submit(self._run_one, lease)
        else:
            import asyncio
            import threading

            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="bunq-tick-loop")
            thread.start()
            try:
                yield lambda ls: asyncio.run_coroutine_threadsafe(self._run_one_async(ls), loop)
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join()
                loop.close()

    def _flush(self) -> None:
        done, self.done, self.done_expiry = self.done, [], None
        if not done:
            return
        t0 = self.clock()
        oks = [(lease, o) for lease, o in done if o.ok]
        fails = [(lease, o) for lease, o in done if not o.ok]
        if oks:
            fails += self._complete(oks)
        for lease, o in fails:
            s = self._retrying(partial(settle, self.backend, lease, o))
            if s is None:
                self.n["unsettled"] += 1
            elif s.answer is Settle.STALE:
                self.n["stale"] += 1
            else:
                self.n["failed"] += 1
                self.n["moved_to_dlq"] += int(s.dead)
        self.settle_est.add(self.clock() - t0)

    def _complete(self, oks: list[tuple[Lease, Outcome]]) -> list[tuple[Lease, Outcome]]:
        """Record completions in one transaction; return those whose result was refused."""
        refused: list[tuple[Lease, Outcome]] = []
        answers: list[Settle | None] = []
        try:
            batch = self._retrying(
                lambda: self.backend.complete_many([(lease, o.result) for lease, o in oks]))
            answers = [None] * len(oks) if batch is None else list(batch)
        except ValidationError:  # a result that cannot be stored: settle one by one
            for lease, o in oks:
                try:
                    answers.append(self._retrying(partial(self.backend.complete, lease, o.result)))
                except ValidationError as exc:  # settled as a failure by the caller
                    refused.append((lease, Outcome(False, error=exc, duration_ms=o.duration_ms)))
        for answer in answers:
            if answer is None:
                self.n["unsettled"] += 1
            elif answer is Settle.OK:
                self.n["succeeded"] += 1
            else:
                self.n["stale"] += 1
        return refused

    def _retrying(self, fn: Callable[[], T]) -> T | None:
        """Call ``fn``; retry BackendUnavailable briefly; None if it never succeeded."""
        for pause in (*SETTLE_RETRIES, None):
            try:
                return fn()
            except BackendError as exc:
                if pause is None or not isinstance(exc, BackendUnavailable):
                    log.error("settle failed: %s", exc)
                    return None
                time.sleep(pause)
        return None  # pragma: no cover

    def _release(self, leases: list[Lease]) -> None:
        """Give back leased-but-unstarted jobs without spending their attempt."""
        self.pending.clear()
        now = self.clock()
        for lease in leases:
            try:
                answer = self.backend.fail(lease, None, GIVE_BACK(now))
            except BackendError as exc:  # left to expire: the sweep recovers it
                log.warning("could not give back %s: %s", lease.id, exc)
                answer = Settle.OK
            self.n["stale" if answer is Settle.STALE else "released"] += 1

    def _sweep(self) -> None:
        try:
            r = self.backend.sweep()
            self.n["swept"] = r.requeued + r.dead
        except BunqError as exc:  # BackendError, or UnsupportedError (SQS)
            log.warning("sweep skipped: %s", exc)

    def _fire_cron(self) -> None:
        from .cron import Scheduler

        try:
            self.n["cron_fired"] = len(Scheduler(self.backend).fire_due(self.clock(), self.queue))
        except (BunqError, ValueError) as exc:
            log.warning("cron schedules of %s not fired: %s", self.queue, exc)

    def _depth(self) -> int | None:
        try:
            counts = self.backend.counts(self.queue)
        except BunqError as exc:  # BackendError, UnsupportedError
            log.warning("queue depth unknown: %s", exc)
            return None
        return sum(counts.get(s, 0) for s in DEPTH_STATES)

    def _result(self, start: int, depth: int | None) -> TickResult:
        stopped = self.stopped or "empty"
        return TickResult(**self.n, may_have_more=stopped != "empty", queue_depth=depth,
                          stopped=stopped, duration_ms=self.clock() - start)  # fmt: skip


def tick(queue: str, handler: Handler, backend: Backend | str | None = None, *, max: int = 10,
         lease_ms: int = 30_000, concurrency: int = 1, deadline_ms: int | None = None,
         deadline_at: int | None = None, clock: Clock | None = None,
         stop: Callable[[], bool] | None = None,
         housekeeping: bool = True) -> TickResult:  # fmt: skip
    """Drain up to ``max`` due jobs of ``queue`` once; return what happened.

    :param handler: ``handler(job)``: a function or a coroutine function.
    :param backend: a Backend (shared) or a URL (opened and closed here); default
        ``BUNQ_BACKEND``.
    :param max: most jobs leased in this call; ``may_have_more`` says to call again.
    :param lease_ms: lease per job; must cover one job (no heartbeat while it runs).
    :param concurrency: jobs at once (a thread pool for functions, one event loop
        for coroutines; joined before returning).
    :param deadline_ms: budget in ms from now: no job starts that could not finish
        before it (by its ``timeout``, else the longest recent job).
    :param deadline_at: the same as an absolute epoch-ms time of ``clock``.
    :param clock: epoch-ms clock for deadlines and timings (default the backend's).
    :param stop: polled before each job; True stops leasing (e.g. after SIGTERM).
    :param housekeeping: first sweep expired leases and fire the queue's cron runs.
    :raises ConfigError: bad arguments.
    :raises BackendError: leasing or extending failed; ``err.data["tick"]`` holds the
        counters so far. Settle failures do not raise: they count as ``unsettled``.
    """
    check_queue_name(queue)
    if not callable(handler):
        raise ConfigError("handler must be callable: handler(job) -> result")
    for name, v in (("max", max), ("lease_ms", lease_ms), ("concurrency", concurrency)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    if deadline_ms is not None and deadline_at is not None:
        raise ConfigError("give deadline_ms (a budget) or deadline_at (a time), not both")
    be, owned = resolve(backend)
    try:
        now_fn = clock or be.clock
        if deadline_ms is not None:
            deadline_at = now_fn() + int(deadline_ms)
        return _Tick(queue, handler, be, max, lease_ms, concurrency, deadline_at, now_fn, stop,
                     housekeeping).run()  # fmt: skip
    finally:
        if owned:
            be.close()


def tick_loop(queue: str, handler: Handler, backend: Backend | str | None = None, *,
              deadline_ms: int | None = None, clock: Clock | None = None,
              **kw: Any) -> TickResult:  # fmt: skip
    """Tick while each tick fills its batch (``stopped == "max"``); merge the results.

    Takes :func:`tick`'s arguments; the deadline spans the whole loop and
    housekeeping runs on the first tick only.
    """
    be, owned = resolve(backend)
    try:
        kw["clock"] = clock or be.clock
        if deadline_ms is not None:
            kw["deadline_at"] = kw["clock"]() + deadline_ms
        total = tick(queue, handler, be, **kw)
        while total.stopped == "max":
            total = total.merge(tick(queue, handler, be, **{**kw, "housekeeping": False}))
        return total
    finally:
        if owned:
            be.close()
