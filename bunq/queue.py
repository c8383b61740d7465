"""Queue: the producer and admin handle of one named queue over any backend."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from dataclasses import fields
from types import MappingProxyType
from typing import Any

from . import tracing, validate
from .backends import resolve
from .backends.base import Backend, Capability, DlqConfig, QueueLimits, check_queue_name, require
from .backends.eventlog import publish, wants
from .batching import BULK, paused_gc
from .cron import Schedule, Scheduler
from .engine.builders import build_new_job
from .errors import ConfigError, JobNotFound, JobStateError, ValidationError
from .execution.context import request_cancel
from .job import (
    DEFAULT_OPTIONS,
    DlqEntry,
    FailureReason,
    Job,
    JobId,
    JobOptions,
    JobState,
    Lease,
    NewJob,
    Settle,
    attach,
    attach_all,
    new_job_id,
    new_job_ids,
)
from .jobevents import EventKind, JobEvent, added_events
from .jobrules import FlowFailure
from .metrics import JobMetrics
from .metrics import resolve as resolve_metrics
from .pages import JobPage
from .policy import FailDecision
from .queue_events import wait_for
from .repeat import PREFIX, add_repeatable
from .stacks import split

_NO_OPTS: Mapping[str, Any] = MappingProxyType({})
#: read once per add: on Python 3.11 an attribute of an enum class goes through
#: ``EnumType.__getattr__``'s slot hook (~4x a module global's cost)
_ADDED = EventKind.ADDED
_NO_PAUSE = nullcontext()  # a bulk below BULK items: the collector is left running


def new_job(queue: str, name: str, data: Any, opts: Mapping[str, Any]) -> NewJob:
    """Validate options and build a NewJob (custom ``job_id`` becomes the id).

    ``debounce={"id": key, "ttl": ms}`` (BullMQ's debounce mode) is shorthand for
    ``unique_key=key, unique_ttl=ms, unique_strategy="replace"``: within the window
    the newest add replaces a waiting holder (and starts the window again).
    """
    if opts.get("debounce") is not None:
        opts = debounced(opts)
    o = JobOptions.parse(opts)
    return build_new_job(queue, name, data, o, o.job_id or new_job_id())


def debounced(opts: Mapping[str, Any]) -> dict[str, Any]:
    """Translate the ``debounce`` option (see :func:`new_job`)."""
    spec = opts["debounce"]
    if not isinstance(spec, Mapping) or set(spec) - {"id", "ttl"} or "id" not in spec:
        raise ValidationError("debounce must be a map {id, ttl}", field="debounce")
    if opts.get("unique_key") is not None:
        raise ValidationError("debounce and unique_key are one key: give one", field="debounce")
    rest = {k: v for k, v in opts.items() if k != "debounce"}
    return {**rest, "unique_key": spec["id"], "unique_ttl": spec.get("ttl"),
            "unique_strategy": "replace"}  # fmt: skip


class DeadLetters:
    """The dead-letter queue of one queue (``queue.dlq``)."""

    def __init__(self, queue: Queue) -> None:
        self._q = queue

    def list(self, limit: int = 100, offset: int = 0) -> list[DlqEntry]:
        """Return entries, newest first, with reason, last error and attempt history."""
        return self._q.backend.dlq_list(self._q.name, limit, offset)

    def retry(self, job_id: JobId | None = None) -> int:
        """Move one entry (or all) back to waiting with fresh attempts; return how many."""
        return self._q.backend.dlq_retry(self._q.name, job_id)

    def purge(self) -> int:
        return self._q.backend.dlq_purge(self._q.name)

    def size(self) -> int:
        return self._q.backend.dlq_size(self._q.name)

    def remove(self, job_id: JobId) -> bool:
        return self._q.backend.dlq_remove(self._q.name, job_id)

    def config(self, **changes: Any) -> DlqConfig:
        """Return the DLQ settings, changing the given ones first.

        Keys: auto_retry, auto_retry_interval, max_auto_retries, max_age, max_entries.
        """
        current = self._q.backend.dlq_config(self._q.name)
        if not changes:
            return current
        known = {f.name for f in fields(DlqConfig)}
        if set(changes) - known:
            raise ConfigError(f"unknown DLQ settings {sorted(set(changes) - known)}")
        merged = DlqConfig(**{**{f: getattr(current, f) for f in known}, **changes})
        return self._q.backend.dlq_config(self._q.name, merged)


class Queue:
    """Add and inspect jobs of one queue.

    :param name: queue name (letters, digits, ``_ . : -``; at most 128).
    :param backend: a Backend object (shared) or a URL (opened and owned).
    :param metrics: where added jobs are counted (:mod:`bunq.metrics`; False: nowhere).
    """

    def __init__(self, name: str, backend: Backend | str | None = None, *,
                 metrics: JobMetrics | bool | None = None) -> None:  # fmt: skip
        self.name = check_queue_name(name)
        self.metrics = resolve_metrics(metrics)
        self.backend, self._owned = resolve(backend)
        self.dlq = DeadLetters(self)

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, backend={self.backend.kind})"

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the backend if this queue opened it from a URL."""
        if self._owned:
            self.backend.close()

    # -- producing ---------------------------------------------------------------------
    def add(self, name: str, data: Any = None, **opts: Any) -> Job:
        """Add one job; return it as stored (a live job with the same job_id is returned).

        Options: priority, delay (ms), attempts, backoff, job_id, unique_key,
        unique_strategy (reject|extend|replace), unique_ttl, lifo, ttl, timeout,
        depends_on, remove_on_complete, remove_on_fail, group, durable, and the flow
        policies (docs/jobs.md). ``repeat={every | pattern, limit, immediately,
        start_date, end_date, tz, key}`` makes it a repeatable job on the cron
        machinery (:mod:`bunq.repeat`): the first run is returned.
        """
        if opts and opts.get("repeat") is not None:
            require(self.backend, Capability.CRON)
            rest = {k: v for k, v in opts.items() if k != "repeat"}
            first = add_repeatable(self.backend, self.name, name, data, rest, opts["repeat"])
            return attach(first, self)
        if tracing.tracer() is None:  # the common case: no span, no context manager
            job = self._add_one(name, data, opts)
        else:
            with tracing.publishing(self.name, 1) as (span, parent):
                if parent is not None and opts.get("traceparent") is None:
                    opts["traceparent"] = parent
                job = self._add_one(name, data, opts)
                if span is not None:
                    span.set_attribute("messaging.message.id", job.id)
        if self.metrics is not None:
            self.metrics.added(self.name, 1)
        return attach(job, self)

    def _add_one(self, name: str, data: Any, opts: dict[str, Any]) -> Job:
        if opts:
            job = new_job(self.name, name, data, opts)
        else:  # no options: nothing to parse
            job = build_new_job(self.name, name, data, DEFAULT_OPTIONS, new_job_id())
        if not wants(self.backend, _ADDED, self.name):
            return self.backend.add([job])[0]
        since = self.backend.clock()
        jobs = self.backend.add([job])
        publish(self.backend, added_events(jobs, since))
        return jobs[0]

    def get_repeatables(self) -> list[Schedule]:
        """The queue's repeatable jobs (their schedules, with next run and runs so far)."""
        return [s for s in Scheduler(self.backend).list(self.name) if s.name.startswith(PREFIX)]

    def remove_repeatable(self, schedule_name: str) -> bool:
        """Stop a repeatable job (runs already added stay); whether it existed."""
        if not schedule_name.startswith(PREFIX):
            raise ValidationError(f"not a repeatable job's schedule: {schedule_name!r}")
        return Scheduler(self.backend).remove(schedule_name)

    def add_bulk(self, jobs: Iterable[Mapping[str, Any] | tuple[Any, ...]]) -> list[Job]:
        """Add many jobs atomically: items are ``{"name", "data", "opts"}`` or tuples."""
        items = list(jobs)
        # from BULK items the collector waits until the call has returned (paused_gc):
        # the NewJobs built here die before it runs, and so do the Jobs of a caller
        # that drops them
        with paused_gc() if len(items) >= BULK else _NO_PAUSE:
            with tracing.publishing(self.name, len(items)) as (span, parent):
                out = self._add_bulk(items, parent)
                if span is not None and len(out) == 1:
                    span.set_attribute("messaging.message.id", out[0].id)
            if self.metrics is not None:
                self.metrics.added(self.name, len(out))
            return attach_all(out, self)

    def _add_bulk(self, jobs: list[Any], parent: str | None) -> list[Job]:
        batch: list[NewJob] = []
        append = batch.append
        queue, seen, parsed = self.name, None, DEFAULT_OPTIONS
        for item, jid in zip(jobs, new_job_ids(len(jobs)), strict=True):
            if type(item) is tuple and len(item) == 2:  # (name, data): the common shape
                name, data = item
                opts = _NO_OPTS
            elif isinstance(item, tuple) and 1 <= len(item) <= 3:
                name, data, opts = (*item, None, _NO_OPTS)[:3] if len(item) < 3 else item
                opts = opts or _NO_OPTS
            elif isinstance(item, Mapping):
                unknown = set(item) - {"name", "data", "opts"}
                if unknown:
                    raise ValidationError(f"unknown bulk item keys {sorted(unknown)}")
                name, data, opts = item.get("name"), item.get("data"), item.get("opts") or _NO_OPTS
            else:
                raise ValidationError("bulk items are mappings or (name, data, opts) tuples")
            if opts is not seen:  # the same options object item after item: parsed once
                if not isinstance(opts, Mapping):
                    raise ValidationError("bulk item opts must be a mapping")
                seen = full = opts
                if parent is not None and opts.get("traceparent") is None:
                    full = {**opts, "traceparent": parent}
                if full.get("debounce") is not None:
                    full = debounced(full)
                parsed = JobOptions.parse(full)
            append(build_new_job(queue, name, data, parsed, parsed.job_id or jid))
        if not wants(self.backend, _ADDED, self.name):
            return self.backend.add(batch)
        since = self.backend.clock()
        added = self.backend.add(batch)
        publish(self.backend, added_events(added, since))
        return added

    # -- reading -----------------------------------------------------------------------
    def get_job(self, job_id: JobId) -> Job | None:
        job = self.backend.get_job(job_id)
        return None if job is None else attach(job, self)

    def get_state(self, job_id: JobId) -> JobState:
        """Return the job's state; PAUSED for a waiting job of a paused queue."""
        job = self.backend.get_job(job_id)
        if job is None:
            raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
        if job.state is JobState.WAITING and self.backend.is_paused(job.queue):
            return JobState.PAUSED
        return job.state

    def get_jobs(self, state: JobState | str, offset: int = 0, limit: int = 100) -> list[Job]:
        return attach_all(self.backend.get_jobs(self.name, JobState.parse(state), offset, limit),
                          self)  # fmt: skip

    def get_jobs_page(self, state: JobState | str, limit: int = 100,
                      after: str | None = None) -> JobPage:  # fmt: skip
        """One page of :meth:`get_jobs`' order after the cursor ``after`` (a keyset read).

        ``page.next`` is the cursor of the following page (None on the last one)::

            page = queue.get_jobs_page("waiting", 100)
            while page.next:
                page = queue.get_jobs_page("waiting", 100, after=page.next)

        :raises ValidationError: ``after`` is not a cursor of this state and backend.
        """
        page = self.backend.get_jobs_page(self.name, JobState.parse(state), limit, after)
        attach_all(page.jobs, self)
        return page

    def counts(self) -> dict[str, int]:
        """Return job counts keyed by JobState values (every state present)."""
        return {s.value: n for s, n in self.backend.counts(self.name).items()}

    def get_children_results(self, parent_id: JobId) -> dict[JobId, Any]:
        require(self.backend, Capability.FLOWS)
        return self.backend.get_children_results(parent_id)

    def get_failed_children(self, parent_id: JobId) -> dict[JobId, str]:
        """``{child id: error message}`` of the parent's dead-lettered children it still
        counts as failed (BullMQ's ``getFailedChildrenValues``); see docs/jobs.md."""
        require(self.backend, Capability.FLOWS)
        return {c.id: split(c.error)[0] or "" for c in failed_children(self.backend, parent_id)}

    def get_ignored_children_failures(self, parent_id: JobId) -> dict[JobId, str]:
        """The same for children with ``ignore_dependency_on_failure``."""
        require(self.backend, Capability.FLOWS)
        return {c.id: split(c.error)[0] or ""
                for c in failed_children(self.backend, parent_id, ignored=True)}  # fmt: skip

    def remove_child_dependency(self, child_id: JobId) -> bool:
        """Make the child's parent stop waiting for it (it runs once nothing else is
        pending); False when the parent no longer waits for it."""
        require(self.backend, Capability.FLOW_POLICIES)
        ops: Any = self.backend
        removed: bool = ops.remove_child_dependency(child_id)[0]
        return removed

    # -- control -----------------------------------------------------------------------
    def pause(self) -> None:
        self.backend.pause(self.name)
        self._event(EventKind.PAUSED, "")

    def resume(self) -> None:
        self.backend.resume(self.name)
        self._event(EventKind.RESUMED, "")

    def _event(self, kind: EventKind, job_id: str, **data: Any) -> None:
        publish(self.backend, [JobEvent(kind, self.name, job_id, self.backend.clock(), data)])

    def is_paused(self) -> bool:
        return self.backend.is_paused(self.name)

    def drain(self) -> int:
        """Remove every waiting and delayed job; return how many."""
        n = self.backend.drain(self.name)
        self._event(EventKind.DRAINED, "", count=n)
        return n

    def clean(self, grace_ms: int = 0, limit: int = 1000,
              state: JobState | str = JobState.COMPLETED) -> list[JobId]:  # fmt: skip
        """Remove up to ``limit`` jobs in ``state`` older than ``grace_ms``; return their ids."""
        return self.backend.clean(self.name, grace_ms, limit, JobState.parse(state))

    def obliterate(self, force: bool = False) -> None:
        """Remove the queue and all its jobs (``force`` also removes active ones)."""
        self.backend.obliterate(self.name, force)

    def rate_limit(self, max_jobs: int | None, duration_ms: int = 1000) -> None:
        """Lease at most ``max_jobs`` per ``duration_ms`` (None lifts the limit)."""
        require(self.backend, Capability.RATE_LIMIT)
        current = self.backend.get_limits(self.name)
        self.backend.set_limits(self.name, _replace(current, rate_max=max_jobs,
                                                    rate_duration=duration_ms))  # fmt: skip

    def set_concurrency(self, max_active: int | None) -> None:
        """Keep at most ``max_active`` jobs of this queue active (None lifts it)."""
        require(self.backend, Capability.CONCURRENCY_LIMIT)
        current = self.backend.get_limits(self.name)
        self.backend.set_limits(self.name, _replace(current, concurrency=max_active))

    def set_limits(self, **limits: Any) -> None:
        """Set any QueueLimits field (including group_concurrency / group_rate_max)."""
        current = self.backend.get_limits(self.name)
        self.backend.set_limits(self.name, _replace(current, **limits))

    # -- per-job data ------------------------------------------------------------------
    def update_progress(self, job_id: JobId, progress: int) -> None:
        self.backend.update_progress(job_id, progress)

    def add_log(self, job_id: JobId, line: str) -> None:
        self.backend.add_log(job_id, line)

    def get_logs(self, job_id: JobId) -> list[str]:
        return self.backend.get_logs(job_id)

    # -- per-job operations (Capability.JOB_OPS; semantics in bunq.backends.jobops) ---------
    def _ops(self) -> Any:
        require(self.backend, Capability.JOB_OPS)
        return self.backend

    def remove(self, job_id: JobId) -> bool:
        """Remove a job in any state but active; return False when there is none."""
        job = self.backend.get_job(job_id) if Capability.EVENTS in self.backend.capabilities \
            else None  # fmt: skip
        removed = bool(self._ops().remove_job(job_id))
        if removed and job is not None:
            self._event(EventKind.REMOVED, job_id, prev=job.state.value)
        return removed

    def cancel(self, job_id: JobId) -> None:
        """Cancel a job: a waiting or delayed one is removed (event ``cancelled``); an
        active one is asked to stop: its handler sees ``ctx.cancelled`` (a coroutine
        handler gets CancelledError) and the job settles as cancelled, dead-lettered with
        reason ``cancelled``, not retried (docs/events.md).

        :raises JobNotFound: no such job. :raises JobStateError: it has finished.
        """
        ops = self._ops()
        job = self.backend.get_job(job_id)
        if job is None:
            raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
        if job.state in (JobState.WAITING, JobState.DELAYED, JobState.WAITING_CHILDREN):
            try:
                if ops.remove_job(job_id):
                    self._event(EventKind.CANCELLED, job_id, prev=job.state.value)
                    return
            except JobStateError:  # leased meanwhile: ask its worker
                pass
            job = self.backend.get_job(job_id)
            if job is None:
                raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
        if job.state is not JobState.ACTIVE:
            raise JobStateError(job_id, job.state.value, "cancel")
        request_cancel(self.backend, job)

    def wait(self, job_id: JobId, timeout: float | None = 30.0) -> Any:
        """Wait until the job finishes and return its result.

        Built on the backend's events where it keeps them, polling with backoff
        elsewhere (``bunq://`` uses the server's pushed events).

        :param timeout: seconds (None: no limit).
        :raises JobFailed: it was dead-lettered (``data``: reason, error).
        :raises JobCancelled: it was cancelled. :raises WaitTimeout: ``timeout`` passed.
        :raises JobNotFound: no such job (or it was removed).
        :raises UnsupportedError: the backend cannot look jobs up (SQS).
        """
        return wait_for(self.backend, job_id, timeout)

    def retry(self, job_id: JobId) -> None:
        """Run a failed (dead-lettered) or completed job again, with fresh attempts."""
        self._ops().retry_job(job_id)

    def promote(self, job_id: JobId) -> None:
        """Make a delayed job due now."""
        self._ops().promote_job(job_id)

    def promote_jobs(self, count: int = 1000) -> int:
        """Make up to ``count`` delayed jobs of this queue due now; return how many."""
        return int(self._ops().promote_jobs(self.name, count))

    def change_priority(self, job_id: JobId, priority: int) -> None:
        """Reprioritise a waiting, delayed or waiting-children job."""
        self._ops().change_priority(job_id, priority)

    def change_delay(self, job_id: JobId, delay: int) -> None:
        """Make a waiting or delayed job due ``delay`` ms from now."""
        self._ops().change_delay(job_id, delay)

    def update(self, job_id: JobId, data: Any) -> None:
        """Replace the data of a job that has not finished."""
        self._ops().update_data(job_id, data)

    def discard(self, job_id: JobId) -> None:
        """Send a waiting, delayed or active job to the DLQ now (bunqueue's Discard)."""
        self._ops().discard_job(job_id)

    def clear_logs(self, job_id: JobId, keep: int = 0) -> None:
        """Drop a job's log lines but the newest ``keep``."""
        self._ops().clear_logs(job_id, keep)

    def counts_per_priority(self) -> dict[int, int]:
        """Count waiting and delayed jobs per priority (reads the queue's pending jobs)."""
        return dict(self._ops().counts_per_priority(self.name))

    def get_deduplication_job_id(self, key: str) -> JobId | None:
        """Return the id of the job holding unique key ``key``, or None."""
        return self._ops().dedup_job_id(self.name, key)  # type: ignore[no-any-return]

    def remove_deduplication_key(self, key: str) -> bool:
        """Release unique key ``key`` (a new job may take it); return whether it was held."""
        return bool(self._ops().remove_dedup_key(self.name, key))

    def get_job_by_custom_id(self, custom_id: str) -> Job | None:
        """Return the job added with ``job_id=custom_id`` (custom ids are job ids)."""
        job = self.backend.get_job(custom_id)
        return attach(job, self) if job is not None and job.queue == self.name else None

    def move_to_delayed(self, lease: Lease, delay: int) -> Settle:
        """Give a leased job back, due ``delay`` ms from now, without spending its attempt."""
        run_at = self.backend.clock() + validate.duration(delay, "delay")
        return self.backend.fail(lease, None, FailDecision("delay", run_at, _MOVED))

    def move_to_wait(self, lease: Lease) -> Settle:
        """Give a leased job back to waiting now, without spending its attempt."""
        return self.backend.fail(lease, None, FailDecision("delay", self.backend.clock(), _MOVED))


_MOVED = FailureReason.UNKNOWN  # reason recorded on a job given back by a move


def _replace(limits: QueueLimits, **changes: Any) -> QueueLimits:
    known = {f.name for f in fields(QueueLimits)}
    if set(changes) - known:
        raise ConfigError(f"unknown limits {sorted(set(changes) - known)}")
    # every value is checked by QueueLimits itself (bunq.queueconfig)
    return QueueLimits(**{**{f: getattr(limits, f) for f in known}, **changes})


def flow_children(backend: Backend, parent_id: JobId) -> list[Job]:
    """The children of a flow parent that still exist: the ids it depends on whose
    ``parent_id`` names it (one read per child)."""
    parent = backend.get_job(parent_id)
    if parent is None:
        return []
    kids = [backend.get_job(c) for c in parent.opts.depends_on]
    return [k for k in kids if k is not None and k.opts.parent_id == parent_id]


def failed_children(backend: Backend, parent_id: JobId, *, ignored: bool = False) -> list[Job]:
    """Dead-lettered children of ``parent_id``: those it counts as failed, or (``ignored``)
    those with ``ignore_dependency_on_failure``; ``remove_dependency_on_failure`` children
    are no longer its dependencies and are in neither."""
    out = []
    for child in flow_children(backend, parent_id):
        if child.state is not JobState.FAILED:
            continue
        policy = FlowFailure.of(child.opts)
        if policy is not FlowFailure.REMOVE and (policy is FlowFailure.IGNORE) is ignored:
            out.append(child)
    return out
