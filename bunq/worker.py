"""Worker: the resident driver that leases, runs and settles jobs.

Sync handlers run inline when ``concurrency == 1`` (no thread hop per job)
and on a thread pool otherwise; coroutine handlers run on one event-loop
thread, up to ``concurrency`` at a time (over the memory engine, the worker's
own thread: it leases and settles between calls, :class:`~bunq.execution.OnLoop`;
a sync one's threads lease and settle themselves, :class:`~bunq.execution.Crew`).
A heartbeat thread extends every held lease at a third of its length and fails
attempts that outlive ``opts.timeout`` (reason timeout). Completions are settled
in batches.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from .backends import resolve
from .backends.base import Backend, Capability, check_queue_name
from .backends.eventlog import publish, wants
from .errors import BackendError, ConfigError
from .execution import (
    CANCEL_POLL_S,
    SUCCEEDED,
    Crew,
    Executor,
    Handler,
    JobContext,
    OnLoop,
    Outcome,
    Settled,
    give_back,
    is_async,
    poll_cancels,
    prune_cancels,
    settle_batch,
    settle_failure,
)
from .job import Lease, Settle, attach_all
from .jobevents import EventKind, active_events
from .metrics import JobMetrics
from .metrics import resolve as resolve_metrics
from .queue import Queue
from .validate import MAX_DURATION_MS, duration, integer, text

log = logging.getLogger("bunq.worker")


class _Held:
    """Leases this worker holds: one :class:`JobContext` per lease, which carries the
    lease and when the run started (``ctx.started``): one entry to add and one to drop
    per job. Keyed by the lease object, not the job id: a job that timed out here (its
    handler still running) may be retried and leased here again, and the two runs are
    two entries (the held lease object keeps its ``id()`` unique while it is held)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[int, JobContext] = {}
        self.timed_out: set[int] = set()  # leases the heartbeat failed (timeout)


MAX_CONCURRENCY = 100_000  # jobs at once, or per lease call


