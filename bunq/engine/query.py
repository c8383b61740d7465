"""Read side: get one job, list by state, counts, queue names, results, progress, logs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..codec import unpack
from ..errors import JobNotFound, ValidationError
from ..job import Job, JobId, JobState
from ..validate import page, storable
from .core import Core
from .record import CHILDREN, COMPLETED, WAITING, Rec, snapshot
from .shard import Shard

MAX_PAGE = 10_000


def result_of(core: Core, rec: Rec) -> Any:
    """Return the decoded result of a completed ``rec`` (None once evicted from the LRU)."""
    if rec.state is not COMPLETED:
        return None
    with core.xlock:
        blob = core.results.peek(rec.id)
    return unpack(blob)


def get_job(core: Core, job_id: JobId) -> Job | None:
    """Return a snapshot of the job (with its attempt history), or None."""

    def view(shard: Shard, rec: Rec) -> Job:
        return snapshot(rec, core.clock(), result_of(core, rec), history=True)

    job: Job | None = core.locked(job_id, view)
    return job


def _sorted(recs: list[Rec], key: Callable[[Rec], Any]) -> list[Rec]:
    recs.sort(key=key)
    return recs


def get_jobs(core: Core, queue: str, state: JobState, offset: int = 0,
             limit: int = 100) -> list[Job]:  # fmt: skip
    """List jobs of ``queue`` in ``state``, in the SQL backends' orders.

    waiting/paused/active/waiting-children: ready order; delayed: by run
    time (O(jobs in the shard)); completed/failed: most recently finished
    first (O(log n + page) through the queue's time index).
    """
    shard = core.route(queue)
    state = JobState.parse(state)
    start, limit = page(offset, limit)
    stop = start + min(limit, MAX_PAGE)
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None:
            return []
        now = core.clock()
        by_order = Rec.order_key
        mine = [r for r in shard.jobs.values() if r.queue == queue] if state not in (
            JobState.ACTIVE, JobState.COMPLETED, JobState.FAILED) else []  # fmt: skip
        if state is JobState.WAITING or state is JobState.PAUSED:
            if (state is JobState.PAUSED) != q.paused:
                return []
            recs = _sorted([r for r in mine if r.state is WAITING and r.run_at <= now], by_order)
        elif state is JobState.DELAYED:
            recs = _sorted([r for r in mine if r.state is WAITING and r.run_at > now],
                           lambda r: (r.run_at, r.signed_seq()))  # fmt: skip
        elif state is JobState.WAITING_CHILDREN:
            recs = _sorted([r for r in mine if r.state is CHILDREN], by_order)
        elif state is JobState.ACTIVE:
            recs = _sorted([r for r in shard.active.values() if r.queue == queue], by_order)
        else:  # a page of the time index: O(log n + page)
            finished = q.completed if state is JobState.COMPLETED else q.dlq
            recs = finished.newest(start, stop - start)
            return [snapshot(r, now, result_of(core, r)) for r in recs]
        return [snapshot(r, now, result_of(core, r)) for r in recs[start:stop]]


def counts(core: Core, queue: str) -> dict[JobState, int]:
    """Return the number of jobs per state, O(1) from running counters."""
    shard = core.route(queue)
    out = dict.fromkeys(JobState, 0)
    with shard.lock:
        q = shard.queues.get(queue)
        if q is None:
            return out
        shard.promote(core.clock())
        out[JobState.DELAYED] = q.n_delayed
        out[JobState.ACTIVE] = q.n_active
        out[JobState.COMPLETED] = len(q.completed)
        out[JobState.FAILED] = len(q.dlq)
        out[JobState.WAITING_CHILDREN] = q.n_children
        out[JobState.PAUSED if q.paused else JobState.WAITING] = q.n_waiting
    return out


def completed_retired(core: Core, queue: str) -> int:
    """Completed jobs of ``queue`` the retention bounds dropped (``completed_max_count``,
    ``completed_max_age``) and no clean or obliterate removed since: ``bunq serve``
    adds them to ``GetJobCounts.completed``, as bunqueue counts every completed job."""
    shard = core.route(queue)
    with shard.lock:
        q = shard.queues.get(queue)
        return 0 if q is None else q.completed_dropped


def queues(core: Core) -> list[str]:
    """Return the names of queues holding jobs or settings, sorted."""
    names: set[str] = set()
    for shard in core.shards:
        with shard.lock:
            names.update(n for n, q in shard.queues.items() if q.has_row or q.total())
    return sorted(names)


def get_children_results(core: Core, parent_id: JobId) -> dict[JobId, Any]:
    """Return {child id: result} for the completed children of ``parent_id``."""
    with core.xlock:
        kids = dict(core.children.get(parent_id, {}))
    out: dict[JobId, Any] = {}
    for child, queue in kids.items():
        shard = core.route(queue)
        with shard.lock:
            rec = shard.jobs.get(child)
            if rec is not None and rec.state is COMPLETED:
                out[child] = result_of(core, rec)
    return out


def update_progress(core: Core, job_id: JobId, progress: int) -> None:
    """Set a job's progress (0-100).

    :raises ValidationError: progress is not an integer in [0, 100].
    :raises JobNotFound: no such job.
    """
    if isinstance(progress, bool) or not isinstance(progress, int) or not 0 <= progress <= 100:
        raise ValidationError("progress must be an integer in [0, 100]", field="progress")

    def set_(shard: Shard, rec: Rec) -> bool:
        rec.progress = progress
        shard.touch(rec)
        return True

    if not core.locked(job_id, set_, False):
        raise JobNotFound(f"no job {job_id!r}", job_id=job_id)


def add_log(core: Core, job_id: JobId, line: str) -> None:
    """Append a log line to a job (kept in memory; bounded per job and overall).

    :raises ValidationError: ``line`` is not a string.
    :raises JobNotFound: no such job.
    """
    if not isinstance(line, str):
        raise ValidationError("a log line must be a string", field="line")
    cfg = core.config
    line = storable(line, cfg.log_line_max)

    def append(shard: Shard, rec: Rec) -> bool:
        with core.xlock:
            lines = core.logs.get(job_id)
            if lines is None:
                lines = []
                core.logs.put(job_id, lines)
            lines.append(line)
            keep = cfg.log_lines_max
            if rec.opts.keep_logs is not None:
                keep = min(keep, rec.opts.keep_logs)
            if len(lines) > keep:
                del lines[: len(lines) - keep]
        return True

    if not core.locked(job_id, append, False):
        raise JobNotFound(f"no job {job_id!r}", job_id=job_id)


def get_logs(core: Core, job_id: JobId) -> list[str]:
    """Return a job's log lines, oldest first ([] when none are kept)."""
    with core.xlock:
        return list(core.logs.peek(job_id) or [])
