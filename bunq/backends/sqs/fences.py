"""What this process knows about the receipt handles it handed out: local fences.

SQS accepts a delete or a visibility change for a handle of an older receive
of the same message without doing it, so a settle of a lease that this process
knows is superseded (settled already, or its job received again under a later
attempt) is refused here, before any call; for the rest SQS decides.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from ...job import Lease

FENCES_KEPT = 10_000  # receipt handles remembered for local fence checks (~0.5 KB each)


@dataclass(frozen=True, slots=True)
class Held:
    """What this process knows about a receipt handle it handed out."""

    attempt: int
    received_at: int


class Fences:
    """Handles handed out, handles settled, and the newest attempt of each job seen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: OrderedDict[str, Held] = OrderedDict()
        self._latest: OrderedDict[str, int] = OrderedDict()  # job id -> newest attempt here
        self._settled: OrderedDict[str, None] = OrderedDict()

    def remember(self, handle: str, held: Held, job_id: str) -> None:
        """Note a handle handed out, and the newest attempt of its job seen here.

        A lease of an older attempt of the same job is superseded (its
        visibility lapsed and the job was received again): :meth:`check`
        refuses it, since SQS itself may accept its delete without deleting.
        """
        with self._lock:
            self._held[handle] = held
            while len(self._held) > FENCES_KEPT:
                self._held.popitem(last=False)
            if self._latest.get(job_id, 0) < held.attempt:
                self._latest[job_id] = held.attempt
                self._latest.move_to_end(job_id)
                while len(self._latest) > FENCES_KEPT:
                    self._latest.popitem(last=False)

    def check(self, lease: Lease) -> tuple[bool, Held | None]:
        """Return (False, _) if this process knows the lease is stale, else (True, what it knows).

        Receipt handles this process settled, or handed out with another
        attempt, or whose job it has since received again under a later
        attempt, are refused here; for the rest SQS decides (a refused handle
        is STALE).
        """
        with self._lock:
            if lease.token in self._settled or self._latest.get(lease.job.id, 0) > lease.attempt:
                return False, None
            held = self._held.get(lease.token)
        return held is None or held.attempt == lease.attempt, held

    def settled(self, handle: str) -> None:
        """Note a handle settled: any later settle of it is refused."""
        with self._lock:
            self._held.pop(handle, None)
            self._settled[handle] = None
            while len(self._settled) > FENCES_KEPT:
                self._settled.popitem(last=False)
