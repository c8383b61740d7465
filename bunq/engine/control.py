"""Queue control: pause/resume, drain, clean, obliterate, limits, and kv records."""

from __future__ import annotations

from ..errors import ConfigError
from ..job import JobId, JobState
from ..queueconfig import QueueLimits
from ..validate import MAX_LIMIT, duration, integer, kv_key
from .core import Core
from .record import CHILDREN, WAITING, Rec


def pause(core: Core, queue: str) -> None:
    """Stop leases from ``queue`` (its waiting jobs count as paused)."""
    shard = core.route(queue)
    with shard.lock:
        q = shard.queue(queue)
        q.paused = True
        shard.touch_queue(q)


def resume(core: Core, queue: str) -> None:
    """Let ``queue`` lease again and wake its long-poll waiters."""
    shard = core.route(queue)
    with shard.lock:
        q = shard.queue(queue)
        q.paused = False
        shard.touch_queue(q)
        q.wake(shard.lock)


def is_paused(core: Core, queue: str) -> bool:
    """Return whether ``queue`` is paused."""
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        return q is not None and q.paused


def drain(core: Core, queue: str) -> int:
    """Remove waiting, delayed and waiting-children jobs; return how many."""
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None:
            return 0
        gone = [r for r in shard.jobs.values()
                if r.queue == queue and (r.state is WAITING or r.state is CHILDREN)]  # fmt: skip
        for rec in gone:
            shard.forget(q, rec)
    return len(gone)


def clean(core: Core, queue: str, grace_ms: int, limit: int, state: JobState) -> list[JobId]:
    """Remove up to ``limit`` jobs in ``state`` older than ``grace_ms``; return their ids.

    completed/failed jobs are aged by when they finished (found through their
    time index in O(log n + limit)), waiting/delayed ones by when they were
    created (oldest first; a scan of the shard).

    :raises ConfigError: ``state`` is active, waiting-children or paused.
    """
    state = JobState.parse(state)
    if state in (JobState.ACTIVE, JobState.WAITING_CHILDREN, JobState.PAUSED):
        raise ConfigError(f"clean does not remove {state.value} jobs")
    shard = core.route(queue)
    grace_ms, limit = duration(grace_ms, "grace_ms"), integer(limit, "limit", 0, MAX_LIMIT)
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None:
            return []
        now = core.clock()
        before = now - grace_ms
        recs: list[Rec]
        if state is JobState.COMPLETED or state is JobState.FAILED:
            finished = q.completed if state is JobState.COMPLETED else q.dlq
            recs = finished.until(before, max(limit, 0))  # O(log n + limit)
        else:
            delayed = state is JobState.DELAYED
            recs = [r for r in shard.jobs.values()
                    if r.queue == queue and r.state is WAITING and r.created_at <= before
                    and (r.run_at > now) == delayed]  # fmt: skip
            recs.sort(key=lambda r: r.created_at)
        gone = recs[: max(limit, 0)]
        for rec in gone:
            shard.forget(q, rec)
        if gone and state is JobState.COMPLETED:
            q.completed_dropped = 0  # older than any kept: a clean reaching those reaches them
    return [r.id for r in gone]


def obliterate(core: Core, queue: str, force: bool = False) -> None:
    """Remove the queue, its jobs and its settings.

    :raises ConfigError: the queue has active jobs and ``force`` is False.
    """
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None:
            return
        if q.n_active and not force:
            raise ConfigError(f"queue {queue!r} has active jobs; obliterate(force=True)")
        for rec in [r for r in shard.jobs.values() if r.queue == queue]:
            shard.forget(q, rec)
        shard.drop_queue(queue)


def set_limits(core: Core, queue: str, limits: QueueLimits) -> None:
    """Install rate, concurrency and group limits (the rate bucket starts full)."""
    if not isinstance(limits, QueueLimits):
        raise ConfigError("limits must be a QueueLimits")
    shard = core.route(queue)
    with shard.lock:
        q = shard.queue(queue)
        q.set_limits(limits, core.clock() / 1000)
        shard.touch_queue(q)
        q.wake(shard.lock)


def get_limits(core: Core, queue: str) -> QueueLimits:
    """Return the queue's limits (all unlimited by default)."""
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        return QueueLimits() if q is None or q.limits is None else q.limits


# -- small shared records (cron schedules) -----------------------------------------------------
def kv_get(core: Core, ns: str, key: str) -> bytes | None:
    """Return the value under (ns, key), or None."""
    with core.kv_lock:
        return core.kv.get(ns, {}).get(key)


def kv_put(core: Core, ns: str, key: str, value: bytes, expected: bytes | None = None,
           create: bool = False) -> bool:  # fmt: skip
    """Compare-and-set ``value``; ``create`` writes only if absent. Return whether written."""
    kv_key(ns, key)  # what the write-behind can store
    with core.kv_lock:
        space = core.kv.get(ns)
        current = None if space is None else space.get(key)
        if create and current is not None:
            return False
        if not create and expected is not None and current != expected:
            return False
        core.kv.setdefault(ns, {})[key] = bytes(value)
        if core.kv_dirty is not None:
            core.kv_dirty.add((ns, key))
    return True


def kv_delete(core: Core, ns: str, key: str) -> bool:
    """Delete (ns, key); return whether it existed."""
    with core.kv_lock:
        space = core.kv.get(ns)
        if space is None or key not in space:
            return False
        del space[key]
        if not space:
            del core.kv[ns]
        if core.kv_dirty is not None:
            core.kv_dirty.add((ns, key))
    return True


def kv_list(core: Core, ns: str) -> dict[str, bytes]:
    """Return every (key: value) of namespace ``ns``, sorted by key."""
    with core.kv_lock:
        return dict(sorted(core.kv.get(ns, {}).items()))
