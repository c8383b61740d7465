"""Per-job operations over Redis (see :mod:`bunq.backends.jobops`): ``jobop.lua``.

One script call per operation, in the job's queue slot: it reads the job's
state, refuses the states the operation does not accept, and moves the job
between the queue's sorted sets with ``common.lua``'s helpers (``unplace`` /
``place``, ``forget``, ``release_unique``), so the ZCARD-based counts follow.
The job's queue comes from the id index. The functions take the
:class:`~.backend.RedisBackend` as ``self`` and are bound on it as methods.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...codec import options_blob, pack
from ...errors import JobNotFound, JobStateError
from ...job import JobId, JobState
from ...jobrules import check_count, check_delay, check_keep, check_key, check_priority
from ..base import check_queue_name as _qn
from .errors import translated
from .scripts import SCRIPTS

_VERBS = {
    "remove": "remove", "retry": "retry", "promote": "promote",
    "priority": "change the priority of", "delay": "change the delay of", "data": "update",
    "discard": "discard", "clear_logs": "clear the logs of",
}  # fmt: skip


def _op(self: Any, job_id: JobId, op: str, *args: Any) -> Any:
    """Run ``op`` on the job; JobNotFound / JobStateError as the script answers."""
    queue = self._queue_of(job_id)
    if queue is None:
        raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
    with translated(op):
        got = SCRIPTS.jobop.run(self._r, [self.keys.queue(queue)],
                                [self._now(), op, job_id, *args])  # fmt: skip
    code = int(got[0])
    if code == 0:
        raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
    if code < 0:
        raise JobStateError(job_id, got[1].decode(), _VERBS[op])
    if op == "remove":
        self._unindex([job_id])
    if op in ("discard", "unlink_parent"):  # a flow policy may be in the outbox
        self._deliver(queue)
    return got


def _queue_call(self: Any, queue: str, op: str, arg: Any) -> Any:
    with translated(op):
        return SCRIPTS.jobop.run(self._r, [self.keys.queue(_qn(queue))],
                                 [self._now(), op, "", arg])[0]  # fmt: skip


def _queue_call_all(self: Any, queue: str, op: str) -> Any:
    with translated(op):
        return SCRIPTS.jobop.run(self._r, [self.keys.queue(_qn(queue))], [self._now(), op, ""])


def remove_job(self: Any, job_id: JobId) -> bool:
    try:
        _op(self, job_id, "remove")
    except JobNotFound:
        return False
    return True


def retry_job(self: Any, job_id: JobId) -> None:
    _op(self, job_id, "retry")


def promote_job(self: Any, job_id: JobId) -> None:
    _op(self, job_id, "promote")


def promote_jobs(self: Any, queue: str, count: int) -> int:
    count = check_count(count)
    return 0 if count == 0 else int(_queue_call(self, queue, "promote_many", count))


def change_priority(self: Any, job_id: JobId, priority: int) -> None:
    priority = check_priority(priority)
    job = self.get_job(job_id)
    if job is None:
        raise JobNotFound(f"no job {job_id!r}", job_id=job_id)
    _op(self, job_id, "priority", priority, options_blob(replace(job.opts, priority=priority)))


def change_delay(self: Any, job_id: JobId, delay: int) -> None:
    _op(self, job_id, "delay", check_delay(delay))


def update_data(self: Any, job_id: JobId, data: Any) -> None:
    _op(self, job_id, "data", pack(data, "data", self.max_payload))


def discard_job(self: Any, job_id: JobId) -> None:
    _op(self, job_id, "discard")


def remove_child_dependency(self: Any, child_id: JobId) -> tuple[bool, str | None]:
    """See :func:`bunq.engine.flowfail.remove_child_dependency` (here through the outbox:
    the child's queue drops the link, the parent's queue counts the dependency off)."""
    child = self.get_job(child_id)
    if child is None:
        raise JobNotFound(f"Job not found: {child_id}", job_id=child_id)
    if child.opts.parent_id is None:
        raise JobStateError(child_id, "without a parent", "remove child dependency")
    removed = int(_op(self, child_id, "unlink_parent")[2]) == 1
    parent = self.get_job(child.opts.parent_id) if removed else None
    woken = parent is not None and parent.state in (JobState.WAITING, JobState.DELAYED)
    return removed, parent.queue if woken and parent is not None else None


def clear_logs(self: Any, job_id: JobId, keep: int = 0) -> None:
    _op(self, job_id, "clear_logs", check_keep(keep))


def dedup_job_id(self: Any, queue: str, key: str) -> JobId | None:
    holder = _queue_call(self, queue, "uq_get", check_key(key))
    return None if holder is None else str(holder.decode())


def remove_dedup_key(self: Any, queue: str, key: str) -> bool:
    return bool(_queue_call(self, queue, "uq_del", check_key(key)))


def counts_per_priority(self: Any, queue: str) -> dict[int, int]:
    flat = _queue_call_all(self, queue, "by_priority")
    return {int(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
