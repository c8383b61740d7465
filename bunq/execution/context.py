"""What a handler may ask of its run: :class:`JobContext`, and cancellation requests.

A handler that takes a second positional argument (``def handle(job, ctx)``; decided
once per handler by :func:`takes_context`) gets a :class:`JobContext`: report
progress, write log lines, extend its own lease, and see whether the job was
cancelled (``ctx.cancelled``: a flag in sync handlers; in coroutine handlers a cancel
also raises :class:`asyncio.CancelledError` inside the handler).

Cancelling a running job (``queue.cancel``) writes a request into the backend's kv
records, namespace ``cancel:<queue>`` (:func:`request_cancel`); every driver that runs
jobs lists that namespace about once a second while it runs jobs of the queue
(:func:`poll_cancels`: one small read, whatever the concurrency) and cancels the
contexts it holds. The job then settles as cancelled (``FailureReason.CANCELLED``:
dead-lettered with that reason, never retried) and the request is deleted.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ..backends.base import Backend, Capability
from ..backends.eventlog import publish
from ..errors import BunqError, LeaseLost, UnsupportedError
from ..job import Job, JobState, Lease, Settle
from ..jobevents import EventKind, JobEvent

log = logging.getLogger("bunq.jobs")
CANCEL_POLL_S = 1.0  # how often a driver running jobs looks for cancel requests


def cancel_ns(queue: str) -> str:
    return f"cancel:{queue}"


def takes_context(handler: Callable[..., Any]) -> bool:
    """True if ``handler`` accepts a second positional argument (the context)."""
    try:
        sig = inspect.signature(handler)
    except (TypeError, ValueError):
        return False
    n = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n >= 2


_LOCK = threading.Lock()  # cancel and bind are rare: one lock for every context


class CancelFlag:
    """Set when the job was cancelled: ``if ctx.cancelled:``, ``ctx.cancelled.wait(1)``.

    A plain flag, made when a handler first asks for it (:attr:`JobContext.cancelled`);
    the Event behind ``wait`` is made on first use."""

    __slots__ = ("_set", "_ev")

    def __init__(self, is_set: bool = False) -> None:
        self._set = is_set
        self._ev: threading.Event | None = None

    def __bool__(self) -> bool:
        return self._set

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        with _LOCK:
            if self._ev is None:
                self._ev = threading.Event()
                if self._set:
                    self._ev.set()
            ev = self._ev
        return ev.wait(timeout)

    def set(self) -> None:
        with _LOCK:
            self._set = True
            if self._ev is not None:
                self._ev.set()


class JobContext:
    """The handler's view of its run (see the module docstring).

    :param lease: the job's lease (None where the driver has none: the SQS event source).
    :param lease_ms: the length ``extend_lease()`` extends by when not given one.
    """

    __slots__ = ("job", "backend", "lease", "lease_ms", "cancel_requested", "started",
                 "canceller", "_flag")  # fmt: skip

    def __init__(self, job: Job, backend: Backend | None, lease: Lease | None = None,
                 lease_ms: int = 30_000) -> None:  # fmt: skip
        self.job, self.backend, self.lease, self.lease_ms = job, backend, lease, lease_ms
        #: driver side: the job was cancelled (:meth:`cancel`); what the drivers check
        #: after each call: a plain attribute, where ``cancelled`` is an object.
        self.cancel_requested = False
        #: driver side: when the run started (``time.monotonic()``), None before. The
        #: Worker keeps one context per held lease and times its runs by it.
        self.started: float | None = None
        # The handler's flag, made on first use (most handlers never look at it: one
        # object fewer per job).
        self._flag: CancelFlag | None = None
        #: driver side: where a cancel goes, ``(loop, cancel)``: ``cancel()`` is called on
        #: the loop's thread (:meth:`bind`; the executor's slots set it per call, no lock).
        self.canceller: tuple[asyncio.AbstractEventLoop, Callable[[], object]] | None = None

    @property
    def cancelled(self) -> CancelFlag:
        """Set when the job was cancelled (``if ctx.cancelled:``, ``ctx.cancelled.wait(1)``)."""
        flag = self._flag
        if flag is None:
            with _LOCK:  # one flag per context, even if cancel() runs meanwhile
                if self._flag is None:
                    self._flag = CancelFlag(self.cancel_requested)
                flag = self._flag
        return flag

    @property
    def job_id(self) -> str:
        return self.job.id

    def update_progress(self, progress: int) -> None:
        """Record progress (0-100, as ``queue.update_progress``) and publish a ``progress``
        event."""
        backend = self._backend(Capability.PROGRESS)
        backend.update_progress(self.job.id, progress)
        publish(backend, [JobEvent(EventKind.PROGRESS, self.job.queue, self.job.id,
                                   backend.clock(), {"progress": progress})])  # fmt: skip

    def log(self, line: str) -> None:
        """Append a line to the job's log (``queue.get_logs``), readable while it runs."""
        self._backend(Capability.LOGS).add_log(self.job.id, line)

    def extend_lease(self, ms: int | None = None) -> None:
        """Keep the job's lease ``ms`` (default: the driver's lease length) from now.

        :raises LeaseLost: the lease was lost (the job was taken back or cancelled).
        """
        if self.lease is None or self.backend is None:
            raise UnsupportedError(getattr(self.backend, "kind", "sqs-event"), "extend_lease")
        if self.backend.extend(self.lease, ms or self.lease_ms) is not Settle.OK:
            raise LeaseLost(f"job {self.job.id}: lease lost", job_id=self.job.id)

    def _backend(self, cap: Capability) -> Backend:
        if self.backend is None:
            raise UnsupportedError("sqs-event", cap.value)
        return self.backend

    # -- driver side ---------------------------------------------------------------------
    def cancel(self) -> None:
        """Mark the job cancelled; a coroutine handler gets CancelledError."""
        with _LOCK:
            self.cancel_requested = True
            flag, canceller = self._flag, self.canceller
        if flag is not None:
            flag.set()
        if canceller is not None:
            loop, cancel = canceller
            loop.call_soon_threadsafe(cancel)

    def bind(self, loop: asyncio.AbstractEventLoop, cancel: Callable[[], object]) -> None:
        """What cancels the handler's call (``task.cancel``), called on ``loop``'s thread;
        called at once if the job was cancelled already (call ``bind`` on that thread)."""
        with _LOCK:
            self.canceller = (loop, cancel)
        if self.cancel_requested:
            cancel()


