"""Keepalive: the leases of running jobs, extended while they run, and their cancel requests.

``tick()`` runs jobs without the Worker's resident heartbeat; while it runs a job it
keeps one of these (a thread started with the first job, joined before the tick
returns): every third of the lease it extends each running job's lease by
``lease_ms``, and about once a second it looks for cancel requests
(:func:`~.context.poll_cancels`). A job may therefore run longer than its lease.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from types import TracebackType

from ..backends.base import Backend, Capability
from ..errors import BunqError
from ..job import Lease, Settle
from .context import CANCEL_POLL_S, JobContext, poll_cancels

log = logging.getLogger("bunq.tick")


class Keepalive:
    def __init__(self, backend: Backend, queue: str, lease_ms: int) -> None:
        self.backend, self.queue, self.lease_ms = backend, queue, lease_ms
        self.cancels = Capability.JOB_OPS in backend.capabilities
        self._lock = threading.Lock()
        self._running: dict[str, tuple[Lease, JobContext, float]] = {}  # id -> lease, ctx, at
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def started(self, lease: Lease, ctx: JobContext) -> None:
        with self._lock:
            self._running[lease.id] = (lease, ctx, time.monotonic())
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="bunq-keepalive",
                                                daemon=True)  # fmt: skip
                self._thread.start()

    def finished(self, lease: Lease) -> Lease:
        """Forget ``lease``; return it with the expiry its last extension gave it."""
        with self._lock:
            got = self._running.pop(lease.id, None)
        return lease if got is None else got[0]

    def _run(self) -> None:
        period = self.lease_ms / 3000
        polled = time.monotonic()
        while not self._stop.wait(min(period, CANCEL_POLL_S, 0.25)):
            now = time.monotonic()
            with self._lock:
                due = [(k, v) for k, v in self._running.items() if now - v[2] >= period]
            for job_id, (lease, ctx, _) in due:
                self._extend(job_id, lease, ctx)
            if self.cancels and now - polled >= CANCEL_POLL_S:
                polled = now
                with self._lock:
                    running = [v[1] for v in self._running.values()]
                if running:
                    poll_cancels(self.backend, self.queue, running)

    def _extend(self, job_id: str, lease: Lease, ctx: JobContext) -> None:
        try:
            answer = self.backend.extend(lease, self.lease_ms)
        except BunqError as exc:
            log.warning("keepalive for %s failed: %s", job_id, exc)
            return
        if answer is not Settle.OK:
            return
        extended = replace(lease, expires_at=self.backend.clock() + self.lease_ms)
        with self._lock:
            if job_id in self._running:
                self._running[job_id] = (extended, ctx, time.monotonic())

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Keepalive:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        self.close()
