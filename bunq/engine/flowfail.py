"""What a flow child's dead-lettering does to its parent, and ``remove_child_dependency``.

Every move into the DLQ goes through :meth:`Shard.to_failed`, which notes a
child that has a parent; after the shard lock is released, the operation that
dead-lettered it (fail, sweep, discard) calls :func:`settle_flows`, which
applies the child's policy (:class:`bunq.jobrules.FlowFailure`) to its parent
under the parent's shard lock and ``xlock`` (the order ``complete`` uses):

``WAIT``      nothing: the parent keeps waiting (BullMQ's default)
``IGNORE``    the child counts as done for the parent
``REMOVE``    the same (the failure is not reported as ignored)
``CONTINUE``  the parent stops waiting for all its children and runs now
``FAIL``      the parent goes to the DLQ (reason ``dependency_failed``), and its
              own policy then applies to its parent

A parent that is no longer waiting for that child (already released, or gone)
is left alone, so a policy applies once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import JobNotFound, JobStateError
from ..job import FailureReason, JobId
from ..jobrules import FlowFailure
from .core import Core
from .record import CHILDREN, COMPLETED, FAILED, Rec


def settle_flows(core: Core) -> None:
    """Apply the parent policy of every child dead-lettered since the last call."""
    for shard in core.shards:
        pending = shard.failed_children
        while pending:
            try:
                child_id, queue, opts, error = pending.popleft()
            except IndexError:
                break
            policy = FlowFailure.of(opts)
            if policy is not FlowFailure.WAIT:
                _apply(core, opts.parent_id, child_id, queue, policy, error)


def _unregister(core: Core, parent: Rec, deps: Any) -> int:
    """Stop ``parent`` waiting on ``deps`` (xlock held); return how many it was waiting on."""
    n = 0
    for dep in deps:
        waiting = core.waiting_on.get(dep)
        if waiting is not None and parent in waiting:
            waiting.discard(parent)
            n += 1
            if not waiting:
                del core.waiting_on[dep]
    return n


def _apply(core: Core, parent_id: str, child_id: str, queue: str, policy: FlowFailure,
           error: str | None) -> tuple[bool, str | None]:  # fmt: skip
    """Apply ``policy`` to the parent -> (applied, the parent's queue when it left
    waiting-children)."""
    found = core.find(parent_id)
    if found is None:
        return False, None
    shard = found[0]
    with shard.lock:
        parent = shard.jobs.get(parent_id)
        if parent is None or parent.state is not CHILDREN:
            return False, None
        now = core.clock()
        with core.xlock:
            if policy in (FlowFailure.IGNORE, FlowFailure.REMOVE):
                if not _unregister(core, parent, (child_id,)):
                    return False, None
                parent.pending -= 1
            else:
                if child_id not in parent.opts.depends_on:
                    return False, None
                _unregister(core, parent, parent.opts.depends_on)
                parent.pending = 0
        if policy is FlowFailure.REMOVE:  # no longer a dependency, after a restart too
            deps = tuple(d for d in parent.opts.depends_on if d != child_id)
            parent.opts = replace(parent.opts, depends_on=deps)
            parent.saved = False  # written again whole: the options changed
        q = shard.queues[parent.queue]
        if parent.pending > 0:
            if shard.dirty is not None:
                shard.dirty[parent.id] = parent
            shard.touch(parent)
            return True, None
        shard.leave_children(q, parent)
        if policy is FlowFailure.FAIL:
            parent.error = f"child {queue}:{child_id} failed: {error or 'unknown error'}"
            parent.reason = FailureReason.DEPENDENCY_FAILED
            shard.to_failed(q, parent, now)  # notes the parent's own policy in turn
            shard.drop_unique(parent, held_only=True)
        else:
            parent.run_at = now
            shard.to_waiting(q, parent, now)
        return True, parent.queue


def remove_child_dependency(core: Core, child_id: JobId) -> tuple[bool, str | None]:
    """Make the parent of ``child_id`` stop waiting for it -> (removed, the parent's queue
    when it now runs). False when the parent is gone or no longer waits for the child.

    :raises JobNotFound: no such child. :raises JobStateError: the job has no parent.
    """
    found = core.find(child_id)
    if found is None:
        raise JobNotFound(f"Job not found: {child_id}", job_id=child_id)
    child = found[1]
    if child.opts.parent_id is None:
        raise JobStateError(child_id, "without a parent", "remove child dependency")
    out = _apply(core, child.opts.parent_id, child_id, child.queue, FlowFailure.REMOVE, None)
    settle_flows(core)
    if core.store is not None:
        core.store.kick()
    return out


def released_on_restart(deps: list[Rec]) -> tuple[list[Rec], bool]:
    """Recovery: of a waiting parent's not-completed children, those it still waits for,
    and whether a ``continue_parent_on_failure`` child in the DLQ released it."""
    left = []
    for dep in deps:
        if dep.state is FAILED and dep.opts.parent_id is not None:
            policy = FlowFailure.of(dep.opts)
            if policy is FlowFailure.CONTINUE:
                return [], True
            if policy is FlowFailure.IGNORE:
                continue
        if dep.state is not COMPLETED:
            left.append(dep)
    return left, False
