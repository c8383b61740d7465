"""Prometheus metrics of ``bunq serve`` (prometheus_client, a registry of its own).

Counters and the command-latency histogram are updated as commands run; the
per-queue job gauges are read from a snapshot the server refreshes before each
scrape (``/metrics`` or the ``Prometheus`` command), at most 100 queues. State
labels are bunq's state names (``failed`` = in the dead-letter queue). A long poll
(a PULL/PULLB/BqLease/BqWait/WaitJob with a timeout) is timed in its own histogram,
so its waiting does not read as command latency. No ``_created`` series; the
process collector and ``bunq_build_info`` are in. ``/metrics`` answers OpenMetrics
to a scraper that asks for it (``Accept: application/openmetrics-text``).
"""

from __future__ import annotations

import platform
import time
from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from ..job import JobState

MAX_QUEUES = 100
STATES = tuple(s.value for s in JobState)
LONG_POLLS = frozenset({"PULL", "PULLB", "BqLease", "BqWait", "WaitJob"})
TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = openmetrics.CONTENT_TYPE_LATEST
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created
_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class _QueueGauges(Collector):
    """Jobs per queue and state, from the last snapshot."""

    def __init__(self) -> None:
        self.snapshot: dict[str, dict[str, int]] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        fam = GaugeMetricFamily(
            "bunq_queue_jobs", "Jobs per queue and state", labels=["queue", "state"]
        )
        totals = dict.fromkeys(STATES, 0)
        for queue, counts in sorted(self.snapshot.items())[:MAX_QUEUES]:
            for state in STATES:
                n = counts.get(state, 0)
                totals[state] += n
                fam.add_metric([queue, state], n)
        yield fam
        every = GaugeMetricFamily("bunq_jobs", "Jobs per state, all queues", labels=["state"])
        for state in STATES:
            every.add_metric([state], totals[state])
        yield every


class Tally(Collector):
    """A counter bumped on the event loop's thread only, read at scrape time.

    ``inc`` is an attribute add: a prometheus ``Counter`` takes a lock and checks
    its labels on every call (1.6 µs, against a single PUSH's whole handler at
    a few µs). The exposition is the same (``<name>_total``).
    """

    def __init__(self, name: str, doc: str, registry: CollectorRegistry) -> None:
        self.name, self.doc, self.value = name, doc, 0
        registry.register(self)

    def inc(self, amount: int = 1) -> None:
        self.value += amount

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self.name, self.doc, value=self.value)


class CommandHistogram(Collector):
    """A histogram of seconds labelled by ``cmd``, observed on the event loop's thread
    only: one ``bisect`` and two adds per observation, where a prometheus
    ``Histogram`` child takes two locks and scans its buckets (3.9 µs a request).
    Exposed as prometheus's own: cumulative ``_bucket`` (``le``), ``_count``, ``_sum``."""

    def __init__(self, name: str, doc: str, registry: CollectorRegistry) -> None:
        self.name, self.doc = name, doc
        self._les = [*map(floatToGoString, _BUCKETS), "+Inf"]
        self._counts: dict[str, list[int]] = {}  # cmd -> observations per bucket
        self._sums: dict[str, float] = {}
        registry.register(self)

    def __contains__(self, cmd: object) -> bool:
        return cmd in self._counts

    def __len__(self) -> int:
        return len(self._counts)

    def observe(self, cmd: str, seconds: float) -> None:
        counts = self._counts.get(cmd)
        if counts is None:
            counts = self._counts[cmd] = [0] * len(self._les)
            self._sums[cmd] = 0.0
        counts[bisect_left(_BUCKETS, seconds)] += 1  # the first bucket with seconds <= le
        self._sums[cmd] += seconds

    def collect(self) -> Iterator[HistogramMetricFamily]:
        fam = HistogramMetricFamily(self.name, self.doc, labels=["cmd"])
        for cmd, counts in self._counts.items():
            fam.add_metric([cmd], list(zip(self._les, accumulate(counts), strict=True)),
                           sum_value=self._sums[cmd])  # fmt: skip
        yield fam


