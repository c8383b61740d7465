"""One TCP connection: framing, the auth gate, pipelining and back-pressure.

Nothing one client sends can stall the server or grow its memory without bound:

- Before it authenticates (tokens configured) a connection may send frames of
  at most ``pre_auth_frame`` bytes, is served one request at a time, and only
  ``Hello`` and ``Auth`` are answered; it must authenticate within
  ``auth_timeout``, and ``max_auth_failures`` wrong tokens close it (each
  answered after ``auth_fail_delay``). Refused requests are not activity: they
  do not reset the idle timer.
- Frames are decoded a bounded slice per event-loop turn
  (:class:`~bunq.protocol.FrameDecoder`), capped at ``max_frame``; the
  read buffer grows only as bytes arrive. Sockets are read into one buffer
  the server shares (a ``BufferedProtocol``), at most ``pre_auth_frame``
  bytes at a time before Auth, so an unauthenticated client never makes the
  server hold more than a frame or two of its bytes.
- At most ``max_inflight`` requests are served at once; further frames stay
  undecoded in the buffer, and reading stops.
- When the client does not read its replies (``max_unsent`` bytes queued),
  reading its requests stops too; if that lasts ``idle_timeout`` or the
  queue reaches ``UNSENT_DROP`` times the budget, the connection is dropped.
- Server-pushed event frames (``SubscribeEvents``) are bounded: a subscriber
  with more than ``event_buffer`` bytes unsent when the next event comes is
  disconnected (as bunqueue does).

Bytes that break the protocol close this connection only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol, cast

from ..errors import AuthError, BunqError, ProtocolError, ValidationError
from ..protocol import (
    HEADER,
    MORE,
    NEED_DATA,
    FrameDecoder,
    Prepared,
    encode,
    error_reply,
    js_safe,
)
from . import leasewatch
from .context import Handler, ServerContext, Session
from .metrics import LONG_POLLS

log = logging.getLogger("bunq.server")

UNSENT_DROP = 16  # unsent replies past this many times max_unsent drop the connection
DISPATCH_PER_TURN = 16  # requests one connection may start per event-loop turn
OPEN_BEFORE_AUTH = frozenset({"Auth", "Hello"})
_ECHO = (str, int, float, bool, type(None))


def _req_id(value: object) -> Any:
    """Echo reqId unchanged when it is a plain value; anything else is not echoed."""
    return value if isinstance(value, _ECHO) else None


class Host(Protocol):
    """What a connection needs from the server that accepted it (:class:`.app.Server`)."""

    @property
    def ctx(self) -> ServerContext: ...
    @property
    def commands(self) -> Mapping[str, Handler]: ...
    @property
    def read_buffer(self) -> memoryview: ...
    @property
    def stopping(self) -> bool: ...
    def admit(self, conn: Connection) -> bool: ...
    def authenticated(self, conn: Connection) -> None: ...
    def release(self, conn: Connection) -> bool: ...


class Connection(asyncio.BufferedProtocol):
    """Serve one client; replies go out in request-completion order, tagged by reqId."""

    def __init__(self, server: Host) -> None:
        self.server = server
        self.ctx = server.ctx
        self.config = cfg = server.ctx.config
        authed = not cfg.tokens
        self.decoder = FrameDecoder(cfg.max_frame if authed else cfg.pre_auth_frame)
        self.session = Session(authed=authed, subscriber=self)
        self.transport: asyncio.Transport | None = None
        self.inflight = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self._out: list[bytes] = []
        self._event_bytes = 0  # event frames queued since the last flush
        self._out_bytes = 0  # bytes in _out
        self._over_budget = False  # dispatching stopped on unsent bytes until the next flush
        self._flush_scheduled = False
        self._pump_scheduled = False
        self._decoding = False  # a large frame is part-decoded with more of it buffered
        self._write_paused = False
        self._read_paused = False
        self.closed = False
        self.opened = self.last_active = time.monotonic()
        self.partial_since: float | None = None
        self.write_blocked_since: float | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        transport = self.transport
        transport.set_write_buffer_limits(high=self.config.max_unsent)
        peer = transport.get_extra_info("peername")
        self.session.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if not self.server.admit(self):
            self.closed = self.session.closed = True
            transport.abort()
            return
        self.ctx.metrics.connections.inc()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = self.session.closed = True
        self.session.writable.set()  # handlers waiting for it see the connection gone
        if not self.server.release(self):
            return  # never admitted
        self.ctx.events.unsubscribe(self)
        self.ctx.job_waiters.drop(id(self.session))
        leasewatch.connection_lost(self.ctx, self.session)
        self.ctx.metrics.connections.dec()

    def close(self, reason: str) -> None:
        """Drop the connection now (protocol violation, idle, shutdown)."""
        if self.transport is not None and not self.closed:
            log.info("closing connection", extra={"peer": self.session.peer, "reason": reason})
            self.closed = True
            self.transport.abort()

    def expired(self, now: float) -> str | None:
        """Why this connection should be closed now (idle, slow, unauthenticated), or None."""
        cfg = self.config
        if not self.session.authed and now - self.opened > cfg.auth_timeout:
            return "did not authenticate in time"
        idle = cfg.idle_timeout
        if idle <= 0:
            return None
        if self.partial_since is not None and now - self.partial_since > idle:
            return "slow frame"
        if self.write_blocked_since is not None and now - self.write_blocked_since > idle:
            return "client does not read its replies"
        busy = self.inflight or self.ctx.events.queue_of(self) is not None
        if not busy and now - self.last_active > idle:
            return "idle"
        return None

    # -- reading -----------------------------------------------------------------------
    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the next socket read goes: the server's one read buffer, of which an
        unauthenticated connection may fill at most one pre-auth frame's worth."""
        if self.session.authed:
            return self.server.read_buffer
        return self.server.read_buffer[: self.config.pre_auth_frame + HEADER]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self.decoder.push(self.server.read_buffer[:nbytes])
        except ProtocolError as exc:
            self.close(str(exc))
            return
        self._pump()

    def _pump(self) -> None:
        """Serve buffered frames while slots are free, at most ``DISPATCH_PER_TURN``
        requests and one slice of a large frame per event-loop turn; then read
        again only if everything buffered could be taken."""
        self._pump_scheduled = self._decoding = False
        for _ in range(DISPATCH_PER_TURN):
            if not self._may_dispatch():
                break
            try:
                msg = self.decoder.step()
            except ProtocolError as exc:
                self.close(str(exc))
                return
            if msg is NEED_DATA:
                break
            if msg is MORE:
                self._again()
                break
            self._dispatch(msg)
        else:
            self._again()  # others get a turn; this connection continues in the next one
        if self.decoder.pending_frame:
            self.partial_since = self.partial_since or time.monotonic()
        else:
            self.partial_since = None
        self._flow()

    def _may_dispatch(self) -> bool:
        """Whether another request may start now (slots, unsent replies, shutdown)."""
        if self.closed or self._write_paused or self.server.stopping:
            return False
        if self.inflight >= (self.config.max_inflight if self.session.authed else 1):
            return False
        if self._out_bytes + self.transport_buffered() > self.config.max_unsent:
            self._over_budget = True  # replies are piling up: serve more after a flush
            return False
        # under budget again (a reply bigger than the budget was flushed while writing
        # was paused, then drained): reading must not stay stopped on the old flag
        self._over_budget = False
        if self.session.authed and self.decoder.max_frame < self.config.max_frame:
            self.decoder.max_frame = self.config.max_frame
        return True

    def _again(self) -> None:
        """Continue pumping in the next event-loop turn (reading waits till then)."""
        self._decoding = True
        if not self._pump_scheduled:
            self._pump_scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _dispatch(self, msg: Any) -> None:
        if type(msg) is not dict:
            self._send(error_reply(None, ValidationError("a request must be a msgpack map")))
            return
        req_id = _req_id(msg.get("reqId"))
        cmd = msg.get("cmd")
        if not self.session.authed and cmd not in OPEN_BEFORE_AUTH:
            self._send(error_reply(req_id, AuthError("Not authenticated")))
            return  # refused: not activity
        self.last_active = time.monotonic()
        handler = self.server.commands.get(cmd) if type(cmd) is str else None
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
        was_authed = self.session.authed
        try:
            fields = await handler(self.ctx, msg, self.session)
            prepared = type(fields) is Prepared
            reply: Mapping[str, Any] = {"ok": True, **fields, "reqId": js_safe(req_id)}
        except BunqError as exc:
            ok = False
            reply = error_reply(req_id, exc)
        except Exception:  # one request's bug must not take the server down
            ok = False
            log.exception("command failed", extra={"cmd": cmd, "peer": self.session.peer})
            reply = error_reply(req_id, BunqError("internal server error"))
        finally:
            self.inflight -= 1
        if self.session.authed and not was_authed:
            self.server.authenticated(self)
        waited = cmd in LONG_POLLS and bool(msg.get("timeout"))
        self.ctx.metrics.observe(cmd, time.perf_counter() - started, ok, waited)
        self._send(reply, prepared)
        if self.session.close_after_reply is not None:
            self._close_after_flush(self.session.close_after_reply)
            return
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
        self._out_bytes += len(frame)
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
        self._out_bytes += len(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return True

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._event_bytes = self._out_bytes = 0
        if self.closed or self.transport is None or not self._out:
            self._out.clear()
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self.transport.write(data)
        if self.transport.get_write_buffer_size() > UNSENT_DROP * self.config.max_unsent:
            self.close("client does not read its replies")
        elif self._over_budget and not self._write_paused:
            self._over_budget = False
            self._refill()

    def _close_after_flush(self, reason: str) -> None:
        """Send what is queued, then close (a refused client hears why)."""
        if self.closed or self.transport is None:
            return
        self._flush()
        if not self.closed:
            log.info("closing connection", extra={"peer": self.session.peer, "reason": reason})
            self.closed = True
            self.transport.close()

    def transport_buffered(self) -> int:
        return 0 if self.transport is None else self.transport.get_write_buffer_size()

    def pause_writing(self) -> None:
        self._write_paused = True
        self.session.writable.clear()
        self.write_blocked_since = time.monotonic()
        self._flow()

    def resume_writing(self) -> None:
        self._write_paused = False
        self.session.writable.set()
        self.write_blocked_since = None
        self._refill()

    # -- flow control ------------------------------------------------------------------
    def _flow(self) -> None:
        """Read from the socket only while buffered frames can all be taken."""
        if self.closed or self.transport is None:
            return
        limit = self.config.max_inflight if self.session.authed else 1
        stop = (
            self._write_paused
            or self._over_budget
            or self._decoding
            or self.server.stopping
            or (self.inflight >= limit and self.decoder.buffered > 0)
        )
        if stop and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        elif not stop and self._read_paused:
            self._read_paused = False
            self.transport.resume_reading()

    def _refill(self) -> None:
        """A slot freed up (or writing resumed): serve buffered frames, maybe read again."""
        if not self.closed and not self._pump_scheduled:
            self._pump()

    def stop_reading(self) -> None:
        """Shutdown: take no new requests; in-flight ones still get their replies."""
        if self.transport is not None and not self.closed and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
