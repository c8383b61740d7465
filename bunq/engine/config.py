"""Engine settings: shard count and every memory bound, with their defaults.

Every collection the engine keeps grows only up to a bound written here (and
in ``docs/engine.md``); nothing else in the engine picks a limit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from .._core import shard_count
from ..errors import ConfigError
from ..policy import DEFAULT_MAX_STALLS
from ..validate import DEFAULT_MAX_PAYLOAD, MAX_ATTEMPTS, integer

MAX_SHARDS = 64


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Knobs of the memory engine.

    :param shards: number of shards, a power of two in [1, 64]; ``None`` picks
        ``shard_count(os.cpu_count())``.
    :param max_payload: bytes of msgpack-encoded data (or result) per job.
    :param max_stalls: expired leases a job survives before the DLQ (reason stalled).
    :param completed_max_count: completed jobs kept per queue (oldest dropped at once).
    :param completed_max_age: completed jobs older than this (ms) are dropped by sweep.
    :param done_window: ids of completed jobs remembered after their record is
        gone, so a later ``depends_on`` on them is satisfied (FIFO, batch eviction).
    :param results_max: job results kept (LRU over every queue).
    :param logs_max: jobs whose log lines are kept (LRU over every queue).
    :param log_lines_max: lines kept per job (oldest dropped).
    :param log_line_max: characters kept per log line.
    :param error_max: characters kept of an error message.
    :param stall_phases: 2 = a lease found expired by the maintenance thread is a
        candidate first and acted on at the next pass if still expired; 1 = at once.
        An explicit ``sweep()`` call always acts at once.
    """

    shards: int | None = None
    max_payload: int = DEFAULT_MAX_PAYLOAD
    max_stalls: int = DEFAULT_MAX_STALLS
    completed_max_count: int = 50_000
    completed_max_age: int = 24 * 3600_000
    done_window: int = 100_000
    results_max: int = 10_000
    logs_max: int = 10_000
    log_lines_max: int = 1_000
    log_line_max: int = 10_000
    error_max: int = 4_000
    stall_phases: int = 2

    def resolved(self) -> EngineConfig:
        """Return a copy with ``shards`` decided and every bound checked."""
        n = self.shards if self.shards is not None else shard_count(os.cpu_count() or 1)
        if not isinstance(n, int) or n < 1 or n > MAX_SHARDS or n & (n - 1):
            raise ConfigError(f"shards must be a power of two in [1, {MAX_SHARDS}], got {n!r}")
        for name in ("max_payload", "completed_max_count", "done_window", "results_max",
                     "logs_max", "log_lines_max", "log_line_max", "error_max"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        integer(self.max_stalls, "max_stalls", 0, MAX_ATTEMPTS, ConfigError)
        if self.stall_phases not in (1, 2) or isinstance(self.stall_phases, bool):
            raise ConfigError(f"stall_phases must be 1 or 2, got {self.stall_phases!r}")
        return replace(self, shards=n)
