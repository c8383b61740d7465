"""Per-queue state inside a shard: lanes, counters, finished jobs, control, waiters."""

from __future__ import annotations

import threading

from .._core import TokenBucket
from ..queueconfig import DlqConfig, QueueLimits
from .finished import Finished
from .lanes import Lanes
from .listing import Listing
from .record import Rec

DEFAULT_DLQ = DlqConfig()


class QueueState:
    """Everything one queue owns inside its shard (guarded by the shard lock).

    Running counters make :meth:`~bunq.engine.Engine.counts` O(1):
    ``n_waiting`` (ready lanes plus ``parked`` jobs whose TTL ran out at the
    head of a lane; the next sweep moves those to the DLQ), ``n_delayed``
    (in the shard's delayed heap), ``n_active`` and ``n_children``. Completed
    jobs and DLQ entries are indexed by time (:class:`~bunq.engine.finished.Finished`),
    so the oldest is dropped in O(1) when a bound is reached and a time range
    is found in O(log n + k). The counters move only through the shard's
    transition methods (:class:`~bunq.engine.shard.Shard`).
    """

    __slots__ = (
        "name", "lanes", "parked", "completed", "dlq", "paused", "limits", "bucket",
        "dlq_config", "has_row", "cond", "nwait", "n_waiting", "n_delayed", "n_active",
        "n_children", "dlq_evicted", "version", "stuck", "completed_dropped", "group_pending",
        "delayed_listing",
    )  # fmt: skip

    def __init__(self, name: str, jobs: dict[str, Rec]) -> None:
        """:param jobs: the shard's records (the finished-job indexes look ids up there)."""
        self.name = name
        self.lanes = Lanes()
        self.parked: dict[str, Rec] = {}
        self.completed = Finished(jobs)
        self.dlq = Finished(jobs)
        self.paused = False
        self.limits: QueueLimits | None = None
        self.bucket: TokenBucket | None = None
        self.dlq_config: DlqConfig = DEFAULT_DLQ
        self.has_row = False  # paused/limits/DLQ settings were ever set (listed by queues())
        self.cond: threading.Condition | None = None
        self.nwait = 0
        self.n_waiting = 0
        self.n_delayed = 0
        self.n_active = 0
        self.n_children = 0
        self.group_pending: dict[str, int] = {}  # waiting + delayed jobs per FIFO group
        self.dlq_evicted = 0  # DLQ entries dropped at entry since the last sweep
        # completed jobs the retention bounds dropped (count, age): counts() still
        # reports them as completed, as bunqueue (which keeps them all) would
        self.completed_dropped = 0
        # `version` moves whenever a job may have become leasable (ready, or a slot
        # freed); a lease that found only blocked lanes records it in `stuck`, and
        # wait() blocks until it moves again instead of spinning.
        self.version = 0
        self.stuck = -1
        # this queue's delayed jobs in listing order, once a page of them was read
        self.delayed_listing: Listing | None = None

    def total(self) -> int:
        """Return how many jobs the queue holds in any state."""
        return (self.n_waiting + self.n_delayed + self.n_active + self.n_children
                + len(self.completed) + len(self.dlq))  # fmt: skip

    def take_evicted(self) -> int:
        """Return how many DLQ entries were dropped at entry since the last call."""
        n, self.dlq_evicted = self.dlq_evicted, 0
        return n

    def park(self, rec: Rec) -> None:
        """Set aside a ready ``rec`` whose TTL ran out (still counted waiting)."""
        self.parked[rec.id] = rec

    def idle(self) -> bool:
        """True when the queue can be dropped: no jobs, no settings, no waiters."""
        return (not self.has_row and not self.nwait and self.total() == 0
                and not self.completed_dropped)  # fmt: skip

    def wake(self, lock: threading.Lock) -> None:
        """Note that a job may be leasable; wake long-poll waiters (lock held).

        Written out in :meth:`.shard.Shard.leave_active` and :meth:`.shard.Shard.complete`
        (the drain's hot path): a change here changes them too."""
        self.version += 1
        if self.nwait:
            self.condition(lock).notify_all()

    def condition(self, lock: threading.Lock) -> threading.Condition:
        """Return the long-poll condition (bound to the shard lock), made on first use."""
        if self.cond is None:
            self.cond = threading.Condition(lock)
        return self.cond

    def set_limits(self, limits: QueueLimits, now_s: float) -> None:
        """Install ``limits``; the rate bucket starts full, group windows empty."""
        self.limits = None if limits == QueueLimits() else limits
        self.bucket = None
        if limits.rate_max:
            per_s = limits.rate_max * 1000 / max(limits.rate_duration, 1)
            self.bucket = TokenBucket(limits.rate_max, per_s, now_s)
        self.lanes.reset_limits()

    def admissible(self, n: int, now_s: float) -> int:
        """Return how many of ``n`` leases the queue's limits allow right now."""
        limits = self.limits
        if limits is None:
            return n
        if limits.concurrency:
            n = min(n, limits.concurrency - self.n_active)
        if self.bucket is not None:
            n = min(n, int(self.bucket.tokens(now_s)))
        return n
