"""QueueEvents: listen to what happens to a queue's jobs; wait_for: wait for one job.

Events come from the backend's event log (:mod:`bunq.backends.eventlog`), so a
listener sees what Workers, ticks and producers in other processes (and, on
PostgreSQL, Redis and ``bunq://``, other hosts) did. docs/events.md lists the events
and what each backend can do.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .backends import resolve
from .backends.base import Backend, Capability, check_queue_name, require
from .backends.eventlog import EventReader, event_log
from .errors import ConfigError, JobCancelled, JobFailed, JobNotFound, WaitTimeout
from .job import FailureReason, Job, JobId, JobState
from .jobevents import EventKind, JobEvent

log = logging.getLogger("bunq.events")
Listener = Callable[[JobEvent], Any]
ANY = "*"
READ_MS = 250  # longest a read blocks (how soon close() takes effect)


def _kind(event: EventKind | str) -> str:
    if event == ANY:
        return ANY
    try:
        return EventKind(event).value
    except ValueError:
        known = ", ".join(k.value for k in EventKind)
        raise ConfigError(f"unknown event {event!r}: one of {known}, or '*'") from None


class QueueEvents:
    """The events of one queue, from when this object is created.

    ``on(event, fn)`` / ``off(event, fn)`` register listeners called (on the thread
    :meth:`start` runs) with each :class:`~bunq.jobevents.JobEvent`; ``event`` is a
    kind (``"completed"``) or ``"*"``. Or iterate: ``for ev in events.stream(timeout=5)``
    (``async for`` with :meth:`astream`). Use one of the two ways per object.

    :raises UnsupportedError: the backend keeps no events (SQS).
    """

    def __init__(self, queue: str, backend: Backend | str | None = None) -> None:
        self.queue = check_queue_name(queue)
        self.backend, self._owned = resolve(backend)
        try:
            self._reader: EventReader = event_log(self.backend).event_reader(self.queue)
        except BaseException:
            if self._owned:
                self.backend.close()
            raise
        self._listeners: dict[str, list[Listener]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- listeners -----------------------------------------------------------------------
    def on(self, event: EventKind | str, fn: Listener) -> QueueEvents:
        with self._lock:
            self._listeners.setdefault(_kind(event), []).append(fn)
        return self

    def off(self, event: EventKind | str, fn: Listener | None = None) -> QueueEvents:
        """Remove ``fn`` (every listener of ``event`` when None)."""
        k = _kind(event)
        with self._lock:
            if fn is None:
                self._listeners.pop(k, None)
            elif fn in self._listeners.get(k, []):
                self._listeners[k].remove(fn)
        return self

    def start(self) -> QueueEvents:
        """Call listeners from a background thread until :meth:`close`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"bunq-events-{self.queue}",
                                            daemon=True)  # fmt: skip
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for ev in self._read(READ_MS):
                self._dispatch(ev)

    def _dispatch(self, ev: JobEvent) -> None:
        with self._lock:
            fns = [*self._listeners.get(ev.kind.value, ()), *self._listeners.get(ANY, ())]
        for fn in fns:
            try:
                fn(ev)
            except Exception:  # a listener's bug must not stop the others
                log.exception("event listener failed", extra={"event": ev.kind.value})

    def _read(self, timeout_ms: int) -> list[JobEvent]:
        try:
            return self._reader.read(timeout_ms)
        except Exception as exc:  # the backend is away: try again shortly
            log.warning("reading events failed: %s", exc)
            self._stop.wait(min(timeout_ms, 500) / 1000)
            return []

    # -- iteration -----------------------------------------------------------------------
    def stream(self, timeout: float | None = None) -> Iterator[JobEvent]:
        """Yield events as they come, for ``timeout`` seconds (None: until closed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stop.is_set():
            left = READ_MS if deadline is None else int((deadline - time.monotonic()) * 1000)
            if left <= 0:
                return
            yield from self._read(min(left, READ_MS))

    async def astream(self, timeout: float | None = None) -> AsyncIterator[JobEvent]:
        """:meth:`stream` for ``async for`` (each read runs in a worker thread)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stop.is_set():
            left = READ_MS if deadline is None else int((deadline - time.monotonic()) * 1000)
            if left <= 0:
                return
            for ev in await asyncio.to_thread(self._read, min(left, READ_MS)):
                yield ev

    @property
    def missed(self) -> int:
        """Events the backend's ring dropped before this reader saw them (when known)."""
        return self._reader.missed

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._reader.close()
        if self._owned:
            self.backend.close()

    def __enter__(self) -> QueueEvents:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for(backend: Backend, job_id: JobId, timeout: float | None = 30.0) -> Any:
    """Wait until job ``job_id`` finishes; return its result (see ``Queue.wait``)."""
    require(backend, Capability.GET_JOB)
    deadline = None if timeout is None else time.monotonic() + timeout
    job = backend.get_job(job_id)
    if job is None:
        raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
    reader = None
    if Capability.EVENTS in backend.capabilities:
        reader = event_log(backend).event_reader(job.queue)
    try:
        return _wait(backend, reader, job_id, deadline)
    finally:
        if reader is not None:
            reader.close()


def _wait(backend: Backend, reader: EventReader | None, job_id: JobId,
          deadline: float | None) -> Any:  # fmt: skip
    pause = 0.02
    cancelled = False
    while True:
        job = backend.get_job(job_id)  # after the reader opened: no event is missed
        done, result = _finished(job, job_id, cancelled)
        if done:
            return result
        left = 1.0 if deadline is None else min(deadline - time.monotonic(), 1.0)
        if left <= 0:
            state = "gone" if job is None else job.state.value
            raise WaitTimeout(f"job {job_id} did not finish in time (it is {state})",
                              job_id=job_id, state=state)  # fmt: skip
        if reader is None:  # no events: poll with backoff
            time.sleep(min(pause, left))
            pause = min(pause * 2, 1.0)
            continue
        for ev in reader.read(int(left * 1000)):
            if ev.job_id != job_id:
                continue
            if ev.kind is EventKind.COMPLETED and "result" in ev.data:
                return ev.data["result"]  # (a job removed on completion keeps no result)
            if ev.kind is EventKind.CANCELLED:
                cancelled = True


def _finished(job: Job | None, job_id: JobId, cancelled: bool) -> tuple[bool, Any]:
    if job is None:
        if cancelled:
            raise JobCancelled(f"job {job_id} was cancelled", job_id=job_id)
        raise JobNotFound(f"job {job_id!r} is gone (removed, or cleaned after it finished)",
                          job_id=job_id)  # fmt: skip
    if job.state is JobState.COMPLETED:
        return True, job.result
    if job.state is JobState.FAILED:
        if job.reason is FailureReason.CANCELLED:
            raise JobCancelled(f"job {job_id} was cancelled", job_id=job_id)
        reason = None if job.reason is None else job.reason.value
        raise JobFailed(f"job {job_id} failed ({reason}): {job.error}", job_id=job_id,
                        reason=reason, error=job.error)  # fmt: skip
    return False, None
