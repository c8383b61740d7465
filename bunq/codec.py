"""msgpack encoding of job data, results and options, with size limits.

One place decides what a payload may be, so every backend refuses the same
values with the same errors (ValidationError, PayloadTooLarge). It is also the
only module that imports msgpack: the rest of bunq (the wire protocol, the
engine's hot paths, the Redis and SQS row formats) takes the calls below from
here, so the library and its options are chosen in one place
(``tests/unit/test_layers.py`` checks). The bare ``packb``/``unpackb`` serve
callers that map errors themselves or decode trusted bytes, and the hot loops
that cannot afford a wrapper frame (the engine's add and lease paths);
``Unpacker`` is the wire's streaming decoder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from functools import lru_cache
from typing import Any, TypeVar

from msgpack import ExtraData as ExtraData
from msgpack import OutOfData as OutOfData
from msgpack import Packer
from msgpack import Unpacker as Unpacker
from msgpack import packb as packb
from msgpack import unpackb as unpackb

from .errors import PayloadTooLarge, ValidationError
from .job import DEFAULT_BACKOFF, DEFAULT_OPTIONS, Backoff, JobOptions, UniqueStrategy
from .queueconfig import DlqConfig, QueueLimits, from_stored

Setting = TypeVar("Setting", DlqConfig, QueueLimits)


def pack(value: Any, what: str = "data", limit: int | None = None) -> bytes:
    """Encode a value as msgpack; raise ValidationError / PayloadTooLarge."""
    try:
        out: bytes = Packer(use_bin_type=True).pack(value)  # packb without its frame
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(f"job {what} is not serialisable: {exc}", field=what) from None
    if limit is not None and len(out) > limit:
        raise _too_large(what, len(out), limit)
    return out


def _too_large(what: str, size: int, limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"job {what} is {size} bytes encoded; the limit is {limit}",
                           size=size, limit=limit)  # fmt: skip


def pack_all(values: list[Any], what: str = "data", limit: int | None = None) -> list[bytes]:
    """:func:`pack` of each value, with one ``Packer`` for them all (``packb`` builds
    and frees a packer and its buffer per call: 1.7 against 0.9 us for a 100-byte map)."""
    pack_one = packer()
    try:
        out = [pack_one(value) for value in values]
    except (TypeError, ValueError, OverflowError):
        for value in values:  # the first value refused, in order, with pack's own error
            pack(value, what, limit)
        raise
    if limit is not None:
        for blob in out:
            if len(blob) > limit:
                raise _too_large(what, len(blob), limit)
    return out


def packer() -> Callable[[Any], bytes]:
    """A msgpack encoder to reuse for many values on ONE thread (a loop over rows):
    the bare ``packb`` builds and frees a packer per value. It raises msgpack's own
    errors (TypeError, ValueError, OverflowError), as ``packb`` does."""
    return Packer(use_bin_type=True).pack  # type: ignore[no-any-return]


def unpack(blob: bytes | memoryview | None) -> Any:
    if blob is None:
        return None
    return unpackb(bytes(blob), raw=False, strict_map_key=False)


# Every bunq up to 0.1.x reads these three unconditionally (the rest have defaults
# there too), so the stored form keeps them and older versions still read new rows.
# The backoff is never an empty map: Lua's cmsgpack writes one back as an empty array.
_ALWAYS: dict[str, Any] = {"backoff": {"type": DEFAULT_BACKOFF.type},
                           "unique_strategy": DEFAULT_OPTIONS.unique_strategy.value,
                           "depends_on": []}  # fmt: skip


@lru_cache(maxsize=4096)
def options_from_blob(blob: bytes) -> JobOptions:
    """Decode stored options (trusted: validated at admission). Cached: jobs share them.

    A field the blob does not name has its default (:func:`stored_options`)."""
    d = {**_ALWAYS, **unpack(blob)}
    d["backoff"] = Backoff(**(d["backoff"] or {}))  # Lua's cmsgpack makes {} a []
    d["unique_strategy"] = UniqueStrategy(d["unique_strategy"])
    d["depends_on"] = tuple(d["depends_on"])
    return JobOptions(**d)


def stored_options(opts: JobOptions) -> dict[str, Any]:
    """The options as stored: the fields that differ from the defaults
    (:meth:`~bunq.job.JobOptions.changed`) over :data:`_ALWAYS`. A job added with no
    options stores 62 bytes, not the 268 of every field."""
    return {**_ALWAYS, **opts.changed()}


_BLOBS: dict[int, tuple[JobOptions, bytes]] = {}


def options_blob(opts: JobOptions) -> bytes:
    """Encode options, cached by object identity: jobs share option objects, and
    hashing a 17-field frozen dataclass would cost more than the lookup saves."""
    hit = _BLOBS.get(id(opts))
    if hit is not None and hit[0] is opts:
        return hit[1]
    blob = pack(stored_options(opts), "options")
    if len(_BLOBS) >= 4096:
        _BLOBS.clear()
    _BLOBS[id(opts)] = (opts, blob)
    return blob


def setting_blob(value: DlqConfig | QueueLimits) -> bytes:
    """Encode a per-queue setting the one way every backend stores it: a msgpack map
    of its fields by name (a field added later reads as its default from old rows)."""
    return pack(asdict(value), "setting")


def setting_from_blob(cls: type[Setting], blob: bytes | memoryview) -> Setting:
    """Decode a per-queue setting stored by :func:`setting_blob`; one stored out of
    bounds reads as the defaults (:func:`~bunq.queueconfig.from_stored`). The memory
    engine's files before this encoding hold the fields as a list, in field order."""
    stored = unpack(blob)
    if isinstance(stored, list):
        return from_stored(cls, *stored)
    return from_stored(cls, **stored)
