"""Jobs of one queue in listing order (ready, or delayed), kept only once someone lists them.

The ready lanes are heaps ordered for leasing: they cannot give the jobs
after a cursor without a scan and a sort of every waiting job. A
:class:`Listing` holds the same records sorted by :meth:`Rec.order_key` (the
SQL backends' ready order) in sublists of about :data:`LOAD` records with the
key of each sublist's last record alongside (the layout of
``sortedcontainers.SortedKeyList``), so a cursor page costs
O(log n + page) and an insertion or a removal O(log n + LOAD) memmove.

The ready listing is built (O(n log n), once) by the first waiting-page
read of a queue, then kept in step by :class:`~.lanes.Lanes` (every push,
discard and pick); the delayed listing (by :func:`run_order`) likewise by the
first delayed-page read, kept by the shard's delayed transitions. The sweep
drops a listing after :data:`IDLE_S` seconds without a read: queues nobody
lists never pay for one, and the lease and admission paths of every queue pay
one ``is None`` test (bench/engine.py in docs/performance.md).

A record's key fields (priority, LIFO, run time, admission number) never
change while it is in a ready lane or the delayed heap (a reprioritised or
re-delayed job leaves it first), so a record is found again by its key. Keys
are unique in a shard (the admission number is).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable

from .record import Rec

LOAD = 500  # records per sublist (split at twice this)
IDLE_S = 600.0  # a listing unread this long is dropped (Lanes.trim)

Key = tuple[int, ...]


def run_order(rec: Rec) -> tuple[int, int]:
    """The delayed listing order: run time, then admission (the SQL backends')."""
    return rec.run_at, rec.signed_seq()


def unless_idle(listing: Listing | None, now_s: float) -> Listing | None:
    """Return ``listing``, or None once it went unread for :data:`IDLE_S` (the sweep's trim)."""
    return None if listing is None or now_s - listing.read_at > IDLE_S else listing


class Listing:
    """Records sorted by ``key`` (``Rec.order_key`` unless told; shard lock held)."""

    __slots__ = ("_lists", "_maxes", "_len", "_key", "read_at")

    def __init__(self, recs: Iterable[Rec], now_s: float,
                 key: Callable[[Rec], Key] = Rec.order_key) -> None:  # fmt: skip
        self._key = key
        ordered = sorted(recs, key=key)
        self._lists = [ordered[i : i + LOAD] for i in range(0, len(ordered), LOAD)]
        self._maxes: list[Key] = [key(part[-1]) for part in self._lists]
        self._len = len(ordered)
        self.read_at = now_s

    def __len__(self) -> int:
        return self._len

    def add(self, rec: Rec) -> None:
        """Insert ``rec`` (not here yet) at its place."""
        key = self._key(rec)
        lists, maxes = self._lists, self._maxes
        self._len += 1
        if not lists:
            lists.append([rec])
            maxes.append(key)
            return
        i = bisect_left(maxes, key)
        if i == len(maxes):  # beyond every record: the last sublist grows
            i -= 1
            lists[i].append(rec)
            maxes[i] = key
        else:
            insort(lists[i], rec, key=self._key)
        part = lists[i]
        if len(part) > 2 * LOAD:
            lists[i : i + 1] = [part[:LOAD], part[LOAD:]]
            maxes[i : i + 1] = [self._key(part[LOAD - 1]), maxes[i]]

    def remove(self, rec: Rec) -> None:
        """Take ``rec`` out (it must be here, with the key it was added with)."""
        key = self._key(rec)
        lists, maxes = self._lists, self._maxes
        i = bisect_left(maxes, key)
        part = lists[i]
        j = bisect_left(part, key, key=self._key)
        assert part[j] is rec, (rec, part[j])
        del part[j]
        self._len -= 1
        if not part:
            del lists[i], maxes[i]
        elif j == len(part):
            maxes[i] = self._key(part[-1])

    def after(self, key: Key | None, n: int) -> list[Rec]:
        """Return up to ``n`` records whose key follows ``key`` (from the first if None)."""
        lists = self._lists
        i, j = 0, 0
        if key is not None:
            i = bisect_right(self._maxes, key)
            if i == len(lists):
                return []
            j = bisect_right(lists[i], key, key=self._key)
        out: list[Rec] = []
        while i < len(lists) and len(out) < n:
            out += lists[i][j : j + n - len(out)]
            i, j = i + 1, 0
        return out

    def _check(self, ids: set[str]) -> None:
        """Assert the order, the sublist keys and that exactly ``ids`` are here (tests)."""
        flat = [r for part in self._lists for r in part]
        keys = [self._key(r) for r in flat]
        assert keys == sorted(keys) and len(set(keys)) == len(keys), "listing out of order"
        assert self._maxes == [self._key(part[-1]) for part in self._lists]
        assert all(self._lists), "an empty sublist"
        assert len(flat) == self._len and {r.id for r in flat} == ids, "listing differs"
