"""Flow failure policies on SQL: what a dead-lettered child does to its parent.

The semantics are the memory engine's (:mod:`bunq.engine.flowfail`,
:class:`bunq.jobrules.FlowFailure`). Every move into the DLQ (a final
failure, a stall past the budget, a TTL, a discard) calls
:meth:`SqlFlowFailures._children_failed` in its own transaction. The ``deps``
rows are the truth of what a parent still waits for: a policy deletes the
child's row (``IGNORE``/``REMOVE``) or every row of the parent (``CONTINUE``,
``FAIL``), so a child retried and completed later releases nothing twice.
Cost: a few primary-key statements per child and per parent dependency.
"""

from __future__ import annotations

from dataclasses import replace

from ...codec import options_blob, options_from_blob
from ...errors import JobNotFound, JobStateError
from ...job import FailureReason, JobId
from ...jobrules import FlowFailure
from .core import SqlCore, Tx, unit_of_work

MAX_DEPTH = 100  # a FAIL chain climbs at most this many parents (flows are at most 100 deep)


class SqlFlowFailures(SqlCore):
    """Part of SqlBackend: flow failure policies and ``remove_child_dependency``."""

    def _children_failed(self, tx: Tx, ids: list[JobId], now: int) -> set[str]:
        """Apply the parent policy of each dead-lettered job in ``ids`` (those with a
        parent); return the queues whose parent became waiting."""
        woken: set[str] = set()
        todo = list(ids)
        for _ in range(MAX_DEPTH * max(len(ids), 1)):
            if not todo:
                break
            child = todo.pop()
            row = tx.q("ff_child", id=child)
            if not row:
                continue
            parent, blob, queue, error = row[0]
            policy = FlowFailure.of(options_from_blob(bytes(blob)))
            if policy is FlowFailure.WAIT:
                continue
            failed = self._apply(tx, parent, child, queue, policy, error, now, woken)
            if failed:
                todo.append(parent)
        return woken

    def _apply(self, tx: Tx, parent: str, child: str, queue: str, policy: FlowFailure,
               error: str | None, now: int, woken: set[str]) -> bool:  # fmt: skip
        """Apply ``policy``; return True when the parent was dead-lettered."""
        if not tx.q("ff_drop_dep", parent=parent, child=child):
            return False  # the parent no longer waits for this child
        if policy in (FlowFailure.IGNORE, FlowFailure.REMOVE):
            if policy is FlowFailure.REMOVE:
                self._forget_dependency(tx, parent, child)
            rows = tx.q("ff_pending_down", id=parent)
            if rows and rows[0][0] <= 0:
                woken.update(r[0] for r in tx.q("ff_wake", id=parent, now=now))
            return False
        prow = tx.q("ff_parent", id=parent)
        if not prow:
            return False
        for dep in options_from_blob(bytes(prow[0][0])).depends_on:
            tx.q("ff_drop_dep", parent=parent, child=dep)
        if policy is FlowFailure.CONTINUE:
            woken.update(r[0] for r in tx.q("ff_continue", id=parent, now=now))
            return False
        why = f"child {queue}:{child} failed: {error or 'unknown error'}"
        rows = tx.q("ff_fail_parent", id=parent, now=now, error=why,
                    reason=FailureReason.DEPENDENCY_FAILED.value)  # fmt: skip
        if not rows:
            return False
        tx.q("release_unique", id=parent)
        return True

    @unit_of_work(idempotent=False)
    def remove_child_dependency(self, child_id: JobId) -> tuple[bool, str | None]:
        """The parent of ``child_id`` stops waiting for it -> (removed, the parent's queue
        when it now runs); see :func:`bunq.engine.flowfail.remove_child_dependency`."""
        woken: set[str] = set()
        with self._begin() as tx:
            now = self.clock()
            rows = tx.q("ff_parent_of", id=child_id)
            if not rows:
                raise JobNotFound(f"Job not found: {child_id}", job_id=child_id)
            parent, queue = rows[0]
            if parent is None:
                raise JobStateError(child_id, "without a parent", "remove child dependency")
            if not tx.q("ff_waiting", id=parent):
                return False, None
            removed = self._apply_remove(tx, parent, child_id, queue, now, woken)
        for q in woken:
            self._ring(q)
        return removed, next(iter(woken), None)

    def _apply_remove(self, tx: Tx, parent: str, child: str, queue: str, now: int,
                      woken: set[str]) -> bool:  # fmt: skip
        if not tx.q("ff_drop_dep", parent=parent, child=child):
            return False
        self._forget_dependency(tx, parent, child)
        rows = tx.q("ff_pending_down", id=parent)
        if rows and rows[0][0] <= 0:
            woken.update(r[0] for r in tx.q("ff_wake", id=parent, now=now))
        return True

    def _forget_dependency(self, tx: Tx, parent: str, child: str) -> None:
        """Drop ``child`` from the parent's ``depends_on`` (its options blob)."""
        rows = tx.q("ff_parent", id=parent)
        if rows:
            opts = options_from_blob(bytes(rows[0][0]))
            deps = tuple(d for d in opts.depends_on if d != child)
            tx.q("ff_opts", id=parent, opts=options_blob(replace(opts, depends_on=deps)))
