"""Per-queue settings every backend stores: lease limits and dead-letter settings.

Both are checked when built (``__post_init__``), so a value one backend
refuses, every backend refuses, with :class:`~bunq.errors.ConfigError`
(code ``config``) naming the field: a setting that reaches a backend is
always one it can apply (a negative ``max_entries`` once made every
PostgreSQL sweep fail). Bounds: ``docs/validation.md``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import ConfigError
from .validate import MAX_COUNT, MAX_DURATION_MS, integer

log = logging.getLogger("bunq")


def _count(value: object, field: str, lo: int = 0) -> None:
    integer(value, field, lo, MAX_COUNT, ConfigError)


def _ms(value: object, field: str, lo: int = 0) -> None:
    integer(value, field, lo, MAX_DURATION_MS, ConfigError)


@dataclass(frozen=True, slots=True)
class DlqConfig:
    """Per-queue dead-letter settings.

    :param auto_retry: move entries back to waiting every ``auto_retry_interval`` ms
        (during sweep), at most ``max_auto_retries`` times per entry.
    :param max_age: drop entries older than this (ms), ``None`` keeps them.
    :param max_entries: keep at most this many entries (oldest dropped first).
    """

    auto_retry: bool = False
    auto_retry_interval: int = 60_000
    max_auto_retries: int = 3
    max_age: int | None = 7 * 24 * 3600 * 1000
    max_entries: int = 10_000

    def __post_init__(self) -> None:
        if not isinstance(self.auto_retry, bool):
            raise ConfigError("auto_retry must be a bool", field="auto_retry")
        _ms(self.auto_retry_interval, "auto_retry_interval", 1)
        _count(self.max_auto_retries, "max_auto_retries")
        if self.max_age is not None:
            _ms(self.max_age, "max_age")
        _count(self.max_entries, "max_entries")


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """Per-queue admission limits for leases (0 or None = unlimited).

    :param rate_max: at most this many leases per ``rate_duration`` ms.
    :param concurrency: at most this many active jobs.
    :param group_concurrency: at most this many active jobs per FIFO group.
    :param group_rate_max: at most this many leases per group per ``group_rate_duration`` ms.
    """

    rate_max: int | None = None
    rate_duration: int = 1000
    concurrency: int | None = None
    group_concurrency: int | None = None
    group_rate_max: int | None = None
    group_rate_duration: int = 1000

    def __post_init__(self) -> None:
        for name in ("rate_max", "concurrency", "group_concurrency", "group_rate_max"):
            value = getattr(self, name)
            if value is not None:
                _count(value, name)
        _ms(self.rate_duration, "rate_duration", 1)
        _ms(self.group_rate_duration, "group_rate_duration", 1)


_S = TypeVar("_S", "DlqConfig", "QueueLimits")


def from_stored(cls: type[_S], *args: Any, **kwargs: Any) -> _S:
    """Rebuild a setting read back from storage.

    A row written before these checks existed may hold a value now refused;
    it reads as the defaults (logged), so one queue's bad row never stops a
    sweep or a restart.
    """
    try:
        return cls(*args, **kwargs)
    except (ConfigError, TypeError) as exc:
        log.error("ignoring a stored %s out of bounds (%s); using the defaults", cls.__name__, exc)
        return cls()
