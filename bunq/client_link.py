"""The client side of the wire: one pipelined connection to ``bunq serve``.

Any thread may :meth:`Link.call`; a reader thread hands each reply to its
caller by ``reqId``. The link recovers by itself (bunqueue issue #94, a
worker stuck on a half-open connection):

- a call that gets no reply within its timeout tears the socket down (the
  stream's state is unknown) and the next call reconnects;
- when nothing arrives for ``ping_interval`` the reader sends a ``Ping``;
  silence for another interval tears the socket down;
- TCP keepalive is on, so the kernel also notices a dead peer.

A request that was never written is retried once on a fresh connection;
one that was written is retried only when the caller says it is idempotent.
Everything else surfaces as :class:`~bunq.errors.BackendUnavailable`.
"""

from __future__ import annotations

import itertools
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .errors import AuthError, BackendUnavailable, BunqError, ProtocolError
from .protocol import DEFAULT_MAX_FRAME, FrameDecoder, encode, error_from_reply
from .tls import TlsSocket

log = logging.getLogger("bunq.remote")

PING_ID = "__ping"


class _Slot:
    """One outstanding request: the caller blocks on ``lock`` until the reply lands."""

    __slots__ = ("lock", "reply", "error")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.reply: dict[str, Any] | None = None
        self.error: BaseException | None = None


class _Conn:
    """One socket generation: its reader thread and outstanding requests."""

    def __init__(self, sock: socket.socket | TlsSocket, max_frame: int) -> None:
        self.sock = sock
        self.decoder = FrameDecoder(max_frame)
        self.pending: dict[str, _Slot] = {}
        self.wlock = threading.Lock()
        self.dead = False
        self.ping_out = False


