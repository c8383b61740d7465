"""One TCP connection: framing, the auth gate, pipelining and back-pressure.

Memory per connection is bounded: at most ``max_inflight`` requests are
served at once (more stay unread in the socket, and the frames of one read
wait in a small backlog); frames are capped at ``max_frame``; when the
client stops reading replies, reading from it stops too (the transport's
write buffer is the signal), and past a hard cap the connection is dropped.
Server-pushed event frames (``SubscribeEvents``) are bounded too: a
subscriber with more than ``event_buffer`` bytes unsent when the next event
comes is disconnected (as bunqueue does). Bytes that break the protocol
close this connection only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ..errors import AuthError, BunqError, ProtocolError, ValidationError
from ..protocol import FrameDecoder, Prepared, encode, error_reply, js_safe
from .context import Handler, Session

if TYPE_CHECKING:
    from .app import Server

log = logging.getLogger("bunq.server")

WRITE_HIGH = 4 << 20  # stop reading a client that does not read its replies
WRITE_HARD_CAP = 256 << 20  # and drop it past this
OPEN_BEFORE_AUTH = frozenset({"Auth", "Hello"})
_ECHO = (str, int, float, bool, type(None))


def _req_id(value: object) -> Any:
    """Echo reqId unchanged when it is a plain value; anything else is not echoed."""
    return value if isinstance(value, _ECHO) else None


class Connection(asyncio.Protocol):
    """Serve one client; replies go out in request-completion order, tagged by reqId."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.ctx = server.ctx
        self.config = server.ctx.config
        self.decoder = FrameDecoder(self.config.max_frame)
        self.session = Session(authed=not self.config.tokens, subscriber=self)
        self.transport: asyncio.Transport | None = None
        self.inflight = 0
        self.backlog: deque[Any] = deque()
        self.tasks: set[asyncio.Task[None]] = set()
        self._out: list[bytes] = []
        self._event_bytes = 0  # event frames queued since the last flush
        self._flush_scheduled = False
        self._write_paused = False
        self._read_paused = False
        self.closed = False
        self.last_frame = time.monotonic()
        self.partial_since: float | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        transport = self.transport
        transport.set_write_buffer_limits(high=WRITE_HIGH)
        peer = transport.get_extra_info("peername")
        self.session.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.server.conns.add(self)
        self.ctx.metrics.connections.inc()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = self.session.closed = True
        self.server.conns.discard(self)
        self.ctx.events.unsubscribe(self)
        self.ctx.job_waiters.drop(id(self.session))
        self.ctx.metrics.connections.dec()
        self.backlog.clear()

    def close(self, reason: str) -> None:
        """Drop the connection now (protocol violation, idle, shutdown)."""
        if self.transport is not None and not self.closed:
            log.info("closing connection", extra={"peer": self.session.peer, "reason": reason})
            self.closed = True
            self.transport.abort()

    def idle_for(self, now: float) -> float:
        """Seconds this connection has been idle (0 while served or subscribed to events)."""
        if self.inflight or self.backlog or self.ctx.events.queue_of(self) is not None:
            return 0.0
        return now - self.last_frame

    # -- reading -----------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        try:
            for msg in self.decoder.feed(data):
                self._on_message(msg)
        except ProtocolError as exc:
            self.close(str(exc))
            return
        if self.decoder.pending_frame:
            if self.partial_since is None:
                self.partial_since = time.monotonic()
        else:
            self.partial_since = None

    def _on_message(self, msg: Any) -> None:
        self.last_frame = time.monotonic()
        if self.closed:
            return
        if self.inflight >= self.config.max_inflight or self.backlog:
            self.backlog.append(msg)
            self._pause_reading()
            return
        self._dispatch(msg)

    def _dispatch(self, msg: Any) -> None:
        if type(msg) is not dict:
            self._send(error_reply(None, ValidationError("a request must be a msgpack map")))
            return
        req_id = _req_id(msg.get("reqId"))
        cmd = msg.get("cmd")
        handler = self.server.commands.get(cmd) if type(cmd) is str else None
        if not self.session.authed and cmd not in OPEN_BEFORE_AUTH:
            self._send(error_reply(req_id, AuthError("Not authenticated")))
            return
        if handler is None:
            name = cmd if type(cmd) is str else repr(cmd)[:64]
            self._send(error_reply(req_id, ValidationError(f"Unknown command: {name[:64]}")))
            self.ctx.metrics.observe("unknown", 0.0, False)
            return
        self.inflight += 1
        task = asyncio.get_running_loop().create_task(self._run(handler, str(cmd), msg, req_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, handler: Handler, cmd: str, msg: Mapping[str, Any], req_id: Any) -> None:
        started = time.perf_counter()
        ok = True
        prepared = False
        try:
            fields = await handler(self.ctx, msg, self.session)
            prepared = type(fields) is Prepared
            reply: Mapping[str, Any] = {"ok": True, **fields, "reqId": js_safe(req_id)}
        except BunqError as exc:
            ok = False
            reply = error_reply(req_id, exc)
        except Exception:  # noqa: BLE001 - one request's bug must not take the server down
            ok = False
            log.exception("command failed", extra={"cmd": cmd, "peer": self.session.peer})
            reply = error_reply(req_id, BunqError("internal server error"))
        finally:
            self.inflight -= 1
        self.ctx.metrics.observe(cmd, time.perf_counter() - started, ok)
        self._send(reply, prepared)
        self._refill()

    # -- writing -----------------------------------------------------------------------
    def _send(self, reply: Mapping[str, Any], prepared: bool = False) -> None:
        if self.closed or self.transport is None:
            return
        try:
            frame = encode(reply, exact_ints=prepared or self.session.exact_ints)
        except ProtocolError as exc:
            frame = encode(error_reply(_req_id(reply.get("reqId")), exc))
        self._out.append(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def push_event(self, frame: bytes) -> bool:
        """Queue a server-pushed frame; False (and the connection dropped) when the
        client already has more than ``event_buffer`` bytes it has not read."""
        if self.closed or self.transport is None:
            return False
        if self._event_bytes + self.transport.get_write_buffer_size() > self.config.event_buffer:
            self.close("event subscriber does not read its events")
            return False
        self._event_bytes += len(frame)
        self._out.append(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return True

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._event_bytes = 0
        if self.closed or self.transport is None or not self._out:
            self._out.clear()
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self.transport.write(data)
        if self.transport.get_write_buffer_size() > WRITE_HARD_CAP:
            self.close("client does not read its replies")

    def pause_writing(self) -> None:
        self._write_paused = True
        self._pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._refill()

    # -- flow control ------------------------------------------------------------------
    def _pause_reading(self) -> None:
        if not self._read_paused and self.transport is not None and not self.closed:
            self._read_paused = True
            self.transport.pause_reading()

    def _refill(self) -> None:
        """Serve backlog frames as slots free up; read again when all are served."""
        if self.closed or self._write_paused:
            return
        while self.backlog and self.inflight < self.config.max_inflight:
            self._dispatch(self.backlog.popleft())
        if (
            not self.backlog
            and self._read_paused
            and self.transport is not None
            and not self.server.stopping
        ):
            self._read_paused = False
            self.transport.resume_reading()

    def stop_reading(self) -> None:
        """Shutdown: take no new requests; in-flight ones still get their replies."""
        self.backlog.clear()
        self._pause_reading()
