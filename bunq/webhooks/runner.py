"""Webhook deliveries without ``bunq serve``: the backend's job events, read and dispatched.

``bunq serve`` feeds its :class:`~.delivery.Dispatcher` from its own event hub. A
deployment without a server (Workers, ticks, Lambda handlers on SQLite,
PostgreSQL, Redis or the memory engine) runs a :class:`WebhookRunner` instead::

    from bunq.webhooks import WebhookRunner

    with WebhookRunner("postgresql://...") as runner:   # or runner.start() ... runner.close()
        runner.webhooks.add("https://example.com/hook", ["job.completed"], queue="emails")
        ...

It reads the job-event feed (:class:`bunq.QueueEvents`, so the events of every
process sharing the backend) of each queue a webhook listens to, turns each event
into the payload ``bunq serve`` sends (:func:`bunq.jobevents.to_wire`) and hands it
to a :class:`~.delivery.Dispatcher` (signing, retries, the delivery log).

**Run exactly one runner per deployment** (like the sweeper): each runner reads
every event, so two runners deliver everything twice. It is not for a backend
``bunq serve`` serves: the server delivers those itself (``bunq://`` is refused).
Events are delivered from when the runner reads a queue: a queue is read from
:meth:`start` on (named ``queues``), or from when a webhook for it is seen (the
store is re-read every ``refresh_s``; a webhook for every queue picks up new
queues every ``rescan_s``). Deliveries are not durable: those queued when the
process stops are lost (:meth:`close` waits up to ``drain_s`` for them).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from ..backends import resolve
from ..backends.base import Backend, Capability
from ..errors import BunqError, ConfigError
from ..jobevents import EventKind, JobEvent, to_wire
from ..queue_events import QueueEvents
from .delivery import Dispatcher
from .guard import TargetGuard
from .store import Webhooks

log = logging.getLogger("bunq.webhooks")


class WebhookRunner:
    """Delivers a backend's webhooks from its job events (see the module docstring).

    :param backend: a Backend or a URL (opened, and closed by :meth:`close`).
    :param queues: read only these queues (default: every queue an enabled webhook
        names, and every queue when one names none).
    :param guard: the target guard (default: loopback and link-local refused; an
        allow-list: ``TargetGuard(["10.0.0.0/8"])``).
    :param rescan_s: how often the set of queues to read is checked again.
    :param options: passed to :class:`~.delivery.Dispatcher` (``attempts``,
        ``backoff_ms``, ``timeout_s``, ``refresh_s``...).
    """

    def __init__(self, backend: Backend | str | None = None, queues: Iterable[str] | None = None,
                 *, guard: TargetGuard | None = None, rescan_s: float = 5.0,
                 **options: Any) -> None:  # fmt: skip
        self.backend, self._owned = resolve(backend)
        try:
            if self.backend.kind == "remote":
                raise ConfigError("bunq serve delivers its webhooks itself: run no "
                                  "WebhookRunner against bunq://")  # fmt: skip
            if Capability.EVENTS not in self.backend.capabilities:
                raise ConfigError(f"the {self.backend.kind} backend keeps no job events: "
                                  "webhooks cannot be delivered from it")  # fmt: skip
            self.webhooks = Webhooks(self.backend, guard)
            self.dispatcher = Dispatcher(self.webhooks, **options)
        except BaseException:
            if self._owned:
                self.backend.close()
            raise
        self.fixed = None if queues is None else frozenset(queues)
        self.rescan_s = rescan_s
        self._readers: dict[str, QueueEvents] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dispatched = 0  # deliveries queued (one per event and matching webhook)
        self.dispatcher.on_change(self._wake.set)

    # -- what to read ----------------------------------------------------------------------
    @property
    def queues(self) -> list[str]:
        """The queues being read now."""
        with self._lock:
            return sorted(self._readers)

    def _wanted(self) -> set[str]:
        if self.fixed is not None:
            return set(self.fixed)
        # the dispatcher's snapshot, not a fresh read: a queue is read only once the
        # dispatcher knows the webhook its events are for
        named, every = self.dispatcher.listened()
        return set(named) | (set(self.backend.queues()) if every else set())

    def reconcile(self) -> None:
        """Read the queues webhooks listen to now (open new readers, close unneeded ones)."""
        try:
            wanted = self._wanted()
        except BunqError as exc:
            log.warning("cannot list webhooks or queues: %s", exc)
            return
        with self._lock:
            if self._stop.is_set():
                return
            gone = [self._readers.pop(q) for q in set(self._readers) - wanted]
            for q in sorted(wanted - set(self._readers)):
                try:
                    self._readers[q] = QueueEvents(q, self.backend).on("*", self._event).start()
                except BunqError as exc:
                    log.warning("cannot read the events of %s: %s", q, exc)
        for r in gone:
            r.close()

    # -- each event ------------------------------------------------------------------------
    def _event(self, ev: JobEvent) -> None:
        if not self.dispatcher.active:
            return
        job_data = None
        if ev.kind is EventKind.FAILED and Capability.GET_JOB in self.backend.capabilities:
            try:  # the server sends the job's data with a failure; the event has no room
                job = self.backend.get_job(ev.job_id)
                job_data = None if job is None else job.data
            except BunqError as exc:
                log.warning("cannot read job %s: %s", ev.job_id, exc)
        doc = to_wire(ev, job_data)
        if doc is not None:
            self.dispatched += self.dispatcher.dispatch(doc["eventType"], ev.queue, doc)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> WebhookRunner:
        """Start delivering; the queues to read are open when this returns."""
        if self._thread is None:
            self.dispatcher.refresh()
            self.dispatcher.start()
            self.reconcile()
            self._thread = threading.Thread(target=self._run, name="bunq-webhook-runner",
                                            daemon=True)  # fmt: skip
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.rescan_s)
            self._wake.clear()
            if not self._stop.is_set():
                self.reconcile()

    def close(self, drain_s: float = 5.0) -> None:
        """Stop reading, wait up to ``drain_s`` for queued deliveries, stop; idempotent."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        with self._lock:
            readers, self._readers = list(self._readers.values()), {}
        for r in readers:
            r.close()
        end = time.monotonic() + drain_s
        while self.dispatcher.pending() and time.monotonic() < end:
            time.sleep(0.02)
        self.dispatcher.close()
        if self._owned:
            self._owned = False
            self.backend.close()

    def __enter__(self) -> WebhookRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
