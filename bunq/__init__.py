"""bunq: a durable job queue for Python.

One job model (priorities, delays, retries with backoff, leases with an
attempt fence, a dead-letter queue, dependencies and flows, deduplication,
rate/concurrency limits, FIFO groups, cron) over SQLite, PostgreSQL, an
in-memory engine, SQS, or a ``bunq serve`` server.
"""

from __future__ import annotations

from .backends import Backend, Capability, DlqConfig, QueueLimits, connect
from .cron import Schedule, Scheduler
from .errors import (
    BackendError,
    BackendUnavailable,
    BunqError,
    ConfigError,
    DelayedError,
    DependencyError,
    DuplicateJob,
    GroupFull,
    JobCancelled,
    JobFailed,
    JobNotFound,
    JobStateError,
    LeaseLost,
    PayloadTooLarge,
    Retry,
    UnrecoverableError,
    UnsupportedError,
    ValidationError,
    WaitTimeout,
)  # fmt: skip
from .execution import JobContext
from .flow import FlowJob, FlowProducer, FlowResult
from .job import Backoff, DlqEntry, FailureReason, Job, JobOptions, JobState, Lease, Settle
from .jobevents import EventKind, JobEvent
from .queue import Queue
from .queue_events import QueueEvents
from .tick import TickResult, tick
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "Backend", "BackendError", "BackendUnavailable", "Backoff", "BunqError", "Capability",
    "ConfigError", "DelayedError", "DependencyError", "DlqConfig", "DlqEntry", "DuplicateJob",
    "FailureReason", "GroupFull", "FlowJob", "FlowProducer", "FlowResult", "Job", "JobNotFound",
    "JobOptions", "JobState", "JobStateError", "Lease", "LeaseLost", "PayloadTooLarge", "Queue",
    "QueueLimits", "QueueEvents", "JobEvent", "EventKind", "JobContext", "JobCancelled",
    "JobFailed", "WaitTimeout",
    "Retry", "Schedule", "Scheduler", "Settle", "TickResult", "UnrecoverableError",
    "UnsupportedError", "ValidationError", "Worker", "connect", "tick", "__version__",
]  # fmt: skip
