"""A shard: the queues that hash to it, and every transition of their jobs.

All state of a shard is guarded by ``shard.lock``; every method here expects
the caller to hold it. The transition methods are the only code that moves a
record between containers or changes a counter, so the per-queue counters stay
exact; :meth:`Shard._check` recounts them (the tests run it after every step):

=========  ==========================================================
state      container
=========  ==========================================================
waiting    ``delayed`` heap (run_at > now), a ready lane, or ``parked``
active     ``active`` (scanned by the stall sweep)
completed  ``QueueState.completed`` (bounded; indexed by finish time)
failed     ``QueueState.dlq`` (bounded by the queue's DLQ max_entries; by DLQ time)
children   counted only; the engine's dependency index points at it
=========  ==========================================================

When a write-behind store is attached, every changed record is noted in
``dirty`` (id -> record, or None once removed) and written in batches
(:meth:`Shard.take_changes`).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from .._core import MinHeap
from .config import EngineConfig
from .qstate import QueueState
from .record import ACTIVE, CHILDREN, COMPLETED, FAILED, WAITING, Rec

UniqueKey = tuple[str, str]  # (queue, key)
Changes = tuple[dict[str, Rec | None], dict[UniqueKey, list[object] | None], set[str]]


class Shard:
    """Queues, records and indexes of one shard.

    :param index: position of the shard in the engine.
    :param config: the engine's bounds.
    :param on_forget: called (with the shard lock held) for every record that
        leaves the engine, so engine-wide side tables can drop it.
    """

    def __init__(self, index: int, config: EngineConfig,
                 on_forget: Callable[[Rec], None]) -> None:  # fmt: skip
        self.index = index
        self.config = config
        self.on_forget = on_forget
        self.lock = threading.Lock()
        self.jobs: dict[str, Rec] = {}
        self.active: dict[str, Rec] = {}
        self.queues: dict[str, QueueState] = {}
        self.delayed: MinHeap[str] = MinHeap()
        self.next_due = math.inf  # earliest run_at in `delayed` (may be early, never late)
        self.ttl: MinHeap[str] = MinHeap()
        self.unique: dict[UniqueKey, list[object]] = {}  # key -> [job_id, until or None]
        self.unique_ttl: MinHeap[UniqueKey] = MinHeap()
        self.candidates: dict[str, tuple[str | None, int]] = {}  # stall candidates -> fence
        self.seq = 0  # admission numbers: ms << 12 | counter, as the SQL backends
        self.eseq = 0  # entry numbers of ready lanes
        self.dirty: dict[str, Rec | None] | None = None
        self.dirty_unique: dict[UniqueKey, list[object] | None] | None = None
        self.dirty_queues: set[str] | None = None
        # flow children dead-lettered under this lock: (id, queue, opts, error), for
        # bunq.engine.flowfail.settle_flows to apply their parent policy after it
        self.failed_children: deque[tuple[str, str, Any, str | None]] = deque()

    # -- lookups -------------------------------------------------------------------------
    def queue(self, name: str) -> QueueState:
        """Return the state of queue ``name``, creating it."""
        q = self.queues.get(name)
        if q is None:
            q = self.queues[name] = QueueState(name, self.jobs)
        return q

    def next_seq(self, now: int, count: int = 1) -> int:
        """Reserve ``count`` fresh admission numbers (time-ordered); return the first.

        The numbers are the returned one and the ``count - 1`` that follow it.
        """
        base = now << 12
        first = base if base > self.seq else self.seq + 1
        self.seq = first + count - 1
        return first

    def restored_seq(self, seq: int) -> None:
        """Note a restored record's admission number: new numbers come after it."""
        if seq > self.seq:
            self.seq = seq

    def touch(self, rec: Rec) -> None:
        """Note that ``rec`` changed (for the write-behind store)."""
        if self.dirty is not None:
            self.dirty[rec.id] = rec

    def touch_queue(self, q: QueueState) -> None:
        """Note that a queue's settings changed (for the write-behind store)."""
        q.has_row = True
        if self.dirty_queues is not None:
            self.dirty_queues.add(q.name)

    def drop_queue(self, name: str) -> None:
        """Forget queue ``name`` and its settings (its jobs must be gone)."""
        del self.queues[name]
        if self.dirty_queues is not None:
            self.dirty_queues.add(name)

    def drop_idle_queues(self) -> None:
        """Forget queues with no jobs, settings or waiters (nothing to write: no row)."""
        for name in [n for n, q in self.queues.items() if q.idle()]:
            del self.queues[name]

    # -- write-behind ------------------------------------------------------------------------
    def track_changes(self) -> None:
        """Start noting changes for a write-behind store (nothing noted yet)."""
        self.dirty, self.dirty_unique, self.dirty_queues = {}, {}, set()

    def take_changes(self) -> Changes:
        """Hand over the changes noted so far (records, unique keys, queues); start afresh."""
        taken = (self.dirty or {}, self.dirty_unique or {}, self.dirty_queues or set())
        self.track_changes()
        return taken

    def give_back(self, changes: Changes) -> None:
        """Note again changes taken but not written, unless newer ones superseded them."""
        dirty, uniq, names = changes
        if self.dirty is None:
            return
        for jid, rec in dirty.items():
            self.dirty.setdefault(jid, rec)
        if self.dirty_unique is not None:
            for key, entry in uniq.items():
                self.dirty_unique.setdefault(key, entry)
        if self.dirty_queues is not None:
            self.dirty_queues |= names

    # -- time ------------------------------------------------------------------------------
    def promote(self, now: int) -> None:
        """Move delayed jobs whose run time came into their ready lanes."""
        if now < self.next_due:
            return
        jobs, queues = self.jobs, self.queues
        for jid, _ in self.delayed.pop_due(now):
            rec = jobs[jid]
            q = queues[rec.queue]
            q.n_delayed -= 1
            if q.delayed_listing is not None:
                q.delayed_listing.remove(rec)
            self.eseq += 1
            q.lanes.push(rec, self.eseq)
            q.n_waiting += 1
            q.wake(self.lock)
        self.next_due = self.delayed.peek()[1] if len(self.delayed) else math.inf

    # -- transitions -------------------------------------------------------------------------
    def to_waiting(self, q: QueueState, rec: Rec, now: int) -> None:
        """Make ``rec`` waiting: delayed until ``run_at``, else ready at once."""
        rec.state = WAITING
        if rec.run_at > now:
            self.delayed.push(rec.id, rec.run_at, rec.seq)
            if rec.run_at < self.next_due:
                self.next_due = rec.run_at
            q.n_delayed += 1
            if q.delayed_listing is not None:
                q.delayed_listing.add(rec)
        else:
            self.eseq += 1
            q.lanes.push(rec, self.eseq)
            q.n_waiting += 1
            q.wake(self.lock)
        if rec.expire_at is not None and rec.id not in self.ttl:
            self.ttl.push(rec.id, rec.expire_at)
        group = rec.group
        if group is not None:
            gp = q.group_pending
            gp[group] = gp.get(group, 0) + 1
        if self.dirty is not None:
            self.dirty[rec.id] = rec

    def leave_waiting(self, q: QueueState, rec: Rec) -> None:
        """Take a waiting (or delayed, or parked) ``rec`` out of its container."""
        if rec.group is not None:
            _group_left(q, rec.group)
        if self.delayed.discard(rec.id):
            q.n_delayed -= 1
            if q.delayed_listing is not None:
                q.delayed_listing.remove(rec)
            return
        if not q.lanes.discard(rec):
            q.parked.pop(rec.id, None)
        q.n_waiting -= 1

    def to_ready(self, q: QueueState, rec: Rec) -> None:
        """Make a new ``rec`` ready at once: no delay, no TTL, no group (admission).

        :meth:`to_waiting` narrowed to what such a job needs: straight into
        the ungrouped lane, no delayed heap, TTL heap or group lookup.
        """
        rec.state = WAITING
        rec.eseq = self.eseq = self.eseq + 1
        q.lanes.ready.push(rec.id, rec.priority, rec.lifo, rec.eseq)
        if q.lanes.listing is not None:
            q.lanes.listing.add(rec)
        q.n_waiting += 1
        q.version += 1
        if q.nwait:
            q.condition(self.lock).notify_all()
        if self.dirty is not None:
            self.dirty[rec.id] = rec

    def readied(self, q: QueueState, count: int) -> None:
        """Count ``count`` new records that a caller pushed onto ``q``'s ungrouped lane
        itself, as :meth:`to_ready` does for each (state, ``eseq`` and lane entry set
        by the caller): the counters move and waiters wake once for the run."""
        if not count:
            return
        q.n_waiting += count
        q.version += count
        if q.nwait:
            q.condition(self.lock).notify_all()

    def to_active(self, q: QueueState, rec: Rec, now: int, token: str, until: int,
                  owner: str) -> None:  # fmt: skip
        """Lease a ready ``rec`` (:meth:`Lanes.pick` took it out of its lane): one attempt."""
        q.n_waiting -= 1
        rec.state = ACTIVE
        rec.attempts += 1
        rec.token = token
        rec.lease_until = until
        rec.owner = owner
        rec.started_at = now
        self.active[rec.id] = rec
        q.n_active += 1
        group = rec.group
        if group is not None:
            ga = q.lanes.group_active
            ga[group] = ga.get(group, 0) + 1
            _group_left(q, group)
        if self.dirty is not None:
            self.dirty[rec.id] = rec

    def lease_ready(self, q: QueueState, n: int, now: int, token: str, until: int,
                    owner: str) -> list[Rec]:  # fmt: skip
        """Lease up to ``n`` jobs off the head of ``q``'s ungrouped lane (the caller saw
        no groups and no listing): :meth:`to_active` for each, written out in one loop
        (the lease is the drain's hot path: no call per job; the lane holds no grouped
        job). A job whose TTL ran out is parked instead (still counted waiting)."""
        ready, jobs, active, dirty = q.lanes.ready, self.jobs, self.active, self.dirty
        out: list[Rec] = []
        append = out.append
        while len(out) < n and len(ready):
            rec = jobs[ready.pop()]
            expire_at = rec.expire_at
            if expire_at is not None and expire_at <= now:
                q.park(rec)
                continue
            rec.state = ACTIVE
            rec.attempts += 1
            rec.token = token
            rec.lease_until = until
            rec.owner = owner
            rec.started_at = now
            active[rec.id] = rec
            if dirty is not None:
                dirty[rec.id] = rec
            append(rec)
        k = len(out)
        q.n_waiting -= k
        q.n_active += k
        return out

    def leave_active(self, q: QueueState, rec: Rec) -> None:
        """End ``rec``'s lease (the caller moves it on)."""
        del self.active[rec.id]
        q.n_active -= 1
        rec.token = None
        rec.lease_until = 0
        group = rec.group
        if group is not None:
            ga = q.lanes.group_active
            left = ga[group] - 1
            if left:
                ga[group] = left
            else:
                del ga[group]
        q.version += 1  # q.wake written out: no call per job
        if q.nwait:
            q.condition(self.lock).notify_all()

    def complete(self, q: QueueState, rec: Rec, now: int) -> None:
        """End ``rec``'s lease and record it completed; drop the oldest beyond the bound.

        :meth:`leave_active` is written out for an ungrouped job (a completion is the
        drain's hot path: one call per job, not two, nor the wake's).
        """
        if rec.group is not None:
            self.leave_active(q, rec)
        else:
            del self.active[rec.id]
            q.n_active -= 1
            rec.token = None
            rec.lease_until = 0
            q.version += 1
            if q.nwait:
                q.condition(self.lock).notify_all()
        rec.state = COMPLETED
        rec.finished_at = now
        rec.error = None
        if self.dirty is not None:
            self.dirty[rec.id] = rec
        evicted = q.completed.add(rec, now, self.config.completed_max_count)
        if evicted is not None:
            self.drop(evicted)
            q.completed_dropped += 1

    def to_failed(self, q: QueueState, rec: Rec, now: int) -> None:
        """Move ``rec`` into the DLQ; drop the oldest entry beyond ``max_entries``."""
        rec.state = FAILED
        rec.finished_at = now
        rec.dlq_at = now
        if self.dirty is not None:
            self.dirty[rec.id] = rec
        if rec.opts.parent_id is not None:
            self.failed_children.append((rec.id, rec.queue, rec.opts, rec.error))
        evicted = q.dlq.add(rec, now, max(q.dlq_config.max_entries, 0))
        if evicted is not None:
            self.drop(evicted)
            q.dlq_evicted += 1

    def to_children(self, q: QueueState, rec: Rec) -> None:
        """Park ``rec`` until its dependencies complete."""
        rec.state = CHILDREN
        q.n_children += 1
        if self.dirty is not None:
            self.dirty[rec.id] = rec

    def leave_children(self, q: QueueState, rec: Rec) -> None:
        """Take a ``rec`` waiting for its dependencies out of that state."""
        q.n_children -= 1

    def displace(self, q: QueueState, rec: Rec) -> None:
        """Take ``rec`` out of whichever container its state puts it in."""
        state = rec.state
        if state is WAITING:
            self.leave_waiting(q, rec)
        elif state is ACTIVE:
            self.leave_active(q, rec)
        elif state is COMPLETED:
            q.completed.remove(rec)
        elif state is FAILED:
            q.dlq.remove(rec)
        elif state is CHILDREN:
            self.leave_children(q, rec)

    def place(self, q: QueueState, rec: Rec, now: int) -> None:
        """Put a new, restored or recovered record where its state says."""
        self.jobs[rec.id] = rec
        state = rec.state
        if state is WAITING:
            self.to_waiting(q, rec, now)
        elif state is ACTIVE:
            self.active[rec.id] = rec
            q.n_active += 1
            if rec.group is not None:
                ga = q.lanes.group_active
                ga[rec.group] = ga.get(rec.group, 0) + 1
        elif state is COMPLETED:
            q.completed.add(rec, _first(rec.finished_at, rec.created_at))
        elif state is FAILED:
            q.dlq.add(rec, _first(rec.dlq_at, rec.finished_at, rec.created_at))
        else:
            q.n_children += 1
        self.touch(rec)

    def forget(self, q: QueueState, rec: Rec) -> None:
        """Remove ``rec`` from the engine entirely (and every key it holds)."""
        self.displace(q, rec)
        self.drop(rec)

    def drop(self, rec: Rec) -> None:
        """Forget a ``rec`` already out of its state's container (see :meth:`forget`)."""
        self.on_forget(rec)
        del self.jobs[rec.id]
        if rec.opts.unique_key is not None:  # (no call for the many without one)
            self.drop_unique(rec, held_only=False)
        if self.dirty is not None:
            self.dirty[rec.id] = None

    # -- unique keys -------------------------------------------------------------------------
    def put_unique(self, key: UniqueKey, job_id: str, until: int | None) -> None:
        """Give ``key`` to ``job_id`` until ``until`` (None: while the job is live)."""
        entry: list[object] = [job_id, until]
        self.unique[key] = entry
        self.unique_ttl.discard(key)
        if until is not None:
            self.unique_ttl.push(key, until)
        if self.dirty_unique is not None:
            self.dirty_unique[key] = entry

    def del_unique(self, key: UniqueKey) -> None:
        """Release ``key``."""
        if self.unique.pop(key, None) is not None:
            self.unique_ttl.discard(key)
            if self.dirty_unique is not None:
                self.dirty_unique[key] = None

    def drop_unique(self, rec: Rec, held_only: bool) -> None:
        """Release the unique key ``rec`` holds (``held_only``: only keys without a TTL)."""
        ukey = rec.opts.unique_key
        if ukey is None:
            return
        key = (rec.queue, ukey)
        entry = self.unique.get(key)
        if entry is not None and entry[0] == rec.id and not (held_only and entry[1] is not None):
            self.del_unique(key)

    # -- invariants ----------------------------------------------------------------------------
    def _check(self) -> None:
        """Assert that every counter and container agrees with the records' states.

        O(records of the shard): for tests (the engine's Hypothesis state
        machines run it after every step), never on a request path.
        """
        delayed = self.delayed
        delayed._check()
        assert not len(delayed) or self.next_due <= delayed.peek()[1], "next_due is late"
        assert set(self.active) == {j for j, r in self.jobs.items() if r.state is ACTIVE}
        assert len(delayed) == sum(q.n_delayed for q in self.queues.values())
        by_queue: dict[str, list[Rec]] = {name: [] for name in self.queues}
        for jid, rec in self.jobs.items():
            assert rec.id == jid, jid
            assert rec.queue in by_queue, f"{jid}: no state for queue {rec.queue!r}"
            by_queue[rec.queue].append(rec)
        for name, q in self.queues.items():
            recs = by_queue[name]
            waiting = [r for r in recs if r.state is WAITING]
            n_delayed = sum(r.id in delayed for r in waiting)
            assert q.n_delayed == n_delayed, name
            assert q.n_waiting == len(waiting) - n_delayed, name
            assert q.lanes.ready_ids() + len(q.parked) == q.n_waiting, name
            ready = {r.id for r in waiting if r.id not in delayed} - set(q.parked)
            if q.lanes.listing is not None:
                q.lanes.listing._check(ready)
            if q.delayed_listing is not None:
                q.delayed_listing._check({r.id for r in waiting if r.id in delayed})
            assert q.n_active == sum(r.state is ACTIVE for r in recs), name
            assert q.n_children == sum(r.state is CHILDREN for r in recs), name
            for finished, state in ((q.completed, COMPLETED), (q.dlq, FAILED)):
                finished._check()
                assert len(finished) == sum(r.state is state for r in recs), name
                assert all(r.state is state and r.queue == name for r in finished), name
            groups: dict[str, int] = {}
            for r in recs:
                if r.state is ACTIVE and r.group is not None:
                    groups[r.group] = groups.get(r.group, 0) + 1
            assert q.lanes.group_active == groups, name
            pending: dict[str, int] = {}
            for r in recs:
                if r.state is WAITING and r.group is not None:
                    pending[r.group] = pending.get(r.group, 0) + 1
            assert q.group_pending == pending, name


def _group_left(q: QueueState, group: str) -> None:
    gp = q.group_pending
    left = gp[group] - 1
    if left:
        gp[group] = left
    else:
        del gp[group]


def _first(*times: int | None) -> int:
    """Return the first time given (a finished record's index time)."""
    return next(t for t in times if t is not None)
