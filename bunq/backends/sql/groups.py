"""FIFO groups on SQL: the claim of a queue that has grouped jobs or group limits.

The memory engine's semantics (:mod:`bunq.engine.lanes`), in one transaction:
ungrouped jobs form one lane and each group another, every lane in ready order
(priority, then run time and admission). Each pick compares the head of the
ungrouped lane with the head of the next *eligible* group in round-robin order;
a group whose active jobs reached ``group_concurrency``, or whose token bucket
(``group_rate_max`` per ``group_rate_duration``) is empty, is skipped and blocks
neither other groups nor ungrouped work.

Cost: one probe of the ``jobs_group`` index per group looked at (at most
``4n + 64`` groups per claim, in rotation order from a cursor kept in the kv
table, so every group gets its turn across claims and processes), one ranged
read of each chosen group's head, and the active jobs of grouped work (bounded
by the limits). The claim holds the queue's limit lock (PostgreSQL), so group
counts and buckets stay exact across brokers.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ...queueconfig import QueueLimits
from .core import SqlCore, Tx
from .rows import COL

CURSOR_NS = "bunq.group-cursor"  # kv namespace: queue -> the group served last
Head = tuple[Any, ...]  # (id, priority, ord_at, seq)


def _rank(row: Head) -> tuple[int, int, int]:
    _id, priority, ord_at, seq = row
    return -priority, ord_at, seq


class SqlGroups(SqlCore):
    """Part of SqlBackend: the claim of a grouped queue (inside the lease's transaction)."""

    def _claim_groups(self, tx: Tx, queue: str, n: int, limits: QueueLimits | None,
                      now: int, lease: dict[str, Any]) -> list[tuple[Any, ...]]:  # fmt: skip
        """Lease up to ``n`` jobs of a grouped queue; rows in pick order (JOB_COLS)."""
        self._lock_key(tx, f"lim:{queue}")
        cursor_rows = tx.q("kv_get", ns=CURSOR_NS, key=queue)
        cursor = bytes(cursor_rows[0][0]).decode() if cursor_rows else ""
        most = 4 * n + 64
        turns = _Turns(self, tx, queue, n, limits, now, self._rotation(tx, queue, cursor, most))
        picked = turns.pick(deque(tx.q("ungrouped_heads", queue=queue, now=now, n=n)))
        last = turns.last
        if last is None and len(turns.rotation) >= most:
            last = turns.rotation[-1]  # every group looked at was blocked: look further next
        if last is not None:
            tx.q("kv_set", ns=CURSOR_NS, key=queue, value=last.encode())
        if not picked:
            return []
        params = {f"v{i}_0": jid for i, jid in enumerate(picked)}
        rows = tx.sql(self._batch_sql("lease_ids", len(picked), 1), {**params, **lease})
        order = {jid: i for i, jid in enumerate(picked)}
        rows.sort(key=lambda r: order[r[COL.id]])
        if limits is not None and limits.group_rate_max:
            spent: dict[str, int] = {}
            for r in rows:
                g = turns.from_group.get(r[COL.id])
                if g is not None:
                    spent[g] = spent.get(g, 0) + 1
            for g, k in spent.items():
                tx.q("group_rate_set", queue=queue, grp=g, tokens=turns.tokens[g] - k, at=now)
        return rows

    def _rotation(self, tx: Tx, queue: str, cursor: str, most: int) -> list[str]:
        """Groups with waiting jobs in round-robin order after ``cursor`` (at most ``most``)."""
        names = [r[0] for r in tx.q("group_names", queue=queue, after=cursor, lim=most)]
        if len(names) < most and cursor:
            for (g,) in tx.q("group_names", queue=queue, after="", lim=most - len(names)):
                if g > cursor:
                    break
                names.append(g)
        return names

    def _group_tokens(self, tx: Tx, queue: str, group: str, limits: QueueLimits | None,
                      now: int) -> float:  # fmt: skip
        assert limits is not None and limits.group_rate_max
        cap = float(limits.group_rate_max)
        rows = tx.q("group_rate_get", queue=queue, grp=group)
        if not rows:
            return cap
        stored, at = rows[0]
        refill = cap / max(limits.group_rate_duration, 1)
        return min(cap, float(stored) + max(now - int(at), 0) * refill)


class _Turns:
    """One claim's walk over the lanes (the engine's ``Lanes.pick``, over rows)."""

    def __init__(self, groups: SqlGroups, tx: Tx, queue: str, n: int,
                 limits: QueueLimits | None, now: int, rotation: list[str]) -> None:  # fmt: skip
        self.groups, self.tx, self.queue, self.n, self.now = groups, tx, queue, n, now
        self.limits = limits
        self.conc = limits.group_concurrency if limits is not None else None
        self.rate = limits.group_rate_max if limits is not None else None
        active = tx.q("group_active", queue=queue) if self.conc else []
        self.active = {g: int(c) for g, c in active}
        self.rotation = rotation
        self.heads: dict[str, deque[Head]] = {}
        self.budget: dict[str, int] = {}  # leases each group may still take in this claim
        self.tokens: dict[str, float] = {}
        self.from_group: dict[str, str] = {}  # leased id -> its group
        self.pos = 0
        self.last: str | None = None  # the group served last (the next claim's cursor)

    def pick(self, ungrouped: deque[Head]) -> list[str]:
        picked: list[str] = []
        while len(picked) < self.n:
            found = self._next_group()
            if found is not None and (
                not ungrouped or _rank(self.heads[found[1]][0]) < _rank(ungrouped[0])
            ):
                idx, g = found
                jid = self.heads[g].popleft()[0]
                self.from_group[jid] = g
                self.budget[g] -= 1
                self.pos, self.last = idx + 1, g
                picked.append(jid)
            elif ungrouped:
                picked.append(ungrouped.popleft()[0])
            else:
                break
        return picked

    def _next_group(self) -> tuple[int, str] | None:
        rot = self.rotation
        for step in range(len(rot)):
            idx = (self.pos + step) % len(rot)
            g = rot[idx]
            if g not in self.budget:
                self._open(g)
            if self.budget[g] > 0 and self.heads[g]:
                return idx, g
        return None

    def _open(self, g: str) -> None:
        allowed = self.n if not self.conc else max(self.conc - self.active.get(g, 0), 0)
        if self.rate and allowed:
            self.tokens[g] = self.groups._group_tokens(self.tx, self.queue, g, self.limits,
                                                       self.now)  # fmt: skip
            allowed = min(allowed, int(self.tokens[g]))
        self.budget[g] = allowed
        rows = self.tx.q("group_heads", queue=self.queue, grp=g, now=self.now,
                         n=allowed) if allowed else []  # fmt: skip
        self.heads[g] = deque(rows)