class WebhookCounts(Collector):
    """The webhook dispatcher's counts, read at scrape time (:mod:`bunq.webhooks`)."""

    def __init__(self, hooks: Any) -> None:
        self.hooks = hooks

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        h = self.hooks
        fam = CounterMetricFamily("bunq_webhook_deliveries",
                                  "Webhook deliveries by how they ended (dropped: the queue was "
                                  "full)", labels=["outcome"])  # fmt: skip
        for outcome, n in (("delivered", h.delivered), ("failed", h.failed),
                           ("dropped", h.dropped)):  # fmt: skip
            fam.add_metric([outcome], n)
        yield fam
        yield GaugeMetricFamily("bunq_webhook_pending", "Webhook deliveries queued or waiting "
                                "to be retried", value=h.pending())  # fmt: skip


class Metrics:
    """Every metric the server exports."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.pushed = Tally("bunq_jobs_pushed", "Jobs added", r)
        self.pulled = Tally("bunq_jobs_pulled", "Jobs leased", r)
        self.completed = Tally("bunq_jobs_completed", "Jobs completed", r)
        self.failed = Tally("bunq_jobs_failed", "Failed attempts recorded", r)
        self.errors = Counter(
            "bunq_command_errors", "Commands answered ok: false", ["cmd"], registry=r
        )
        self.latency = CommandHistogram("bunq_command_duration_seconds", "Command latency", r)
        self.connections = Gauge("bunq_connections", "Open TCP connections", registry=r)
        self.refused = Counter(
            "bunq_connections_refused",
            "Connections refused or evicted by a connection limit",
            ["limit"],
            registry=r,
        )
        self.auth_failures = Counter("bunq_auth_failures", "Failed Auth requests", registry=r)
        self.leases = Gauge("bunq_leases_held", "Leases this server tracks", registry=r)
        self.event_subscribers = Gauge(
            "bunq_event_subscribers", "Connections subscribed to job events", registry=r
        )
        self.events_sent = Counter(
            "bunq_events_sent", "Event frames queued to subscribers", registry=r
        )
        self.event_drops = Counter(
            "bunq_event_subscribers_dropped",
            "Subscribers disconnected because they fell behind on their events",
            registry=r,
        )
        self.events_skipped = Counter(
            "bunq_events_skipped", "Events that could not be encoded", registry=r
        )
        self.long_polls = CommandHistogram(
            "bunq_long_poll_duration_seconds",
            "How long long polls (PULL/PULLB/BqLease/BqWait/WaitJob with a timeout) waited",
            r,
        )
        self.queues = _QueueGauges()
        r.register(self.queues)
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        from .. import __version__
        from .._core import IMPLEMENTATION

        Gauge("bunq_build_info", "bunq's version, core and Python (always 1)",
              ["version", "core", "python"], registry=r).labels(
            __version__, IMPLEMENTATION, platform.python_version()).set(1)  # fmt: skip
        self._err_children: dict[str, Any] = {}
        self.started = time.time()
        self.commands = 0

    def observe(self, cmd: str, seconds: float, ok: bool, waited: bool = False) -> None:
        """Record one command's latency (and its error); ``waited``: a long poll."""
        self.commands += 1
        if waited:
            self.long_polls.observe(cmd, seconds)
            if not ok:
                self.errors.labels(cmd).inc()
            return
        latency = self.latency
        if cmd not in latency and len(latency) > 256:  # unknown command names are not labels
            cmd = "other"
        latency.observe(cmd, seconds)
        if not ok:
            err = self._err_children.get(cmd)
            if err is None:
                err = self._err_children.setdefault(cmd, self.errors.labels(cmd))
            err.inc()

    def text(self, openmetrics_format: bool = False) -> bytes:
        """Return the exposition: Prometheus text, or OpenMetrics when asked."""
        if openmetrics_format:
            return bytes(openmetrics.generate_latest(self.registry))  # type: ignore[no-untyped-call]
        return generate_latest(self.registry)

    def totals(self) -> dict[str, int]:
        return {
            "pushed": self.pushed.value,
            "pulled": self.pulled.value,
            "completed": self.completed.value,
            "failed": self.failed.value,
        }
