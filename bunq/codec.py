"""msgpack encoding of job data, results and options, with size limits.

One place decides what a payload may be, so every backend refuses the same
values with the same errors (ValidationError, PayloadTooLarge).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgpack

from .errors import PayloadTooLarge, ValidationError
from .job import Backoff, JobOptions, UniqueStrategy


def pack(value: Any, what: str = "data", limit: int | None = None) -> bytes:
    """Encode a value as msgpack; raise ValidationError / PayloadTooLarge."""
    try:
        out: bytes = msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(f"job {what} is not serialisable: {exc}", field=what) from None
    if limit is not None and len(out) > limit:
        raise PayloadTooLarge(
            f"job {what} is {len(out)} bytes encoded; the limit is {limit}",
            size=len(out),
            limit=limit,
        )
    return out


def unpack(blob: bytes | memoryview | None) -> Any:
    if blob is None:
        return None
    return msgpack.unpackb(bytes(blob), raw=False, strict_map_key=False)


@lru_cache(maxsize=4096)
def options_from_blob(blob: bytes) -> JobOptions:
    """Decode stored options (trusted: validated at admission). Cached: jobs share them."""
    d = unpack(blob)
    d["backoff"] = Backoff(**d["backoff"])
    d["unique_strategy"] = UniqueStrategy(d["unique_strategy"])
    d["depends_on"] = tuple(d["depends_on"])
    return JobOptions(**d)


@lru_cache(maxsize=4096)
def options_blob(opts: JobOptions) -> bytes:
    return pack(opts.to_dict(), "options")
