"""EmbeddedBackend: the sharded memory engine as a Backend, with optional durability.

| URL | what |
| --- | --- |
| ``memory://`` | volatile: everything lives in this process's memory |
| ``memory://?data=/path/file.db`` | the same engine, written behind to SQLite |

Write-behind (``data=``): every change is noted in memory and written by one
writer thread in batches, one transaction per batch, flushed every 10 ms or
after 100 changes, whichever comes first (``flush_ms``, ``flush_changes``).
An acknowledged add therefore survives a crash unless it fell in the last
window; a job added with ``durable=True`` is committed before ``add``
returns. On restart the file is read back: queues, waiting and delayed jobs,
dependencies, DLQ entries, pause and limit state; jobs that were active are
charged one stall (their attempt was already spent) and re-queued, or
dead-lettered per :func:`bunq.policy.decide_stall`. One process owns a data
file; a second opener gets :class:`~bunq.errors.DataFileLocked`.

Other URL options: ``shards``, ``max_payload``, ``max_stalls``, ``flush_ms``,
``flush_changes``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from ..engine import Engine, EngineConfig
from ..errors import ConfigError
from ..job import now_ms
from .base import ALL_CAPABILITIES, Capability, Clock
from .eventlog import MemoryEventLog
from .urls import redact

_INT_OPTIONS = ("shards", "max_payload", "max_stalls", "flush_ms", "flush_changes")


class EmbeddedBackend(Engine):
    """The memory engine behind the Backend contract (``kind = "memory"``).

    :param data: SQLite file for write-behind durability (``None``: volatile).
    :param clock: epoch-ms clock for every decision.
    :param config: engine bounds (:class:`~bunq.engine.EngineConfig`).
    :param flush_ms: longest time a change waits in memory before it is written.
    :param flush_changes: this many pending changes start a flush at once.
    :param overrides: single :class:`EngineConfig` fields (``shards=4``...).
    """

    kind = "memory"
    capabilities = ALL_CAPABILITIES - {Capability.MULTI_PROCESS}

    def __init__(self, data: str | None = None, *, clock: Clock = now_ms,
                 config: EngineConfig | None = None, flush_ms: int = 10,
                 flush_changes: int = 100, **overrides: Any) -> None:  # fmt: skip
        super().__init__(clock=clock, config=config, **overrides)
        self.data_path = data
        self._writer: Any = None
        self._events = MemoryEventLog()  # job events, in this process (bunq.jobevents)
        self.publish_events = self._events.publish_events
        self.event_reader = self._events.event_reader
        self.has_readers = self._events.has_readers
        if data is not None:
            from ..engine.writebehind import open_store

            self._writer = open_store(self, data, flush_ms=flush_ms, flush_changes=flush_changes)

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> EmbeddedBackend:
        """Open ``memory://`` or ``memory://?data=/path/file.db&shards=4``.

        :raises ConfigError: an unknown option or a malformed value.
        """
        parsed = urlparse(url)
        if parsed.scheme != "memory" or parsed.netloc or parsed.path not in ("", "/"):
            raise ConfigError(
                f"memory URL {redact(url)!r} must look like memory://?data=/path/file.db"
            )
        opts = {k: v[-1] for k, v in parse_qs(parsed.query, keep_blank_values=True).items()}
        unknown = set(opts) - {"data", *_INT_OPTIONS}
        if unknown:
            raise ConfigError(f"unknown memory URL options {sorted(unknown)}")
        for name in _INT_OPTIONS:
            if name in opts:
                try:
                    kw[name] = int(opts[name])
                except ValueError:
                    raise ConfigError(f"{name} must be an integer, got {opts[name]!r}") from None
        data = opts.get("data")
        if data == "":
            raise ConfigError("data= needs a file path")
        return cls(data, **kw)

    def announce(self, **info: object) -> None:
        """Add ``info`` to the data file's owner record (no-op without a data file)."""
        if self._writer is not None:
            self._writer.lock.note(**info)

    def close(self) -> None:
        """Stop maintenance, flush and close the data file (if any). Idempotent."""
        super().close()
        self._events.close()
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
