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
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..base import QueueLimits

if TYPE_CHECKING:
    from .store import Tx

CURSOR_NS = "bunq.group-cursor"  # kv namespace: queue -> the group served last
Head = tuple[Any, ...]  # (id, priority, ord_at, seq)


def _rank(row: Head) -> tuple[int, int, int]:
    return -row[1], row[2], row[3]


class SqlGroups:
    """Mixin of SqlBackend: needs ``_begin``, ``_lock_key`` and ``_batch_sql``."""

    def _begin(self) -> AbstractContextManager[Tx]:
        raise NotImplementedError

    def _lock_key(self, tx: Tx, key: str) -> None:
        raise NotImplementedError

    def _batch_sql(self, name: str, n: int, width: int) -> str:
        raise NotImplementedError

    def _claim_groups(self, tx: Tx, queue: str, n: int, limits: QueueLimits | None,
                      now: int, lease: dict[str, Any]) -> list[tuple[Any, ...]]:  # fmt: skip
        """Lease up to ``n`` jobs of a grouped queue; rows in pick order (JOB_COLS)."""
        self._lock_key(tx, f"lim:{queue}")
        conc = limits.group_concurrency if limits is not None else None
        rate = limits.group_rate_max if limits is not None else None
        active = {g: int(c) for g, c in tx.q("group_active", queue=queue)} if conc else {}
        ungrouped = deque(tx.q("ungrouped_heads", queue=queue, now=now, n=n))
        cursor_rows = tx.q("kv_get", ns=CURSOR_NS, key=queue)
        cursor = bytes(cursor_rows[0][0]).decode() if cursor_rows else ""
        rotation = self._rotation(tx, queue, cursor, 4 * n + 64)
        heads: dict[str, deque[Head]] = {}
        budget: dict[str, int] = {}
        tokens: dict[str, float] = {}
        picked: list[str] = []
        from_group: dict[str, str] = {}  # leased id -> its group (rate buckets to spend)
        pos, last = 0, None
        while len(picked) < n:
            found = None
            for step in range(len(rotation)):
                idx = (pos + step) % len(rotation)
                g = rotation[idx]
                if g not in budget:
                    allowed = n if not conc else max(conc - active.get(g, 0), 0)
                    if rate and allowed:
                        tokens[g] = self._group_tokens(tx, queue, g, limits, now)
                        allowed = min(allowed, int(tokens[g]))
                    budget[g] = allowed
                    heads[g] = deque(tx.q("group_heads", queue=queue, grp=g, now=now,
                                          n=min(allowed, n)) if allowed else ())  # fmt: skip
                if budget[g] > 0 and heads[g]:
                    found = idx, g
                    break
            if found is not None and (not ungrouped or
                                      _rank(heads[found[1]][0]) < _rank(ungrouped[0])):  # fmt: skip
                idx, g = found
                jid = heads[g].popleft()[0]
                picked.append(jid)
                from_group[jid] = g
                budget[g] -= 1
                pos, last = idx + 1, g
            elif ungrouped:
                picked.append(ungrouped.popleft()[0])
            else:
                break
        if last is None and rotation and len(rotation) >= 4 * n + 64:
            last = rotation[-1]  # every group looked at was blocked: look further next time
        if last is not None:
            tx.q("kv_set", ns=CURSOR_NS, key=queue, value=last.encode())
        if not picked:
            return []
        params = {f"v{i}_0": jid for i, jid in enumerate(picked)}
        params.update(lease)
        rows = tx.sql(self._batch_sql("lease_ids", len(picked), 1), params)
        order = {jid: i for i, jid in enumerate(picked)}
        rows.sort(key=lambda r: order[r[0]])
        if rate:
            spent: dict[str, int] = {}
            for r in rows:
                if r[0] in from_group:
                    spent[from_group[r[0]]] = spent.get(from_group[r[0]], 0) + 1
            for g, k in spent.items():
                tx.q("group_rate_set", queue=queue, grp=g, tokens=tokens[g] - k, at=now)
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

