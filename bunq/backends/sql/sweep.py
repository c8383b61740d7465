"""Housekeeping of the SQL backends: expired leases, TTLs, unique keys, DLQ and retention.

Cost follows the work that is due, not the table: every statement reads an index
range with a LIMIT (``SWEEP_BATCH`` rows), and each batch is its own short
transaction, so on SQLite no housekeeping write holds the file's lock for more
than a few milliseconds, whatever the database holds. Which queues keep finished
jobs, and how many, comes from the per-queue counters, never from a scan.
"""

from __future__ import annotations

from collections.abc import Callable

from ...codec import setting_from_blob
from ...job import FailureReason
from ...policy import decide_stall
from ...queueconfig import DlqConfig
from ..base import SweepResult
from .core import Tx, unit_of_work
from .flowfail import SqlFlowFailures

SWEEP_BATCH = 200  # rows per housekeeping transaction
MAX_BATCHES = 500  # per step and sweep call: the rest waits for the next sweep
GROUP_RATE_IDLE_MS = 3_600_000  # group rate buckets untouched this long are dropped


class SqlSweep(SqlFlowFailures):
    """Part of SqlBackend: expired leases, TTLs, unique keys, DLQ auto-retry, retention."""

    @unit_of_work(idempotent=True)
    def sweep(self) -> SweepResult:
        now = self.clock()
        idle = now - GROUP_RATE_IDLE_MS
        woken: set[str] = set()  # queues that got work back: their workers are rung
        with self._read() as tx:  # what is due, read outside any write transaction
            leases, ttls, uniqs, buckets = tx.q("sweep_due", now=now, idle=idle)[0]
        requeued, dead = self._sweep_leases(now, woken) if leases else (0, 0)
        expired = self._batches(lambda tx: self._ttl_batch(tx, now, woken)) if ttls else 0
        if uniqs:
            self._batches(lambda tx: len(tx.q("uniq_expire", now=now, lim=SWEEP_BATCH)))
        if buckets:
            self._batches(lambda tx: len(tx.q("group_rate_idle", before=idle, lim=SWEEP_BATCH)))
        retried, dropped = self._bounds(now, woken)
        for q in woken:
            self._ring(q)
        return SweepResult(requeued, dead, expired, retried, dropped)

    def _batches(self, step: Callable[[Tx], int], most: int | None = None) -> int:
        """Run ``step`` in its own transaction until it returns less than a batch."""
        total = 0
        for _ in range(MAX_BATCHES):
            with self._begin() as tx:
                n = step(tx)
            total += n
            if n < SWEEP_BATCH or (most is not None and total >= most):
                break
        return total

    def _sweep_leases(self, now: int, woken: set[str]) -> tuple[int, int]:
        done = {"requeued": 0, "dead": 0}

        def batch(tx: Tx) -> int:
            rows = tx.q("expired_leases", now=now, lim=SWEEP_BATCH)
            for jid, attempts, max_attempts, stalls, token, started, queue in rows:
                to_dlq = decide_stall(attempts, max_attempts, stalls + 1, self.max_stalls)
                if not tx.q("stall_dead" if to_dlq else "stall_requeue", id=jid, token=token,
                            now=now):  # fmt: skip
                    continue
                tx.q("add_attempt", id=jid, attempt=attempts, error="lease expired",
                     duration_ms=max(now - (started or now), 0), now=now,
                     reason=FailureReason.STALLED.value)  # fmt: skip
                if to_dlq:
                    tx.q("release_unique", id=jid)
                    woken.update(self._children_failed(tx, [jid], now))
                    done["dead"] += 1
                else:
                    done["requeued"] += 1
                    woken.add(queue)
            return len(rows)

        self._batches(batch)
        return done["requeued"], done["dead"]

    def _ttl_batch(self, tx: Tx, now: int, woken: set[str]) -> int:
        expired = [r[0] for r in tx.q("ttl_expire", now=now, lim=SWEEP_BATCH)]
        for jid in expired:
            tx.q("release_unique", id=jid)
        woken.update(self._children_failed(tx, expired, now))
        return len(expired)

    def _bounds(self, now: int, woken: set[str]) -> tuple[int, int]:
        """DLQ auto-retry and bounds, retention of completed jobs; return (retried, dropped)."""
        with self._read() as tx:
            configs = {name: setting_from_blob(DlqConfig, blob)
                       for name, blob in tx.q("queues_with_dlq")}  # fmt: skip
        retried = 0
        for queue, cfg in configs.items():
            if cfg.auto_retry:
                back = self._batches(lambda tx, q=queue, c=cfg: len(tx.q(  # type: ignore[misc]
                    "dlq_auto_retry", queue=q, now=now, before=now - c.auto_retry_interval,
                    max_retries=c.max_auto_retries, lim=SWEEP_BATCH)))  # fmt: skip
                if back:
                    retried += back
                    woken.add(queue)
        with self._read() as tx:
            finished = tx.q("finished_counts")
        dropped = 0
        for queue, state, n, oldest in finished:
            if state == "failed":
                cfg = configs.get(queue, DlqConfig())
                max_age, keep = cfg.max_age, cfg.max_entries
            else:
                max_age, keep = self.completed_max_age, self.completed_max_count
            before = None if max_age is None else now - max_age
            aged = before is not None and oldest is not None and oldest < before
            gone = self._prune(queue, state, before=before) if aged else 0
            if int(n) - gone > keep:
                gone += self._prune(queue, state, count=int(n) - gone - keep)
            if state == "failed":
                dropped += gone
        return retried, dropped

    def _prune(self, queue: str, state: str, *, before: int | None = None,
               count: int | None = None) -> int:  # fmt: skip
        """Delete the oldest finished jobs of ``queue``: older than ``before``, or ``count``."""
        left = [count]

        def batch(tx: Tx) -> int:
            lim = SWEEP_BATCH if left[0] is None else min(SWEEP_BATCH, left[0])
            if before is not None:
                rows = tx.q("prune_before", queue=queue, state=state, before=before, lim=lim)
            else:
                rows = tx.q("prune_oldest", queue=queue, state=state, lim=lim)
            self._forget(tx, [r[0] for r in rows])
            if rows and state == "completed":
                tx.q("retire_completed", queue=queue, n=len(rows))
            if left[0] is not None:
                left[0] -= len(rows)
            return len(rows)

        return self._batches(batch, most=count)
