"""Ready lanes of one queue: ungrouped jobs and one lane per FIFO group.

Every ready job sits in exactly one 4-ary :class:`~bunq._core.IndexedHeap`:
``ready`` for ungrouped jobs, ``groups[g]`` for jobs that named ``opts.group``.
All lanes of a queue order by (priority DESC, entry number), LIFO entries
first and newest first at equal priority, so inside a group jobs run in
admission order unless a priority says otherwise.

Picking the next job compares the head of the ungrouped lane with the head of
the next *eligible* group in round-robin order: a group whose active count
reached ``group_concurrency``, or whose sliding window of leases is full, is
skipped (its head stays in place) and never blocks other groups or
ungrouped work. Groups blocked during one lease call stay skipped for the rest
of that call, so a call costs O(groups + n log n).
"""

from __future__ import annotations

from .._core import IndexedHeap, SlidingWindow
from ..queueconfig import QueueLimits
from .listing import Listing, unless_idle
from .record import Rec


def outranks(a: Rec, b: Rec) -> bool:
    """Return True when ready job ``a`` must be leased before ``b``."""
    if a.priority != b.priority:
        return a.priority > b.priority
    oa = -1 - a.eseq if a.lifo else a.eseq
    ob = -1 - b.eseq if b.lifo else b.eseq
    return oa < ob


class Lanes:
    """The ready jobs of one queue, by lane, plus per-group admission state."""

    __slots__ = ("ready", "groups", "rotation", "cursor", "group_active", "group_windows",
                 "listing")  # fmt: skip

    def __init__(self) -> None:
        self.ready: IndexedHeap[str] = IndexedHeap()
        self.groups: dict[str, IndexedHeap[str]] = {}
        self.rotation: list[str] = []  # group names in round-robin order
        self.cursor = 0
        self.group_active: dict[str, int] = {}
        self.group_windows: dict[str, SlidingWindow] = {}
        # the same records in listing order, once a page of them was read (listing.py)
        self.listing: Listing | None = None

    def push(self, rec: Rec, eseq: int) -> None:
        """Make ``rec`` ready with entry number ``eseq``.

        The heaps order equal priorities by ``eseq`` itself (it only grows, so a
        new entry goes last), which lets a reprioritised job go back to its place
        with its old number; ``eseq`` is kept on the record to compare the heads
        of different lanes.
        """
        rec.eseq = eseq
        if self.listing is not None:
            self.listing.add(rec)
        group = rec.group
        if group is None:
            self.ready.push(rec.id, rec.priority, rec.lifo, eseq)
            return
        lane = self.groups.get(group)
        if lane is None:
            lane = self.groups[group] = IndexedHeap()
            self.rotation.append(group)
        lane.push(rec.id, rec.priority, rec.lifo, eseq)

    def discard(self, rec: Rec) -> bool:
        """Remove ``rec`` from its lane; return whether it was there."""
        if rec.group is None:
            gone = bool(self.ready.discard(rec.id))
        else:
            lane = self.groups.get(rec.group)
            gone = lane is not None and bool(lane.discard(rec.id))
        if gone and self.listing is not None:
            self.listing.remove(rec)
        return gone

    def pick(self, jobs: dict[str, Rec], limits: QueueLimits | None, now_s: float,
             blocked: set[str]) -> str | None:  # fmt: skip
        """Remove and return the id of the next job to lease, or None.

        :param jobs: the shard's records (to compare lane heads).
        :param limits: the queue's limits (group concurrency and rate).
        :param now_s: the engine clock in seconds (sliding windows).
        :param blocked: groups found ineligible earlier in this lease call.
        """
        ready = self.ready
        if not self.groups and self.listing is None:  # the common case, kept short
            return ready.pop() if len(ready) else None
        if self.groups:
            found = self._next_group(limits, now_s, blocked)
            if found is not None:
                gkey, group, idx = found
                if not len(ready) or outranks(jobs[gkey], jobs[ready.peek()]):
                    self.groups[group].pop()
                    window = self.group_windows.get(group)
                    if window is not None:
                        window.try_acquire(now_s, 1)
                    self.cursor = idx + 1
                    if self.listing is not None:
                        self.listing.remove(jobs[gkey])
                    return gkey
        if not len(ready):
            return None
        jid = ready.pop()
        if self.listing is not None:
            self.listing.remove(jobs[jid])
        return jid

    def _next_group(self, limits: QueueLimits | None, now_s: float,
                    blocked: set[str]) -> tuple[str, str, int] | None:  # fmt: skip
        rot = self.rotation
        groups = self.groups
        conc = limits.group_concurrency if limits is not None else None
        rate = limits.group_rate_max if limits is not None else None
        tried = 0
        while tried < len(rot):
            idx = (self.cursor + tried) % len(rot)
            group = rot[idx]
            lane = groups.get(group)
            if lane is None or not len(lane):
                # An emptied lane leaves the rotation here, lazily, and only here.
                del rot[idx]
                groups.pop(group, None)
                if idx < self.cursor:
                    self.cursor -= 1
                continue
            if group not in blocked:
                if conc and self.group_active.get(group, 0) >= conc:
                    blocked.add(group)
                elif rate and not self._window(group, limits).count(now_s) < rate:
                    blocked.add(group)
                else:
                    return lane.peek(), group, idx
            tried += 1
        return None

    def _window(self, group: str, limits: QueueLimits | None) -> SlidingWindow:
        window = self.group_windows.get(group)
        if window is None:
            assert limits is not None and limits.group_rate_max
            window = SlidingWindow(limits.group_rate_max, max(limits.group_rate_duration, 1) / 1000)
            self.group_windows[group] = window
        return window

    def reset_limits(self) -> None:
        """Forget group rate windows (after the queue's limits changed)."""
        self.group_windows.clear()

    def ready_ids(self) -> int:
        """Return how many jobs are in the lanes (O(groups))."""
        return len(self.ready) + sum(len(lane) for lane in self.groups.values())

    def listed(self, jobs: dict[str, Rec], queue: str, now_s: float) -> Listing:
        """Return the listing of the ready records (built from ``jobs`` on first use)."""
        listing = self.listing
        if listing is None:
            ready, groups = self.ready, self.groups
            self.listing = listing = Listing((r for r in jobs.values() if r.queue == queue and (
                r.id in ready or (r.group is not None and r.id in groups.get(r.group, ())))),
                now_s)  # fmt: skip
        listing.read_at = now_s
        return listing

    def trim(self, now_s: float) -> None:
        """Drop per-group state of idle groups, and a listing unread for ``IDLE_S``
        (bounded memory; sweep calls it)."""
        self.listing = unless_idle(self.listing, now_s)
        for group in [g for g, w in self.group_windows.items() if not w.count(now_s)]:
            if group not in self.group_active:
                del self.group_windows[group]
