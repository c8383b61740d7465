"""Prometheus metrics of the drivers: what a Worker, tick() or Queue.add did in this process.

The names are the server's (``bunq_jobs_pushed``, ``bunq_jobs_pulled``,
``bunq_jobs_completed``, ``bunq_jobs_failed``; see docs/observability.md), with a
``queue`` label, plus what only a driver sees: ``bunq_jobs_dead`` (moved to the
dead-letter queue), ``bunq_jobs_unsettled``, ``bunq_jobs_stale``,
``bunq_jobs_released`` and ``bunq_job_duration_seconds``; after each tick
``bunq_tick_last_run_timestamp_seconds``, ``bunq_tick_duration_seconds`` and
``bunq_tick_queue_depth``.

They live in a registry of their own (:func:`registry`), separate from
prometheus_client's global one; expose it as you like::

    prometheus_client.start_http_server(9100, registry=bunq.metrics.registry())

Drivers count into that registry once it exists: calling :func:`registry` (or
:func:`default`) turns the process's metrics on, for drivers made before or
after. Until then nothing is counted and prometheus_client is not even imported
(a Lambda cold start stays light). ``Worker(metrics=JobMetrics())`` counts into
a registry of its own; ``metrics=False`` counts nowhere.

A CronJob (``bunq tick --metrics-textfile PATH`` / ``--pushgateway URL``) writes
it for node_exporter's textfile collector or pushes it to a Pushgateway.
The settler reports to :class:`JobMetrics` through its observer interface
(:mod:`bunq.execution.observe`): counters move once per settled batch and queue.
"""

from __future__ import annotations

import threading
import time
from collections import Counter as Tally
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .job import Lease, Settle

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from .execution import Outcome
    from .execution.observe import Settled

BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
           300.0, 900.0)  # fmt: skip
_KINDS = ("succeeded", "failed", "stale", "unsettled")


