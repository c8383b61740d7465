"""Rebuild an engine from its write-behind file after a restart (or a crash).

Order: queue settings (pause, limits, DLQ settings), then every job row:
finished jobs in finish order, waiting and delayed jobs in (run time,
admission) order so ready lanes keep the SQL order; unique keys; kv
records. Then the two things a crash can leave half-done are settled:

* a job that was **active** lost its worker: its attempt was spent at lease,
  so it is charged one stall and re-queued at once, or dead-lettered
  (reason ``stalled``) when :func:`bunq.policy.decide_stall` says so;
* a job **waiting for children** recounts its dependencies (a dependency's
  completion and the dependent's countdown may sit in different batches): a
  dependency counts as done when its record completed or is gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import apsw

from ..job import Attempt, FailureReason
from ..policy import decide_stall
from . import codec
from .flowfail import released_on_restart
from .record import ACTIVE, CHILDREN, COMPLETED, FAILED, WAITING, Rec

if TYPE_CHECKING:
    from .core import Core

LOST = "worker lost (engine restarted)"


def recover(core: Core, conn: apsw.Connection) -> int:
    """Load every row of ``conn`` into ``core`` (whose shards are empty); return jobs."""
    now = core.clock()
    for name, paused, limits, dlq in conn.execute("SELECT * FROM queues"):
        shard = core.route(name)
        q = shard.queue(name)
        q.paused = bool(paused)
        lim = codec.limits_from(None if limits is None else bytes(limits))
        if lim is not None:
            q.set_limits(lim, now / 1000)
        q.dlq_config = codec.dlq_from(None if dlq is None else bytes(dlq))
        q.has_row = True
    recs: list[Rec] = []
    for row in conn.execute("SELECT * FROM jobs"):
        rec, result = codec.rec_from_row(row)
        recs.append(rec)
        if result is not None and rec.state is COMPLETED:
            core.results.put(rec.id, result)
    finished = sorted((r for r in recs if r.state in (COMPLETED, FAILED)),
                      key=lambda r: (r.dlq_at or r.finished_at or 0, r.seq))  # fmt: skip
    pending = sorted((r for r in recs if r.state not in (COMPLETED, FAILED)),
                     key=lambda r: (r.run_at, r.seq))  # fmt: skip
    present = {r.id: r for r in recs}
    for rec in finished + pending:
        shard = core.route(rec.queue)
        shard.restored_seq(rec.seq)
        if rec.state is ACTIVE:
            _charge_stall(core, rec, now)
        if rec.state is CHILDREN:
            kids = [present[d] for d in dict.fromkeys(rec.opts.depends_on) if d in present]
            left, released = released_on_restart(kids)
            deps = [] if released else [k.id for k in left]
            rec.pending = len(deps)
            if deps:
                with core.xlock:
                    core.register(rec, deps)
            else:
                rec.state = WAITING
                rec.run_at = now
        shard.place(shard.queue(rec.queue), rec, now)
        if rec.opts.parent_id is not None:
            core.children.setdefault(rec.opts.parent_id, {})[rec.id] = rec.queue
    for queue, key, job_id, until in conn.execute("SELECT * FROM uniq"):
        core.route(queue).put_unique((queue, key), job_id, until)
    for ns, key, value in conn.execute("SELECT * FROM kv"):
        core.kv.setdefault(ns, {})[key] = bytes(value)
    return len(recs)


def _charge_stall(core: Core, rec: Rec, now: int) -> None:
    # The lease (and its attempt) was persisted; the worker is gone with the process.
    rec.stalls += 1
    rec.error = LOST
    rec.reason = FailureReason.STALLED
    started = rec.started_at if rec.started_at is not None else now
    rec.add_attempt(Attempt(rec.attempts, LOST, max(now - started, 0), now, FailureReason.STALLED))
    rec.token = None
    rec.lease_until = 0
    if decide_stall(rec.attempts, rec.opts.attempts, rec.stalls, core.max_stalls):
        rec.state = FAILED
        rec.finished_at = rec.dlq_at = now
    else:
        rec.state = WAITING
        rec.run_at = now
