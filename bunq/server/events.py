"""Server-pushed job events: ``SubscribeEvents {queue}`` -> ``{type: "event", event}`` frames.

A connection that sent ``SubscribeEvents {queue}`` receives one frame, with
no ``reqId``, per lifecycle transition of a job of that queue that this
server performs. ``event`` is shaped like bunqueue's ``JobEvent``
(``{eventType, queue, jobId, timestamp, ...}``, ``eventType`` in bunqueue's
names: ``pushed`` becomes ``waiting`` and ``pulled`` becomes ``active`` in
its ``QueueEvents``). As in bunqueue, a connection listens to one queue at a
time (a new ``SubscribeEvents`` replaces the old one) and
``UnsubscribeEvents`` stops the frames.

Cost when nobody listens: one dict lookup per batch of jobs (or one
attribute test); events are built and encoded only for a queue someone
listens to, each frame once for all its listeners. Memory is bounded per
listener: see :meth:`bunq.server.conn.Connection.push_event` (a listener that
falls behind is disconnected, as bunqueue does).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ProtocolError
from ..job import Job, JobState, Lease, Settle
from ..jobevents import (
    COMPLETED,
    DELAYED,
    DUPLICATED,
    FAILED,
    PROGRESS,
    PULLED,
    PUSHED,
    REMOVED,
    RETRIED,
    STALLED,
    WAITING_CHILDREN,
)
from ..jobevents import wire_event as _event
from ..policy import FailDecision
from ..protocol import encode
from ..stacks import split

if TYPE_CHECKING:
    from ..webhooks import Dispatcher
    from .metrics import Metrics

log = logging.getLogger("bunq.server")

Event = dict[str, Any]


class Subscriber(Protocol):
    """A connection that can take a server-pushed frame."""

    def push_event(self, frame: bytes) -> bool:
        """Queue ``frame`` for the client; False when the subscriber was dropped."""
        ...


def now_ms() -> float:
    """bunqueue's ``Date.now()``, as a float (never an int64 on the wire)."""
    return time.time() * 1000.0


