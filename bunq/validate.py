"""The one validation layer: bounds and checks every backend and the wire share.

A value one backend refuses, every backend refuses, with the same typed error
and code: job fields raise :class:`~bunq.errors.ValidationError` (code
``validation``), queue names and settings :class:`~bunq.errors.ConfigError`
(code ``config``). The bounds are chosen so that anything accepted can be
stored by every backend: times fit a signed 64-bit integer (and JavaScript's
2**53), text is valid UTF-8 without NUL and short enough for an index entry.
``docs/validation.md`` is the table of every field.

Checks here are primitives; :meth:`bunq.job.JobOptions.parse`,
:func:`bunq.job.check_new_jobs` and the queue settings in :mod:`bunq.queueconfig`
apply them.
"""

from __future__ import annotations

import re

from .errors import BunqError, ConfigError, ValidationError

#: longest delay, ttl, timeout, backoff and unique ttl: 100 years of 365 days.
#: ``now + MAX_DURATION_MS`` stays below 2**53 until the year 2255.
MAX_DURATION_MS = 100 * 365 * 86_400_000
MAX_TIME = 2**53  # a point in time (epoch ms) every store and JavaScript client can hold
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1  # a 32-bit column on PostgreSQL
MAX_ATTEMPTS = 10_000
MAX_NAME_BYTES = 256  # job name, job id, group, parent id, each dependency id
MAX_KEY_BYTES = 1024  # unique key (PostgreSQL index entries stay under 2,704 bytes)
MAX_DEPENDENCIES = 10_000
MAX_OFFSET = 10**9  # listings: offset
MAX_LIMIT = 10**9  # listings: limit asked (a backend returns at most its page size)
MAX_COUNT = 10**9  # limits and DLQ settings (entries, retries, rates, concurrency)
MAX_ERROR_CHARS = 4_000  # error text kept per attempt
#: bytes of one job's encoded data (or result) every backend that can hold it accepts by
#: default: bunqueue's limit (10 MB of job data), so its clients' payloads fit. SQS holds
#: at most its queue's MaximumMessageSize (256 KiB to 1 MiB, a third of it base64) and
#: refuses more with the same error.
DEFAULT_MAX_PAYLOAD = 10 << 20
QUEUE_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}"
_QUEUE_NAME = re.compile(QUEUE_NAME_PATTERN)
_VALID_QUEUES: set[str] = set()  # a cache: only exact str instances that matched


def integer(value: object, field: str, lo: int, hi: int,
            error: type[BunqError] = ValidationError) -> int:  # fmt: skip
    """Return ``value`` if it is an int (not a bool) in [lo, hi], else raise ``error``."""
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise error(f"{field} must be an integer in [{lo}, {hi}]", field=field)
        value = int(value)
    if not lo <= value <= hi:
        raise error(f"{field} must be an integer in [{lo}, {hi}]", field=field)
    return value


def duration(value: object, field: str, error: type[BunqError] = ValidationError) -> int:
    """Return ``value`` if it is a duration in ms in [0, MAX_DURATION_MS]."""
    return integer(value, field, 0, MAX_DURATION_MS, error)


def store_bounds(
    max_payload: object, max_stalls: object, completed_max_age: object, completed_max_count: object
) -> tuple[int, int, int, int]:
    """A shared store's bounds (SQL, Redis) checked once: ConfigError names the bad one."""
    return (integer(max_payload, "max_payload", 1, 2**31, ConfigError),
            integer(max_stalls, "max_stalls", 0, MAX_ATTEMPTS, ConfigError),
            duration(completed_max_age, "completed_max_age", ConfigError),
            integer(completed_max_count, "completed_max_count", 0, MAX_COUNT,
                    ConfigError))  # fmt: skip


def text(value: object, field: str, max_bytes: int = MAX_NAME_BYTES,
         error: type[BunqError] = ValidationError) -> str:  # fmt: skip
    """Return ``value`` if it is a non-empty str of valid UTF-8 without NUL, at most
    ``max_bytes`` bytes encoded (lone surrogates are not valid UTF-8)."""
    if type(value) is str and value:
        if value.isascii():
            if len(value) <= max_bytes and "\x00" not in value:
                return value
        else:
            try:
                size = len(value.encode("utf-8"))
            except UnicodeEncodeError:
                raise error(f"{field} must be valid UTF-8 (it holds a lone surrogate)",
                            field=field) from None  # fmt: skip
            if size <= max_bytes and "\x00" not in value:
                return value
    raise error(
        f"{field} must be a non-empty string of at most {max_bytes} UTF-8 bytes, without NUL",
        field=field,
    )


def optional_text(value: object, field: str, max_bytes: int = MAX_NAME_BYTES) -> str | None:
    """Return None for None, else :func:`text`."""
    return None if value is None else text(value, field, max_bytes)


def queue_name(name: object) -> str:
    """Return ``name`` if it is a valid queue name (the whole string), else ConfigError."""
    if type(name) is not str:
        raise ConfigError(f"invalid queue name {name!r}: not a string", field="queue")
    if name in _VALID_QUEUES:  # names seen valid before
        return name
    if _QUEUE_NAME.fullmatch(name) is None:
        raise ConfigError(
            f"invalid queue name {name!r}: 1-128 chars of letters, digits, _ . : -, "
            "starting with a letter or digit",
            field="queue",
        )
    if len(_VALID_QUEUES) >= 65_536:
        _VALID_QUEUES.clear()
    _VALID_QUEUES.add(name)
    return name


def kv_key(ns: object, key: object) -> None:
    """Check a small record's namespace (at most 256 bytes) and key (at most 1,024)."""
    text(ns, "ns")
    text(key, "key", MAX_KEY_BYTES)


def page(offset: object, limit: object) -> tuple[int, int]:
    """Return a listing's (offset, limit), each an int in [0, 10**9]."""
    return integer(offset, "offset", 0, MAX_OFFSET), integer(limit, "limit", 0, MAX_LIMIT)


def storable(message: object, max_chars: int = MAX_ERROR_CHARS) -> str:
    """Return free text (an error message, a log line) as text every store accepts.

    Truncated to ``max_chars``; a lone surrogate (a file name decoded with
    ``surrogateescape``) and NUL are written as backslash escapes instead of
    making the write fail.
    """
    s = message if type(message) is str else str(message)
    s = s[:max_chars]
    if s.isascii():
        return s.replace("\x00", "\\x00") if "\x00" in s else s
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    return s.replace("\x00", "\\x00") if "\x00" in s else s


def lease_args(n: object, lease_ms: object, owner: object) -> None:
    """Check a lease request: ``n`` in [0, 10**9], ``lease_ms`` a duration, ``owner``
    a string (may be empty) of valid UTF-8 without NUL, at most 512 bytes."""
    integer(n, "n", 0, MAX_COUNT)
    duration(lease_ms, "lease_ms")
    if owner != "":
        text(owner, "owner", 512)
