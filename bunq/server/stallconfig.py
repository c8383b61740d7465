"""Per-queue stall settings (bunqueue's ``Get/SetStallConfig``) and how the server applies them.

bunq finds a stalled job by its lease: a job whose lock is not renewed before
the lease ends goes back to waiting (or to the DLQ, reason ``stalled``, once
it stalled ``max_stalls`` times). bunqueue's fields map onto that:

``stallInterval``  the lease (ms) a ``PULL`` of the queue gets when it names no ``lockTtl``
``gracePeriod``    added to that lease
``enabled``        false: pulls without ``lockTtl`` get the server's longest lease
                   (``max_lease_ms``), so only a dropped connection gives jobs back
``maxStalls``      read-only: the backend's ``max_stalls`` (one value per store, set
                   with ``--max-stalls``); a different value is refused (``config``)

The settings are stored in the backend's kv table (namespace
``bunq.stall-config``), so every broker on the store reads the same; each
server caches a queue's settings after the first read and refreshes them when
it writes them (a change made through another broker is seen after a restart).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..backends.base import Backend
from ..codec import pack, unpack
from ..errors import ConfigError, ValidationError
from ..validate import MAX_DURATION_MS
from .fields import as_bool, as_int
from .state import Runner


class _Config(Protocol):
    @property
    def default_lease_ms(self) -> int: ...
    @property
    def max_lease_ms(self) -> int: ...


class _Context(Protocol):
    """What the stall settings need of the server's context (no import of it: no cycle)."""

    backend: Backend
    run: Runner

    @property
    def config(self) -> _Config: ...


NS = "bunq.stall-config"
MAX_CACHED = 10_000  # queues whose settings a server remembers
WIRE = {"enabled": "enabled", "stallInterval": "interval", "gracePeriod": "grace",
        "maxStalls": "max_stalls"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class StallConfig:
    enabled: bool = True
    interval: int | None = None  # None: the server's default lease
    grace: int = 0
    max_stalls: int = 0

    def to_wire(self, default_lease_ms: int = 0) -> dict[str, Any]:
        return {"enabled": self.enabled,
                "stallInterval": default_lease_ms if self.interval is None else self.interval,
                "maxStalls": self.max_stalls, "gracePeriod": self.grace}  # fmt: skip


class StallConfigs:
    """The queues' stall settings, cached per server."""

    def __init__(self) -> None:
        self._cache: dict[str, StallConfig] = {}

    def _read(self, ctx: _Context, queue: str) -> StallConfig:
        max_stalls = int(getattr(ctx.backend, "max_stalls", 0))
        raw = ctx.backend.kv_get(NS, queue)
        if raw is None:
            return StallConfig(max_stalls=max_stalls)
        stored = unpack(raw)
        return StallConfig(bool(stored.get("enabled", True)), stored.get("interval"),
                           int(stored.get("grace", 0)), max_stalls)  # fmt: skip

    async def get(self, ctx: _Context, queue: str) -> StallConfig:
        cfg = self._cache.get(queue)
        if cfg is None:
            cfg = await ctx.run(self._read, ctx, queue)
            if len(self._cache) >= MAX_CACHED:  # queue names come from clients: bounded
                self._cache.clear()
            self._cache[queue] = cfg
        return cfg

    async def set(self, ctx: _Context, queue: str, raw: Mapping[str, Any]) -> StallConfig:
        """Apply the fields of ``raw`` (bunqueue's names) over the queue's settings."""
        unknown = sorted(str(k) for k in raw if k not in WIRE)
        if unknown:
            raise ValidationError(f"unknown config fields: {', '.join(unknown)}", field="config")
        cfg = await self.get(ctx, queue)
        changes: dict[str, Any] = {}
        if raw.get("enabled") is not None:
            changes["enabled"] = as_bool(raw.get("enabled"), "enabled")
        if raw.get("stallInterval") is not None:
            changes["interval"] = as_int(raw["stallInterval"], "stallInterval", 1,
                                         ctx.config.max_lease_ms)  # fmt: skip
        if raw.get("gracePeriod") is not None:
            changes["grace"] = as_int(raw["gracePeriod"], "gracePeriod", 0, MAX_DURATION_MS)
        if raw.get("maxStalls") is not None and raw["maxStalls"] != cfg.max_stalls:
            raise ConfigError(
                f"maxStalls is set per store (--max-stalls), here {cfg.max_stalls}",
                field="maxStalls",
            )
        cfg = replace(cfg, **changes)
        blob = pack({"enabled": cfg.enabled, "interval": cfg.interval, "grace": cfg.grace})
        await ctx.run(self._write, ctx, queue, blob)
        self._cache[queue] = cfg
        return cfg

    @staticmethod
    def _write(ctx: _Context, queue: str, blob: bytes) -> None:
        backend = ctx.backend
        for _ in range(10):  # compare-and-set against a concurrent writer
            current = backend.kv_get(NS, queue)
            if backend.kv_put(NS, queue, blob, current, create=current is None):
                return
        raise ConfigError("stall config changed concurrently; try again", field="config")

    async def lease_ms(self, ctx: _Context, queue: str) -> int:
        """The lease a pull of ``queue`` without ``lockTtl`` gets."""
        cfg = await self.get(ctx, queue)
        if not cfg.enabled:
            return ctx.config.max_lease_ms
        base = ctx.config.default_lease_ms if cfg.interval is None else cfg.interval
        return min(base + cfg.grace, ctx.config.max_lease_ms)