class EventHub:
    """Who listens to which queue; builds, encodes and hands out event frames.

    Event-loop thread only. ``active`` is False while nobody listens, so a
    caller can skip even the arguments of a publication.
    """

    def __init__(self, metrics: Metrics | None = None, hooks: Dispatcher | None = None) -> None:
        self._queues: dict[str, dict[Subscriber, None]] = {}
        self._of: dict[Subscriber, str] = {}
        self._all: dict[Subscriber, None] = {}  # every queue's events (HTTP /events)
        self._metrics = metrics
        self._hooks = hooks  # webhooks: every published event is also offered to them
        self.active = False
        if hooks is not None:
            hooks.on_change(self._changed)
            self._changed()

    # -- subscriptions -------------------------------------------------------------------
    def subscribe(self, sub: Subscriber, queue: str) -> None:
        """Send ``queue``'s events to ``sub`` (instead of any queue it listened to)."""
        self.unsubscribe(sub)
        self._queues.setdefault(queue, {})[sub] = None
        self._of[sub] = queue
        self._changed()

    def subscribe_all(self, sub: Subscriber) -> None:
        """Send every queue's events to ``sub`` (until :meth:`unsubscribe`)."""
        self.unsubscribe(sub)
        self._all[sub] = None
        self._changed()

    def _wants(self, queue: str) -> bool:
        hooks = self._hooks
        return (
            bool(self._all) or queue in self._queues or (hooks is not None and hooks.wants(queue))
        )

    def unsubscribe(self, sub: Subscriber) -> bool:
        """Stop sending events to ``sub``; return whether it was listening."""
        if self._all.pop(sub, 0) is None:
            self._changed()
            return True
        queue = self._of.pop(sub, None)
        if queue is None:
            return False
        subs = self._queues.get(queue)
        if subs is not None:
            subs.pop(sub, None)
            if not subs:
                del self._queues[queue]
        self._changed()
        return True

    def queue_of(self, sub: Subscriber) -> str | None:
        """The queue ``sub`` listens to (None: it does not)."""
        return self._of.get(sub)

    def __len__(self) -> int:
        return len(self._of) + len(self._all)

    def _changed(self) -> None:
        hooks = self._hooks
        self.active = bool(self._of) or bool(self._all) or (hooks is not None and hooks.active)
        if self._metrics is not None:
            self._metrics.event_subscribers.set(len(self))

    # -- delivery ------------------------------------------------------------------------
    def publish(self, queue: str, events: Sequence[Event]) -> None:
        """Encode ``events`` once and queue them to every listener of ``queue`` (and
        offer them to the webhooks: :meth:`bunq.webhooks.Dispatcher.dispatch`)."""
        self._offer(queue, events)
        subs = self._queues.get(queue)
        if self._all:
            subs = {**subs, **self._all} if subs else self._all
        if not subs or not events:
            return
        frames = []
        for ev in events:
            try:
                frames.append(encode({"type": "event", "event": ev}))
            except ProtocolError as exc:  # e.g. a result nested too deeply: skip that one
                log.warning("event not sent", extra={"event": ev["eventType"], "error": str(exc)})
                if self._metrics is not None:
                    self._metrics.events_skipped.inc()
        if not frames:
            return
        blob = frames[0] if len(frames) == 1 else b"".join(frames)
        sent = 0
        for sub in list(subs):
            if sub.push_event(blob):
                sent += len(frames)
            else:
                self.unsubscribe(sub)
                if self._metrics is not None:
                    self._metrics.event_drops.inc()
        if self._metrics is not None and sent:
            self._metrics.events_sent.inc(sent)

    def _offer(self, queue: str, events: Sequence[Event]) -> None:
        """Hand ``events`` to the webhook dispatcher (it queues; it never blocks)."""
        hooks = self._hooks
        if hooks is not None and hooks.active:
            for ev in events:
                hooks.dispatch(ev["eventType"], queue, ev)

    # -- the transitions -----------------------------------------------------------------
    def added(self, jobs: Sequence[Job], since: int, now: int) -> None:
        """Jobs an add returned: ``pushed`` (+ ``delayed`` {delay} or ``waiting-children``);
        a live job returned for its custom id (created before ``since``) is ``duplicated``."""
        for queue, group in _by_queue(jobs):
            if not self._wants(queue):
                continue
            ts, evs = now_ms(), []
            for j in group:
                if j.opts.job_id is not None and j.created_at < since:
                    evs.append(_event(DUPLICATED, queue, j.id, ts))
                    continue
                evs.append(_event(PUSHED, queue, j.id, ts))
                if j.state is JobState.DELAYED:
                    evs.append(
                        _event(DELAYED, queue, j.id, ts, delay=float(max(j.run_at - now, 0)))
                    )
                elif j.state is JobState.WAITING_CHILDREN:
                    evs.append(_event(WAITING_CHILDREN, queue, j.id, ts))
            self.publish(queue, evs)

    def leased(self, queue: str, leases: Sequence[Lease]) -> None:
        """``pulled`` (bunqueue's QueueEvents: ``active``) per leased job."""
        if leases and self._wants(queue):
            ts = now_ms()
            self.publish(queue, [_event(PULLED, queue, x.job.id, ts) for x in leases])

    def completed(self, items: Sequence[tuple[Lease, Any]], settled: Sequence[Settle]) -> None:
        """``completed`` {data: the return value} per settled item."""
        done = [item for item, s in zip(items, settled, strict=False) if s is Settle.OK]
        for queue, group in _by_queue(done, lambda item: item[0].job):
            if self._wants(queue):
                ts = now_ms()
                self.publish(
                    queue, [_event(COMPLETED, queue, x.job.id, ts, data=r) for x, r in group]
                )

    def failed(self, job: Job, error: str | None, decision: FailDecision, now: int) -> None:
        """A failed attempt: ``failed`` {error, data, terminal}, then ``retried`` {prev} when
        it will run again; a DelayedError (attempt given back) is ``delayed`` {delay}."""
        queue = job.queue
        if not self._wants(queue):
            return
        ts = now_ms()
        if decision.kind == "delay":
            delay = float(max(decision.run_at - now, 0))
            self.publish(queue, [_event(DELAYED, queue, job.id, ts, delay=delay)])
            return
        dead = decision.is_dead
        reason = split(error)[0] or "failed"  # without the stack
        evs = [_event(FAILED, queue, job.id, ts, error=reason, data=job.data, terminal=dead)]
        if not dead:
            evs.append(_event(RETRIED, queue, job.id, ts, prev="failed"))
        self.publish(queue, evs)

    def progress(self, queue: str, job_id: str, value: int, message: str | None) -> None:
        """``progress`` {progress, data: {progress, message}} (bunqueue's shape)."""
        if self._wants(queue):
            data = {"progress": value, "message": message}
            self.publish(
                queue, [_event(PROGRESS, queue, job_id, now_ms(), progress=value, data=data)]
            )

    def removed(self, queue: str, ids: Iterable[str], prev: str) -> None:
        """``removed`` {prev} per job id."""
        if self._wants(queue):
            ts = now_ms()
            self.publish(queue, [_event(REMOVED, queue, i, ts, prev=prev) for i in ids])

    def stalled(self, queue: str, ids: Iterable[str]) -> None:
        """``stalled`` {prev: "active"} per job whose lease ran out (:mod:`.leasewatch`)."""
        if self._wants(queue):
            ts = now_ms()
            self.publish(queue, [_event(STALLED, queue, i, ts, prev="active") for i in ids])

    def queue_event(self, queue: str, kind: str) -> None:
        """A queue-wide event (``paused``, ``resumed``, ``drained``): ``jobId`` is ``""``."""
        if self._wants(queue):
            self.publish(queue, [_event(kind, queue, "", now_ms())])


def _by_queue(
    items: Sequence[Any], job_of: Callable[[Any], Job] | None = None
) -> list[tuple[str, list[Any]]]:
    """Group ``items`` by their job's queue, keeping order (one group in the common case)."""
    if not items:
        return []
    get: Callable[[Any], Job] = job_of or (lambda x: x)
    first = get(items[0]).queue
    if all(get(x).queue == first for x in items):
        return [(first, list(items))]
    groups: dict[str, list[Any]] = {}
    for x in items:
        groups.setdefault(get(x).queue, []).append(x)
    return list(groups.items())
