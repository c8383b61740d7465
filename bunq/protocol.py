"""The wire protocol of ``bunq serve``: bunqueue's TCP protocol v3, pure encode/decode.

Every message in both directions is one frame: a 4-byte big-endian length,
then that many bytes of one MessagePack map. Requests are ``{cmd, reqId,
...fields}``; replies are ``{ok: true, reqId, ...}`` or ``{ok: false, reqId,
error}``. Replies may arrive out of order (pipelining by ``reqId``).

Nothing here does I/O or reads a clock: :class:`FrameDecoder` is fed bytes and
yields messages, :func:`encode` turns a message into a frame, and the
``*_to_wire`` / ``*_from_wire`` functions convert bunq's model to and from the
field names bunqueue's clients (and bunq's own :mod:`bunq.backends.remote`)
read. ``docs/protocol.md`` is the reference.

Wire rules honoured here (from bunqueue 2.9.5 and its clients):

- msgpack ext type 0 is JavaScript ``undefined``: decoded as ``None``; any other
  ext type makes the frame invalid.
- JavaScript clients decode int64/uint64 as BigInt, so by default integers
  outside ``[-2**31, 2**32 - 1]`` are encoded as float64 (``js_safe``).
  bunq's own client asks for exact integers (capability ``bunq``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal, TypedDict

from .codec import OutOfData, Unpacker, packb, unpackb
from .errors import BunqError, ProtocolError, ValidationError

PROTOCOL_VERSION: Final = 3
HEADER: Final = 4
DEFAULT_MAX_FRAME: Final = 64 << 20  # bunqueue's MAX_FRAME_SIZE (authenticated connections)
PRE_AUTH_FRAME: Final = 4 << 10  # before Auth: Hello and Auth only, which are small
CAPABILITIES: Final = ("pipelining", "separate-job-name")
_INT_LO: Final = -(2**31)
_INT_HI: Final = 2**32 - 1
_MAX_CONTAINER: Final = 1_000_000  # elements per decoded array / map
DECODE_SLICE: Final = 8 << 10  # bodies up to this size decode in one call, larger ones
# this many bytes per step (8 KiB of empty arrays: 8k lists, ~1-2 ms)
MAX_CONTAINERS: Final = 200_000  # arrays + maps one large frame may build (20 per job
# of a 10,000-job PUSHB); bounds its objects and the garbage collector's passes over them


# --------------------------------------------------------------------------- payload types


class Request(TypedDict, total=False):
    """The envelope of every request; command fields sit beside these."""

    cmd: str
    reqId: str


class ErrorReply(TypedDict):
    """``ok: false``: ``error`` is what bunqueue clients read; the rest is bunq's typed error."""

    ok: Literal[False]
    reqId: Any
    error: str
    code: str
    errorData: dict[str, Any]


class PushRequest(Request, total=False):
    queue: str
    name: str
    data: Any
    priority: int
    delay: int
    maxAttempts: int
    backoff: int | dict[str, Any]
    jobId: str
    uniqueKey: str
    dependsOn: list[str]


class PullRequest(Request, total=False):
    queue: str
    count: int
    timeout: int
    owner: str
    lockTtl: int


class AckRequest(Request, total=False):
    id: str
    token: str
    result: Any


class WireJob(TypedDict, total=False):
    """A job as bunqueue's clients read it (``GetJob``, ``PULL``, ``GetJobs``); main fields."""

    id: str
    queue: str
    name: str
    data: Any
    priority: int
    createdAt: float
    runAt: float
    startedAt: float | None
    completedAt: float | None
    attempts: int
    maxAttempts: int
    backoff: int
    ttl: int | None
    timeout: int | None
    uniqueKey: str | None
    customId: str | None
    dependsOn: list[str]
    parentId: str | None
    groupId: str | None
    lifo: bool
    progress: int
    stallCount: int
    removeOnComplete: bool
    removeOnFail: bool
    state: str
    returnvalue: Any
    failedReason: str | None
    backoffConfig: dict[str, Any]
    childrenIds: list[str]
    tags: list[str]
    timeline: list[dict[str, Any]]


# --------------------------------------------------------------------------------- framing


def _ext_hook(code: int, data: bytes) -> None:
    if code == 0:  # JavaScript `undefined`
        return None
    raise ValueError(f"msgpack ext type {code} is not allowed")


def decode_body(body: bytes) -> Any:
    """Decode one frame body; raise ProtocolError when it is not one msgpack value.

    msgpack sizes its string/bin/array/map limits to ``len(body)``, so a
    declared length can never make it allocate more than the frame holds.
    """
    try:
        return unpackb(
            body,
            raw=False,
            ext_hook=_ext_hook,
            timestamp=1,
            strict_map_key=True,
            max_array_len=_MAX_CONTAINER,
            max_map_len=_MAX_CONTAINER,
        )
    except Exception as exc:  # msgpack raises many types for bad input
        raise ProtocolError(f"undecodable frame: {type(exc).__name__}: {exc}") from None