def request_cancel(backend: Backend, job: Job) -> None:
    """Ask whoever runs ``job`` to cancel it (a kv record the drivers poll)."""
    backend.kv_put(cancel_ns(job.queue), job.id, b"1")


def poll_cancels(backend: Backend, queue: str, running: Iterable[JobContext]) -> None:
    """Cancel the ``running`` contexts whose job has a cancel request (one kv read)."""
    try:
        wanted = backend.kv_list(cancel_ns(queue))
    except BunqError as exc:
        log.warning("cannot read cancel requests: %s", exc)
        return
    if wanted:
        for ctx in running:
            if ctx.job.id in wanted and not ctx.cancel_requested:
                ctx.cancel()


def forget_cancel(backend: Backend, job: Job) -> None:
    """Delete ``job``'s cancel request once it has settled."""
    try:
        backend.kv_delete(cancel_ns(job.queue), job.id)
    except BunqError as exc:
        log.warning("cannot delete the cancel request of %s: %s", job.id, exc)


def prune_cancels(backend: Backend, queue: str) -> None:
    """Delete requests whose job is no longer active (it finished before it was seen)."""
    try:
        for job_id in backend.kv_list(cancel_ns(queue)):
            job = backend.get_job(job_id)
            if job is None or job.state is not JobState.ACTIVE:
                backend.kv_delete(cancel_ns(queue), job_id)
    except BunqError as exc:
        log.debug("cannot prune cancel requests: %s", exc)
