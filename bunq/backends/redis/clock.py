"""The Redis server's clock, read without a round trip per decision.

Leases, delays and backoff follow one clock shared by every process using the
server: ``TIME``, sampled a few times and anchored on the local monotonic clock
(the sample with the shortest round trip, at its midpoint), re-synced every
``every_s``. The error is at most half that round trip plus the monotonic
clock's drift between syncs.
"""

from __future__ import annotations

import time
from typing import Any


class ServerClock:
    """Epoch ms of the Redis server (``TIME``), kept by the local monotonic clock."""

    def __init__(self, every_s: float = 30.0) -> None:
        self.every_s = every_s
        self._anchor = (time.time() * 1000.0, time.monotonic())
        self.offset_ms = 0.0  # server minus local wall clock, for diagnostics
        self.error_ms = float("inf")
        self.due = 0.0

    def __call__(self) -> int:
        server, mono = self._anchor
        return int(server + (time.monotonic() - mono) * 1000.0)

    def sync(self, client: Any) -> None:
        best: tuple[float, float, float] | None = None
        for _ in range(3):
            t0 = time.monotonic()
            sec, usec = client.time()
            t1 = time.monotonic()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, sec * 1000.0 + usec / 1000.0, (t0 + t1) / 2)
        assert best is not None
        rtt, server, mid = best
        self._anchor = (server, mid)
        self.offset_ms = server - (time.time() - (time.monotonic() - mid)) * 1000.0
        self.error_ms = rtt * 500.0
        self.due = time.monotonic() + self.every_s