class Link:
    """A self-healing, pipelined connection.

    :param token: sent in ``Auth`` first on every new connection.
    :param timeout: default seconds to wait for a reply.
    :param ping_interval: seconds of silence before a Ping (and before giving up on it).
    :param tls: speak TLS with this client context (``bunqs://``).
    """

    def __init__(
        self,
        host: str,
        port: int,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        ping_interval: float = 10.0,
        max_frame: int = DEFAULT_MAX_FRAME,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host, self.port, self.token = host, port, token
        self.tls = tls
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.ping_interval = ping_interval
        self.max_frame = max_frame
        self.hello: dict[str, Any] = {}
        self.generation = 0
        self.on_push: Callable[[dict[str, Any]], None] | None = None  # frames without reqId
        self._ids = itertools.count(1)
        self._conn: _Conn | None = None
        self._lock = threading.Lock()
        self._closed = False

    # -- calls -------------------------------------------------------------------------
    def call(
        self, msg: Mapping[str, Any], timeout: float | None = None, idempotent: bool = False
    ) -> dict[str, Any]:
        """Send ``msg`` and return its ``ok: true`` reply.

        :raises BunqError: the server's typed error for an ``ok: false`` reply.
        :raises BackendUnavailable: no connection, or no reply in time.
        """
        for attempt in range(2):
            conn = self._connected()
            req_id = str(next(self._ids))
            slot = _Slot()
            conn.pending[req_id] = slot
            try:
                frame = encode({**msg, "reqId": req_id}, exact_ints=True, strict=True)
            except BunqError:
                conn.pending.pop(req_id, None)
                raise
            if len(frame) - 4 > self.max_frame:
                conn.pending.pop(req_id, None)
                raise ProtocolError(
                    f"request of {len(frame)} bytes exceeds the frame limit",
                    size=len(frame),
                    limit=self.max_frame,
                )
            try:
                with conn.wlock:
                    conn.sock.sendall(frame)
            except OSError as exc:
                conn.pending.pop(req_id, None)
                self._drop(conn, f"send failed: {exc}")
                if attempt == 0:
                    continue  # never written: safe to retry on a new connection
                raise BackendUnavailable(f"bunq server {self.host}:{self.port}: {exc}") from exc
            return self._await(conn, req_id, slot, msg, timeout, idempotent and attempt == 0)
        raise AssertionError("unreachable")  # pragma: no cover

    def _await(
        self,
        conn: _Conn,
        req_id: str,
        slot: _Slot,
        msg: Mapping[str, Any],
        timeout: float | None,
        retry: bool,
    ) -> dict[str, Any]:
        if not slot.lock.acquire(timeout=self.timeout if timeout is None else timeout):
            conn.pending.pop(req_id, None)
            self._drop(conn, f"no reply to {msg.get('cmd')} in time")
            if retry:
                return self.call(msg, timeout, idempotent=False)
            raise BackendUnavailable(
                f"bunq server {self.host}:{self.port}: no reply to "
                f"{msg.get('cmd')} in time (connection reset)"
            )
        if slot.error is not None:
            if retry:
                return self.call(msg, timeout, idempotent=False)
            raise BackendUnavailable(f"bunq server {self.host}:{self.port}: {slot.error}")
        reply = slot.reply
        assert reply is not None
        if reply.get("ok") is not True:
            raise error_from_reply(reply)
        return reply

    # -- connection --------------------------------------------------------------------
    def _connected(self) -> _Conn:
        conn = self._conn
        if conn is not None and not conn.dead:
            return conn
        with self._lock:
            if self._closed:
                raise BackendUnavailable("the remote backend is closed")
            if self._conn is None or self._conn.dead:
                self._conn = self._open()
            return self._conn

    def _open(self) -> _Conn:
        try:
            raw = socket.create_connection((self.host, self.port), self.connect_timeout)
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            for opt, value in (("TCP_KEEPIDLE", 15), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3)):
                if hasattr(socket, opt):
                    raw.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), value)
            sock: socket.socket | TlsSocket = raw
            if self.tls is not None:  # the handshake within connect_timeout too
                sock = TlsSocket(raw, self.tls, self.host)
        except OSError as exc:
            raise BackendUnavailable(
                f"cannot reach bunq server {self.host}:{self.port}: {exc}"
            ) from exc
        sock.settimeout(self.ping_interval)
        conn = _Conn(sock, self.max_frame)
        self.generation += 1
        threading.Thread(
            target=self._read, args=(conn,), daemon=True, name=f"bunq-link-{self.generation}"
        ).start()
        self._conn = conn
        try:
            if self.token:
                self._handshake(conn, {"cmd": "Auth", "token": self.token})
            self.hello = self._handshake(
                conn, {"cmd": "Hello", "protocolVersion": 3, "capabilities": ["bunq", "pipelining"]}
            )
        except BaseException:
            self._drop(conn, "handshake failed")
            raise
        return conn

    def _handshake(self, conn: _Conn, msg: dict[str, Any]) -> dict[str, Any]:
        req_id = str(next(self._ids))
        slot = _Slot()
        conn.pending[req_id] = slot
        try:
            with conn.wlock:
                conn.sock.sendall(encode({**msg, "reqId": req_id}, exact_ints=True))
        except OSError as exc:
            raise BackendUnavailable(f"bunq server {self.host}:{self.port}: {exc}") from exc
        if not slot.lock.acquire(timeout=self.connect_timeout) or slot.reply is None:
            raise BackendUnavailable(f"bunq server {self.host}:{self.port}: no {msg['cmd']} reply")
        if slot.reply.get("ok") is not True:
            err = error_from_reply(slot.reply)
            raise err if msg["cmd"] != "Auth" or isinstance(err, AuthError) else AuthError(str(err))
        return slot.reply

    def _read(self, conn: _Conn) -> None:
        try:
            while not conn.dead:
                try:
                    chunk = conn.sock.recv(1 << 18)
                except TimeoutError:
                    if conn.ping_out or not self._ping(conn):
                        break
                    continue
                if not chunk:
                    break
                conn.ping_out = False
                for msg in conn.decoder.feed(chunk):
                    self._deliver(conn, msg)
        except (OSError, BunqError) as exc:
            log.debug("link reader stopped: %s", exc)
        self._drop(conn, "connection closed")

    def _ping(self, conn: _Conn) -> bool:
        conn.ping_out = True
        try:
            with conn.wlock:
                conn.sock.sendall(encode({"cmd": "Ping", "reqId": PING_ID}))
        except OSError:
            return False
        return True

    def _deliver(self, conn: _Conn, msg: Any) -> None:
        if type(msg) is not dict:
            return
        if "reqId" not in msg and msg.get("type") == "event":  # pushed (SubscribeEvents)
            if self.on_push is not None:
                self.on_push(msg)
            return
        slot = conn.pending.pop(str(msg.get("reqId")), None)
        if slot is not None:
            slot.reply = msg
            slot.lock.release()

    def _drop(self, conn: _Conn, why: str) -> None:
        """Tear one socket generation down and fail its outstanding requests."""
        if conn.dead:
            return
        conn.dead = True
        try:
            conn.sock.close()
        except OSError:
            pass
        pending, conn.pending = conn.pending, {}
        for slot in pending.values():
            slot.error = ConnectionError(why)
            slot.lock.release()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            if self._conn is not None:
                self._drop(self._conn, "closed")
