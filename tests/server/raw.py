"""A raw protocol client for tests: send frames (or bytes), read replies."""

from __future__ import annotations

import socket
import time
from typing import Any

from bunq.protocol import FrameDecoder, encode


class Raw:
    """One blocking socket speaking frames."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.dec = FrameDecoder(1 << 30)
        self.inbox: list[Any] = []
        self.n = 0

    def send(self, msg: dict[str, Any] | bytes) -> str | None:
        """Send a message (a reqId is added unless given) or raw bytes; return the reqId."""
        if isinstance(msg, bytes):
            self.sock.sendall(msg)
            return None
        if "reqId" not in msg:
            self.n += 1
            msg = {**msg, "reqId": f"r{self.n}"}
        self.sock.sendall(encode(msg, exact_ints=True))
        return msg["reqId"]  # type: ignore[no-any-return]

    def recv(self, timeout: float = 5.0) -> Any:
        """Return the next reply (raises TimeoutError, or ConnectionError on close)."""
        deadline = time.monotonic() + timeout
        while not self.inbox:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply")
            self.sock.settimeout(left)
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed by server")
            self.inbox += list(self.dec.feed(chunk))
        return self.inbox.pop(0)

    def call(self, msg: dict[str, Any], timeout: float = 5.0) -> Any:
        """Send and wait for the reply with the same reqId."""
        rid = self.send(msg)
        while True:
            reply = self.recv(timeout)
            if reply.get("reqId") == rid:
                return reply

    def closed_by_server(self, timeout: float = 3.0) -> bool:
        """Whether the server closes the connection within ``timeout`` (replies are drained)."""
        try:
            while True:
                self.recv(timeout)
        except ConnectionError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()