class JobMetrics:
    """The drivers' metrics in one registry (an :class:`~bunq.execution.Observer`)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = r = registry or CollectorRegistry(auto_describe=True)
        q = ["queue"]
        self.pushed = Counter("bunq_jobs_pushed", "Jobs added", q, registry=r)
        self.pulled = Counter("bunq_jobs_pulled", "Jobs leased", q, registry=r)
        self.completed = Counter("bunq_jobs_completed", "Jobs completed", q, registry=r)
        self.failed = Counter("bunq_jobs_failed", "Failed attempts recorded", q, registry=r)
        self.dead = Counter("bunq_jobs_dead", "Jobs moved to the dead-letter queue", q,
                            registry=r)  # fmt: skip
        self.unsettled = Counter(
            "bunq_jobs_unsettled",
            "Outcomes the backend never took (the job runs again)",
            q,
            registry=r,
        )
        self.stale = Counter("bunq_jobs_stale", "Outcomes refused: the lease was lost", q,
                             registry=r)  # fmt: skip
        self.released = Counter("bunq_jobs_released", "Jobs given back unstarted", q,
                                registry=r)  # fmt: skip
        self.duration = Histogram("bunq_job_duration_seconds", "Handler run time", q,
                                  buckets=BUCKETS, registry=r)  # fmt: skip
        self.tick_last = Gauge("bunq_tick_last_run_timestamp_seconds",
                               "When the last tick ended (Unix time)", q, registry=r)  # fmt: skip
        self.tick_duration = Gauge("bunq_tick_duration_seconds", "How long the last tick ran",
                                   q, registry=r)  # fmt: skip
        self.tick_depth = Gauge("bunq_tick_queue_depth",
                                "Waiting, delayed, active and paused jobs after the last tick",
                                q, registry=r)  # fmt: skip
        self._by_kind = {"succeeded": self.completed, "failed": self.failed, "dead": self.dead,
                         "stale": self.stale, "unsettled": self.unsettled}  # fmt: skip
        self._children: dict[tuple[int, str], Any] = {}  # (metric, queue) -> labelled child

    def _child(self, metric: Any, queue: str) -> Any:
        key = (id(metric), queue)
        child = self._children.get(key)
        if child is None:
            child = self._children.setdefault(key, metric.labels(queue))
        return child

    # -- the observer -----------------------------------------------------------------
    def settled(self, done: Sequence[tuple[Lease, Outcome]], results: Sequence[Settled]) -> None:
        by: dict[str, Tally[str]] = {}
        observe: dict[str, Any] = {}  # queue -> its histogram child's observe
        for (lease, outcome), s in zip(done, results, strict=True):
            queue = lease.job.queue
            t = by.get(queue)
            if t is None:
                t = by[queue] = Tally()
                observe[queue] = self._child(self.duration, queue).observe
            t[s.kind] += 1
            if s.dead:
                t["dead"] += 1
            observe[queue](outcome.duration_ms / 1000)
        for queue, t in by.items():
            self._child(self.pulled, queue).inc(sum(t[k] for k in _KINDS))
            for name, counter in self._by_kind.items():
                if t[name]:
                    self._child(counter, queue).inc(t[name])

    def given_back(self, leases: Sequence[Lease], answers: Sequence[Settle]) -> None:
        for lease, answer in zip(leases, answers, strict=True):
            queue = lease.job.queue
            self.pulled.labels(queue).inc()
            (self.stale if answer is Settle.STALE else self.released).labels(queue).inc()

    # -- the other drivers ------------------------------------------------------------
    def added(self, queue: str, n: int) -> None:
        if n:
            self._child(self.pushed, queue).inc(n)

    def ticked(self, queue: str, duration_ms: int, depth: int | None) -> None:
        """A tick of ``queue`` ended after ``duration_ms``, leaving ``depth`` jobs."""
        self.tick_last.labels(queue).set(time.time())
        self.tick_duration.labels(queue).set(duration_ms / 1000)
        if depth is not None:
            self.tick_depth.labels(queue).set(depth)

    # -- export -----------------------------------------------------------------------
    def text(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def write_textfile(self, path: str) -> None:
        """Write the exposition to ``path`` atomically (node_exporter's textfile collector)."""
        from prometheus_client import write_to_textfile

        write_to_textfile(path, self.registry)

    def push(self, gateway: str, job: str = "bunq", grouping: dict[str, Any] | None = None,
             timeout: float = 10.0) -> None:  # fmt: skip
        """Replace this job's group on a Pushgateway with these metrics."""
        from prometheus_client import push_to_gateway

        push_to_gateway(gateway, job=job, registry=self.registry, grouping_key=grouping,
                        timeout=timeout)  # fmt: skip


_default: JobMetrics | None = None
_default_lock = threading.Lock()


def default() -> JobMetrics:
    """The process's metrics (what Worker, tick() and Queue report to unless told)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = JobMetrics()
    return _default


def registry() -> CollectorRegistry:
    """The registry of :func:`default`: expose it to Prometheus."""
    return default().registry


class _Process:
    """The process's metrics, once turned on (:func:`registry`); until then, nothing."""

    def settled(self, done: Sequence[tuple[Lease, Outcome]], results: Sequence[Settled]) -> None:
        if _default is not None:
            _default.settled(done, results)

    def given_back(self, leases: Sequence[Lease], answers: Sequence[Settle]) -> None:
        if _default is not None:
            _default.given_back(leases, answers)

    def added(self, queue: str, n: int) -> None:
        if _default is not None:
            _default.added(queue, n)

    def ticked(self, queue: str, duration_ms: int, depth: int | None) -> None:
        if _default is not None:
            _default.ticked(queue, duration_ms, depth)


PROCESS = _Process()
Sink = JobMetrics | _Process


def resolve(metrics: JobMetrics | bool | None) -> Sink | None:
    """A driver's ``metrics=`` argument: None the process's (once turned on), True the
    process's (turning them on), False none, or the :class:`JobMetrics` given."""
    if metrics is None:
        return PROCESS
    if metrics is True:
        return default()
    if metrics is False:
        return None
    if not isinstance(metrics, JobMetrics):
        raise ConfigError("metrics must be a bunq.metrics.JobMetrics, True or False")
    return metrics
