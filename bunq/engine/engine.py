"""Engine: the composition root of the sharded in-memory job engine.

It owns nothing but wiring: the state lives in :class:`~bunq.engine.core.Core`
(shards and side tables), and each operation is a function of one flow
module, bound here as a method:

==============  ===========================================================
module          operations
==============  ===========================================================
``push``        add
``pull``        lease, wait
``ack``         complete, complete_many, fail, extend
``sweep``       sweep, the maintenance thread
``dlq``         dlq_list, dlq_retry, dlq_purge, dlq_size, dlq_remove, dlq_config
``query``       get_job, get_jobs, counts, queues, children results, progress, logs
``control``     pause, resume, drain, clean, obliterate, limits, kv records
``jobops``      remove_job, retry_job, promote, priority, delay, data, discard...
==============  ===========================================================

The engine implements the :class:`~bunq.backends.base.Backend` contract;
:class:`~bunq.backends.embedded.EmbeddedBackend` adds the URL, capabilities
and optional SQLite write-behind around it.
"""

from __future__ import annotations

from typing import Any

from ..job import now_ms
from ..values import SweepResult
from . import ack, control, dlq, flowfail, jobops, parents, pull, push, query
from . import sweep as sweeps
from .config import EngineConfig
from .core import Core

__all__ = ["Engine", "EngineConfig"]


class Engine(Core):
    """The sharded in-memory engine (thread-safe; a lock per shard).

    :param clock: epoch-ms clock for every decision (tests pass a fake one).
    :param config: :class:`EngineConfig`; keyword arguments override fields.
    """

    def __init__(self, *, clock: Any = now_ms, config: EngineConfig | None = None,
                 **overrides: Any) -> None:  # fmt: skip
        super().__init__(clock=clock, config=config, **overrides)
        self._maintenance: sweeps.Maintenance | None = None

    add = push.add
    lease = pull.lease
    wait = pull.wait
    complete = ack.complete
    complete_many = ack.complete_many
    fail = ack.fail
    extend = ack.extend

    get_job = query.get_job
    get_jobs = query.get_jobs
    counts = query.counts
    completed_retired = query.completed_retired
    queues = query.queues
    get_children_results = query.get_children_results
    set_parent = parents.set_parent
    remove_child_dependency = flowfail.remove_child_dependency
    update_progress = query.update_progress
    add_log = query.add_log
    get_logs = query.get_logs

    pause = control.pause
    resume = control.resume
    is_paused = control.is_paused
    drain = control.drain
    clean = control.clean
    obliterate = control.obliterate
    set_limits = control.set_limits
    get_limits = control.get_limits
    kv_get = control.kv_get
    kv_put = control.kv_put
    kv_delete = control.kv_delete
    kv_list = control.kv_list

    dlq_list = dlq.dlq_list
    dlq_retry = dlq.dlq_retry
    dlq_purge = dlq.dlq_purge
    dlq_size = dlq.dlq_size
    dlq_remove = dlq.dlq_remove
    dlq_config = dlq.dlq_config

    remove_job = jobops.remove_job
    retry_job = jobops.retry_job
    promote_job = jobops.promote_job
    promote_jobs = jobops.promote_jobs
    change_priority = jobops.change_priority
    change_delay = jobops.change_delay
    update_data = jobops.update_data
    discard_job = jobops.discard_job
    clear_logs = jobops.clear_logs
    counts_per_priority = jobops.counts_per_priority
    dedup_job_id = jobops.dedup_job_id
    remove_dedup_key = jobops.remove_dedup_key

    def sweep(self) -> SweepResult:
        """Recover expired leases at once, expire TTLs, run DLQ maintenance and cleanup."""
        return sweeps.sweep(self, phases=1)

    def start_maintenance(self, interval_ms: int = 1_000) -> None:
        """Start the background sweeper (two-phase stall detection); idempotent."""
        if self._maintenance is None:
            self._maintenance = sweeps.Maintenance(self, interval_ms)

    def stop_maintenance(self) -> None:
        """Stop the background sweeper, if running."""
        if self._maintenance is not None:
            self._maintenance.stop()
            self._maintenance = None

    def _check(self) -> None:
        """Assert every shard's invariants (:meth:`Shard._check`); O(records), for tests."""
        for shard in self.shards:
            with shard.lock:
                shard._check()

    def close(self) -> None:
        """Stop background work. The engine's state is dropped with the object."""
        self.stop_maintenance()