class Worker:
    """Process jobs of one queue until closed.

    :param queue: queue name.
    :param handler: ``handler(job)`` returning the result, or a coroutine function.
    :param backend: a Backend or a URL (default ``BUNQ_BACKEND``).
    :param concurrency: jobs running at once.
    :param lease_ms: lease length; the heartbeat extends it every third.
    :param batch: most jobs leased per call (default ``max(concurrency, 50)``).
    :param sweep_interval_ms: how often this worker recovers expired leases.
    :param health_file: touched (at most once a second) whenever the worker leases or
        extends its leases: a liveness probe checks that it is recent (docs/operations.md).
    :param metrics: where settled jobs are counted (:mod:`bunq.metrics`): the process's
        registry (default), another :class:`~bunq.metrics.JobMetrics`, or False for none.
    """

    def __init__(self, queue: str, handler: Handler, backend: Backend | str | None = None, *,
                 concurrency: int = 1, lease_ms: int = 30_000, batch: int | None = None,
                 idle_wait_ms: int = 1000, sweep_interval_ms: int = 5000,
                 owner: str | None = None, health_file: str | None = None,
                 metrics: JobMetrics | bool | None = None) -> None:  # fmt: skip
        if not callable(handler):
            raise ConfigError("handler must be callable")
        integer(concurrency, "concurrency", 1, MAX_CONCURRENCY, ConfigError)
        integer(lease_ms, "lease_ms", 100, MAX_DURATION_MS, ConfigError)
        if batch is not None:
            integer(batch, "batch", 1, MAX_CONCURRENCY, ConfigError)
        duration(idle_wait_ms, "idle_wait_ms", ConfigError)
        integer(sweep_interval_ms, "sweep_interval_ms", 1, MAX_DURATION_MS, ConfigError)
        if owner is not None:
            text(owner, "owner", 512, ConfigError)
        self.queue = check_queue_name(queue)
        self.handler = handler
        self.backend, self._owned = resolve(backend)
        self._handle = Queue(self.queue, self.backend, metrics=False)  # what leased jobs carry
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.batch = batch or max(concurrency, 50)
        self.idle_wait_ms = idle_wait_ms
        self.sweep_interval_ms = sweep_interval_ms
        self.owner = owner or f"{os.uname().nodename}:{os.getpid()}:{id(self):x}"
        self.processed = 0
        self.failed = 0
        self._stop = threading.Event()
        self._done = threading.Event()
        self._held = _Held()
        self._thread: threading.Thread | None = None
        self._next_sweep = 0.0
        self.health_file = health_file
        self._touched = 0.0
        self.metrics = resolve_metrics(metrics)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> Worker:
        """Run in a background thread; return self."""
        self._thread = threading.Thread(target=self._run, name=f"bunq-worker-{self.queue}",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        return self

    def run(self) -> None:
        """Run in this thread until close() or SIGTERM/SIGINT (graceful)."""
        restore: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                restore[sig] = signal.signal(sig, self._on_signal)
        try:
            self._run()
        finally:
            for signum, old in restore.items():
                signal.signal(signum, old)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("signal %s: finishing in-flight jobs", signum)
        self._stop.set()

    def close(self, timeout: float = 30.0) -> None:
        """Stop leasing, finish in-flight jobs (up to ``timeout`` s), release the rest."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._owned:
            self.backend.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the loop ----------------------------------------------------------------------
    def _run(self) -> None:
        beat = threading.Thread(target=self._heartbeat, name="bunq-heartbeat", daemon=True)
        beat.start()
        # A coroutine handler over the memory engine (whose calls never wait on I/O): the
        # loop runs on this thread, which leases and settles in the loop's callbacks.
        memory = self.backend.kind == "memory"
        on_loop = memory and is_async(self.handler)
        # A sync handler over the memory engine: its threads lease and settle themselves.
        crew = memory and not on_loop
        ex = Executor(self.handler, self.concurrency, loop_thread=not on_loop, pool=not crew)
        try:
            if ex.inline:
                self._loop_inline(ex)
            elif on_loop:
                self._loop_on_loop(ex)
            elif crew:
                self._loop_crew(ex)
            else:
                self._loop_concurrent(ex)
        finally:
            self._done.set()
            beat.join(2)
            ex.close()

    def _alive(self) -> None:
        """Touch the health file: this worker's loop (or heartbeat) is making progress."""
        now = time.monotonic()
        if self.health_file is None or now - self._touched < 1.0:
            return
        self._touched = now
        try:
            with open(self.health_file, "a"):
                os.utime(self.health_file)
        except OSError as exc:
            log.warning("cannot touch the health file %s: %s", self.health_file, exc)

    def _lease(self, n: int) -> list[JobContext]:
        """Lease up to ``n`` jobs; one held context (with its lease) per job."""
        self._alive()
        self._maybe_sweep()
        backend, lease_ms, handle = self.backend, self.lease_ms, self._handle
        try:
            leases = backend.lease(self.queue, n, lease_ms, self.owner)
        except BackendError as exc:
            log.warning("lease failed (%s); retrying", exc)
            self._stop.wait(0.5)
            return []
        if not leases:
            return []
        # attach: job.log(), job.get_state()... in the handler
        attach_all([lease.job for lease in leases], handle)  # (one call per batch)
        ctxs = [JobContext(lease.job, backend, lease, lease_ms) for lease in leases]
        with self._held.lock:
            self._held.runs.update(zip(map(id, leases), ctxs, strict=True))  # (no loop)
        if wants(backend, EventKind.ACTIVE, self.queue):
            publish(backend, active_events(leases, backend.clock()))
        return ctxs

    def _idle(self) -> None:
        try:
            self.backend.wait(self.queue, min(self.idle_wait_ms, 250))
        except BackendError:
            self._stop.wait(0.5)

    def _loop_inline(self, ex: Executor) -> None:
        while not self._stop.is_set():
            ctxs = self._lease(self.batch)
            if not ctxs:
                self._idle()
                continue
            done: list[tuple[Lease, Outcome]] = []
            for i, ctx in enumerate(ctxs):
                if self._stop.is_set():
                    self._return_unstarted([c.lease for c in ctxs[i:]])  # type: ignore[misc]
                    break
                ctx.started = time.monotonic()
                done.append((ctx.lease, ex.run(ctx.job, ctx)))  # type: ignore[arg-type]
            self._settle(done)

    def _loop_concurrent(self, ex: Executor) -> None:
        inflight = 0  # started, outcome not yet collected from ex.done
        done = ex.done
        while not (self._stop.is_set() and not inflight):
            free = self.concurrency - inflight
            leasing = free > 0 and not self._stop.is_set()
            ctxs = self._lease(min(free, self.batch)) if leasing else []
            if ctxs:
                now = time.monotonic()
                for ctx in ctxs:
                    ctx.started = now
                inflight += len(ctxs)
                ex.start([(ctx, ctx.job, ctx) for ctx in ctxs])  # key: the context itself
            if not inflight:
                self._idle()
                continue
            if inflight >= self.concurrency:
                wait_s: float | None = None  # every slot busy: block until one frees
            elif not ctxs:
                wait_s = 0.05  # nothing to lease now: collect what finishes, look again
            else:
                wait_s = 0.0  # slots left: settle what is done, then lease more
            ready: list[tuple[Lease, Outcome]] = []
            try:
                ctx, o = done.get(timeout=wait_s) if wait_s != 0.0 else done.get_nowait()
                ready.append((ctx.lease, o))
                while True:
                    ctx, o = done.get_nowait()
                    ready.append((ctx.lease, o))
            except queue.Empty:
                pass
            if not ready:
                continue
            inflight -= len(ready)
            self._settle(ready)

    def _loop_on_loop(self, ex: Executor) -> None:
        """:meth:`_loop_concurrent` as callbacks of the handler's loop, on this thread."""
        OnLoop(ex, self.concurrency, self.batch, self._stop, self._lease, self._settle,
               self._idle).run()  # fmt: skip

    def _loop_crew(self, ex: Executor) -> None:
        """:meth:`_loop_concurrent` done by the handler's own threads (:class:`Crew`)."""
        Crew(ex, self.concurrency, self.batch, self._stop, self._lease, self._settle,
             self._idle).run()  # fmt: skip

    def _settle(self, done: list[tuple[Lease, Outcome]]) -> None:
        held = self._held
        if held.timed_out:  # the heartbeat settled these already (failed, timeout)
            with held.lock:
                done = [(lease, o) for lease, o in done if id(lease) not in held.timed_out]
        try:
            settled = settle_batch(self.backend, done, self.metrics)
            n_ok = settled.count(SUCCEEDED)  # the common case, counted at once (no loop)
            if n_ok < len(settled):
                for (lease, _), s in zip(done, settled, strict=True):
                    if s != SUCCEEDED:
                        self._count(lease, s)
            self.processed += n_ok
        finally:
            with held.lock:
                pop = held.runs.pop
                for lease, _ in done:
                    pop(id(lease), None)
                if held.timed_out:
                    for lease, _ in done:
                        held.timed_out.discard(id(lease))

    def _forget(self, lease: Lease) -> None:
        self._held.runs.pop(id(lease), None)
        self._held.timed_out.discard(id(lease))

    def _count(self, lease: Lease, s: Settled) -> None:
        if s.answer is None:  # not recorded (logged): the lease expires, the job runs again
            return
        if s.failed:
            self.failed += 1
        else:
            self.processed += 1
        if s.answer is Settle.STALE:
            log.warning("job %s: lease lost before settle (stale)", lease.id)

    def _return_unstarted(self, leases: list[Lease]) -> None:
        """Return leased-but-unstarted jobs at once, without spending their attempt."""
        give_back(self.backend, leases, observer=self.metrics)
        with self._held.lock:
            for lease in leases:
                self._forget(lease)

    # -- background duties -------------------------------------------------------------
    def _maybe_sweep(self) -> None:
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_interval_ms / 1000 * (0.75 + random.random() / 2)
        try:
            self.backend.sweep()
        except BackendError as exc:
            log.warning("sweep failed: %s", exc)
        if Capability.JOB_OPS in self.backend.capabilities:
            prune_cancels(self.backend, self.queue)

    def _heartbeat(self) -> None:
        period = self.lease_ms / 3000
        last = polled = time.monotonic()
        cancels = Capability.JOB_OPS in self.backend.capabilities
        while not self._done.wait(min(period, 0.05)):
            self._enforce_timeouts()
            if time.monotonic() - last >= period:
                last = time.monotonic()
                self._extend_all()
            if cancels and time.monotonic() - polled >= CANCEL_POLL_S:
                polled = time.monotonic()
                with self._held.lock:
                    running = [c for c in self._held.runs.values() if c.started is not None]
                if running:
                    poll_cancels(self.backend, self.queue, running)

    def _extend_all(self) -> None:
        self._alive()
        with self._held.lock:
            leases = [c.lease for k, c in self._held.runs.items() if k not in self._held.timed_out]
        for lease in leases:
            assert lease is not None  # a Worker's contexts always carry their lease
            try:
                self.backend.extend(lease, self.lease_ms)
            except BackendError as exc:
                log.warning("heartbeat for %s failed: %s", lease.id, exc)

    def _enforce_timeouts(self) -> None:
        now = time.monotonic()
        expired: list[Lease] = []
        with self._held.lock:
            for key, ctx in self._held.runs.items():
                started, timeout = ctx.started, ctx.job.opts.timeout
                if timeout is not None and started is not None \
                        and key not in self._held.timed_out \
                        and (now - started) * 1000 > timeout:  # fmt: skip
                    self._held.timed_out.add(key)
                    expired.append(ctx.lease)  # type: ignore[arg-type]
        for lease in expired:
            err = TimeoutError(f"timed out after {lease.job.opts.timeout} ms")
            outcome = Outcome(False, error=err,
                              duration_ms=lease.job.opts.timeout or 0, timed_out=True)  # fmt: skip
            self._count(lease, settle_failure(self.backend, lease, outcome, self.metrics))


def run_worker(queue: str, handler: Callable[..., Any], backend: str | None = None,
               concurrency: int = 1) -> None:  # fmt: skip
    """Run a worker in the foreground until SIGTERM (used by ``bunq worker``)."""
    Worker(queue, handler, backend, concurrency=concurrency).run()