class _Step:
    """A marker :meth:`FrameDecoder.step` returns instead of a message."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA: Final = _Step("NEED_DATA")
"""No complete message: feed more bytes."""
MORE: Final = _Step("MORE")
"""A large frame is part-decoded and more of it is buffered: step again (after
letting others run)."""


class _Counted:
    """Hooks that count the arrays and maps a large frame builds (a bound on its memory)."""

    __slots__ = ("n", "limit")

    def __init__(self, limit: int) -> None:
        self.n = 0
        self.limit = limit

    def __call__(self, obj: Any) -> Any:
        self.n += 1
        if self.n > self.limit:
            raise ValueError(f"more than {self.limit} arrays and maps in one frame")
        return obj


class FrameDecoder:
    """Split a byte stream into frames and decode each one, at a bounded cost per step.

    ``push(data)`` buffers bytes (the buffer grows only as bytes arrive, never
    to a declared length); ``step()`` returns the next message, or
    :data:`NEED_DATA`, or :data:`MORE`. A frame body up to ``DECODE_SLICE``
    bytes is decoded in one call; a larger one is decoded while it arrives,
    ``DECODE_SLICE`` bytes per step, and may build at most ``MAX_CONTAINERS``
    arrays and maps, so no step costs more than a slice whatever the frame
    holds (16 MiB of empty arrays would otherwise build 16 million lists in
    one call). ``feed(data)`` does both and yields every completed message:
    the simple form for clients and tests.

    ``max_frame`` may be changed between frames (``bunq serve`` raises it once
    a connection has authenticated). :class:`ProtocolError` is raised for a
    frame that breaks the protocol (a length over ``max_frame``, a body that
    is not one msgpack value); the decoder stays broken after it.

    :param max_frame: largest accepted body in bytes.
    """

    __slots__ = ("max_frame", "_buf", "_pos", "_size", "_big", "_fed", "_count", "_broken")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._pos = 0
        self._size: int | None = None  # body length of the large frame being decoded
        self._big: Unpacker | None = None
        self._fed = 0
        self._count = _Counted(MAX_CONTAINERS)
        self._broken: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet decoded."""
        return len(self._buf) - self._pos

    @property
    def pending_frame(self) -> bool:
        """Whether a frame has started but not finished (for slow-client deadlines)."""
        return self._size is not None or self.buffered > 0

    def feed(self, data: bytes) -> Iterator[Any]:
        """Buffer ``data``; return an iterator of the messages it completes."""
        self.push(data)
        return self._all()

    def _all(self) -> Iterator[Any]:
        while True:
            msg = self.step()
            if msg is NEED_DATA:
                return
            if msg is not MORE:
                yield msg

    def push(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer ``data`` (raises the error that broke the stream, if one did)."""
        if self._broken is not None:
            raise self._broken
        self._buf += data

    def step(self) -> Any:
        """Return the next message, :data:`NEED_DATA` or :data:`MORE`."""
        if self._broken is not None:
            raise self._broken
        try:
            return self._step()
        except ProtocolError as exc:
            self._broken = exc
            self._big = None
            raise

    def _step(self) -> Any:
        if self._size is not None:  # a large frame is being decoded
            return self._step_big(self._size)
        buf, pos = self._buf, self._pos
        if len(buf) - pos < HEADER:
            return self._need()
        size = int.from_bytes(buf[pos : pos + HEADER], "big")
        if size > self.max_frame:
            raise ProtocolError(
                f"frame of {size} bytes exceeds the limit of {self.max_frame}",
                size=size,
                limit=self.max_frame,
            )
        if size > DECODE_SLICE:
            self._pos += HEADER
            self._size = size
            return self._step_big(size)
        end = pos + HEADER + size
        if len(buf) < end:
            return self._need()
        body = bytes(buf[pos + HEADER : end])
        self._pos = end
        return decode_body(body)

    def _step_big(self, size: int) -> Any:
        unpacker = self._big
        if unpacker is None:
            self._count.n = 0
            # every array or map takes at least one byte: a body of at most MAX_CONTAINERS
            # bytes cannot build more, so it needs no counting hook (a call per container)
            hook = self._count if size > self._count.limit else None
            unpacker = self._big = Unpacker(
                raw=False,
                ext_hook=_ext_hook,
                timestamp=1,
                strict_map_key=True,
                max_buffer_size=size,
                max_str_len=size,
                max_bin_len=size,
                max_ext_len=size,
                max_array_len=min(size, _MAX_CONTAINER),
                max_map_len=min(size, _MAX_CONTAINER),
                list_hook=hook,
                object_hook=hook,
            )
            self._fed = 0
        avail = len(self._buf) - self._pos
        take = min(DECODE_SLICE, size - self._fed, avail)
        if take == 0:
            return self._need()
        try:
            unpacker.feed(self._buf[self._pos : self._pos + take])
            self._pos += take
            self._fed += take
            gc_was = gc.isenabled()
            gc.disable()  # a partial message is all new objects: collecting them is waste
            try:
                msg = unpacker.unpack()
            finally:
                if gc_was:
                    gc.enable()
        except OutOfData:
            if self._fed == size:
                raise ProtocolError("undecodable frame: truncated body") from None
            return MORE if avail > take else self._need()
        except Exception as exc:  # msgpack raises many types for bad input
            raise ProtocolError(f"undecodable frame: {type(exc).__name__}: {exc}") from None
        if unpacker.tell() != size:
            raise ProtocolError("undecodable frame: ExtraData: bytes after the message")
        self._big = None
        self._size = None
        return msg

    def _need(self) -> _Step:
        """Drop consumed bytes (and a grown buffer once it is empty); ask for more."""
        if self._pos:
            if self._pos >= len(self._buf):
                self._buf = bytearray()
            else:
                del self._buf[: self._pos]
            self._pos = 0
        return NEED_DATA


def js_safe(value: Any) -> Any:
    """Return ``value`` with integers outside int32/uint32 turned into float64.

    bunqueue's JavaScript client decodes int64/uint64 as BigInt and then fails
    on arithmetic, so its server never emits them; neither does bunq's.
    """
    t = type(value)
    if t is int:
        return value if _INT_LO <= value <= _INT_HI else _big(value)
    if t is dict:
        return {k: js_safe(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [js_safe(v) for v in value]
    return value


class Prepared(dict[str, Any]):
    """Reply fields already following the int64 rule (``js_safe`` applied where needed).

    Hot replies (pulled jobs) are built this way so the encoder need not walk them.
    """


class Packed(bytes):
    """A reply value already msgpack-encoded (following the int64 rule): :func:`encode`
    splices it in unchanged. Big replies are packed off the event loop this way."""


def pack_value(value: Any) -> Packed:
    """Encode one reply value (already int64-safe) for :class:`Packed`."""
    return Packed(packb(value, use_bin_type=True, default=_default))


def _splice(msg: Mapping[str, Any], exact_ints: bool) -> bytes:
    """The msgpack map of ``msg`` with its :class:`Packed` values inserted as they are."""
    n = len(msg)
    head = bytes([0x80 | n]) if n < 16 else b"\xde" + n.to_bytes(2, "big")
    parts = [head]
    for key, value in msg.items():
        parts.append(packb(key, use_bin_type=True))
        if type(value) is Packed:
            parts.append(value)
        else:
            parts.append(
                packb(value if exact_ints else js_safe(value), use_bin_type=True, default=_default)
            )
    return b"".join(parts)


def _big(value: int) -> float | str:
    try:
        return float(value)
    except OverflowError:
        return str(value)


def _default(obj: object) -> Any:
    """Encode what msgpack cannot: sets/tuples as lists, anything else as its repr."""
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    return repr(obj)


def encode(msg: Mapping[str, Any], *, exact_ints: bool = False, strict: bool = False) -> bytes:
    """Return one frame (length prefix + msgpack map) for ``msg``.

    :param exact_ints: keep 64-bit integers (bunq's own client); the default
        follows the int64 rule for JavaScript clients.
    :param strict: refuse values msgpack cannot carry (a client sending user
        data) instead of encoding them as their ``repr`` (a server replying).
    :raises ValidationError: strict, and the message holds an unserialisable value.
    :raises ProtocolError: the message cannot be encoded at all.
    """
    try:
        if Packed in map(type, msg.values()):  # (a C loop: no generator per reply)
            body = _splice(msg, exact_ints)
        else:
            body = packb(
                msg if exact_ints else js_safe(msg),
                use_bin_type=True,
                default=None if strict else _default,
            )
    except (TypeError, ValueError, OverflowError) as exc:
        if strict:
            raise ValidationError(f"request is not serialisable: {exc}", field="data") from None
        raise ProtocolError(f"cannot encode message: {exc}") from None
    return len(body).to_bytes(HEADER, "big") + body


# ---------------------------------------------------------------------------------- errors


def error_reply(req_id: Any, err: BunqError) -> ErrorReply:
    """Build ``{ok: false, reqId, error}`` plus bunq's code and error data."""
    return {
        "ok": False,
        "reqId": req_id,
        "error": str(err),
        "code": err.code,
        "errorData": dict(err.data),
    }


def error_from_reply(reply: Mapping[str, Any]) -> BunqError:
    """Rebuild the typed error of an ``ok: false`` reply (bunqueue servers give BunqError)."""
    data = reply.get("errorData")
    return BunqError.from_wire(
        {
            "code": reply.get("code", "bunq_error"),
            "message": str(reply.get("error", "")),
            "data": data if isinstance(data, dict) else {},
        }
    )


# ----------------------------------------------------------------------------- lock tokens


def wire_token(token: str, attempt: int) -> str:
    """Return the lock token a client sends back: the lease token and its attempt."""
    return f"{token}.{attempt}"


def parse_token(value: object) -> tuple[str, int] | None:
    """Split a wire lock token into (token, attempt); None when it is not one."""
    if not isinstance(value, str):
        return None
    token, dot, attempt = value.rpartition(".")
    if not dot or not attempt.isdigit() or len(attempt) > 9:
        return None
    return token, int(attempt)
