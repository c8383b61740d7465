"""Value types the storage layers share: the clock, backend capabilities, sweep results.

They sit in the model layer so the memory engine and every backend take them
from below; :mod:`bunq.backends.base` re-exports them for the Backend contract's
signatures. Queue settings (``QueueLimits``, ``DlqConfig``) live in
:mod:`bunq.queueconfig`, the queue-name check in :mod:`bunq.validate`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], int]
"""Epoch milliseconds; a backend built with an injected clock uses it for every decision."""


class Capability(str, enum.Enum):
    """Features a backend may or may not honour."""

    PRIORITY = "priority"
    LIFO = "lifo"
    DELAY = "delay"
    LONG_DELAY = "long_delay"  # delays beyond 15 minutes without re-parking
    GET_JOB = "get_job"
    LIST_JOBS = "list_jobs"
    EXACT_COUNTS = "exact_counts"
    JOB_ID = "job_id"  # idempotent custom ids
    UNIQUE_KEY = "unique_key"
    FLOWS = "flows"  # depends_on, parents and children
    PAUSE = "pause"
    CLEAN = "clean"
    PROGRESS = "progress"
    LOGS = "logs"
    RESULTS = "results"
    DLQ = "dlq"
    RATE_LIMIT = "rate_limit"
    CONCURRENCY_LIMIT = "concurrency_limit"
    GROUPS = "groups"
    CRON = "cron"
    TTL = "ttl"
    MULTI_PROCESS = "multi_process"  # several processes may share the store
    CLOCK = "clock"  # delays, leases, backoff and sweeps follow the injected clock(), to the ms
    HISTORY = "history"  # every attempt's error and duration is kept (get_job, DLQ entries)
    GROUP_MAX_SIZE = "group_max_size"  # refuse adds to a FIFO group holding that many pending
    FLOW_POLICIES = "flow_policies"  # a dead-lettered child's policy for its parent (FlowFailure)
    EVENTS = "events"  # job events others can read (QueueEvents, queue.wait): bunq.jobevents
    JOB_OPS = "job_ops"  # per-job operations: remove, retry, promote, reprioritise... (jobops.py)


ALL_CAPABILITIES = frozenset(Capability)


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What one sweep did: expired leases re-queued or dead, TTLs expired."""

    requeued: int = 0
    dead: int = 0
    ttl_expired: int = 0
    dlq_retried: int = 0
    dlq_dropped: int = 0
