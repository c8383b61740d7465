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

from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal, TypedDict

import msgpack

from .errors import BunqError, ProtocolError, ValidationError

PROTOCOL_VERSION: Final = 3
HEADER: Final = 4
DEFAULT_MAX_FRAME: Final = 16 << 20  # bunqueue allows 64 MiB; bunq bounds memory tighter
CAPABILITIES: Final = ("pipelining", "separate-job-name")
_INT_LO: Final = -(2**31)
_INT_HI: Final = 2**32 - 1
_MAX_CONTAINER: Final = 1_000_000  # elements per decoded array / map


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
    """Decode one frame body; raise ProtocolError when it is not one msgpack value."""
    try:
        return msgpack.unpackb(
            body,
            raw=False,
            ext_hook=_ext_hook,
            timestamp=1,
            strict_map_key=True,
            max_array_len=_MAX_CONTAINER,
            max_map_len=_MAX_CONTAINER,
        )
    except Exception as exc:  # noqa: BLE001 - msgpack raises many types for bad input
        raise ProtocolError(f"undecodable frame: {type(exc).__name__}: {exc}") from None


class FrameDecoder:
    """Split a byte stream into frames and decode each one.

    ``feed(data)`` buffers ``data`` and returns an iterator over the messages
    completed so far, in order; it raises :class:`ProtocolError` when it
    reaches a frame that breaks the protocol (a length over ``max_frame``, or a
    body that is not msgpack). Messages before the bad frame are yielded first,
    so a caller can answer them before dropping the connection.

    :param max_frame: largest accepted body in bytes.
    """

    __slots__ = ("max_frame", "_buf", "_pos", "_broken")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._pos = 0
        self._broken: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for frames not yet complete."""
        return len(self._buf) - self._pos

    @property
    def pending_frame(self) -> bool:
        """Whether a frame has started but not finished (for slow-client deadlines)."""
        return self.buffered > 0

    def feed(self, data: bytes) -> Iterator[Any]:
        """Buffer ``data``; return an iterator of the messages it completes."""
        if self._broken is not None:
            raise self._broken
        self._buf += data
        return self._drain()

    def _drain(self) -> Iterator[Any]:
        buf = self._buf
        while len(buf) - self._pos >= HEADER:
            size = int.from_bytes(buf[self._pos : self._pos + HEADER], "big")
            if size > self.max_frame:
                self._broken = ProtocolError(
                    f"frame of {size} bytes exceeds the limit of {self.max_frame}",
                    size=size,
                    limit=self.max_frame,
                )
                raise self._broken
            end = self._pos + HEADER + size
            if len(buf) < end:
                break
            body = bytes(buf[self._pos + HEADER : end])
            self._pos = end
            try:
                msg = decode_body(body)
            except ProtocolError as exc:
                self._broken = exc
                raise
            yield msg
        if self._pos:
            del buf[: self._pos]
            self._pos = 0


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
        body: bytes = msgpack.packb(
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
