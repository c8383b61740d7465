"""Cross-process wake-ups for a shared SQLite file, without polling delays.

Each waiting backend binds one Unix datagram socket in ``<db>.bell/``; a
writer that committed work sends one byte to every socket there. A socket
stays bound for the backend's life, so a ring that arrives between a failed
lease and the next ``wait`` is queued in the socket, never lost. The listing
of the folder is cached and re-read only when the folder's generation (a
:class:`~.sharedcount.SharedCounter` in ``<db>.bell.peers``, bumped after a
socket is bound and after one is removed) moved: a ring costs a memory read,
not a ``stat`` of the folder per commit.

A ring that reads the old generation while a new waiter binds misses that
waiter, which is harmless: its first :meth:`Doorbell.wait` returns at once
(it looks for work before it ever blocks), and it bumps the generation before
that wait returns, so every ring from then on reaches it.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import uuid

from .sharedcount import SharedCounter


class Doorbell:
    """Ring and wait on the sockets of one database file."""

    def __init__(self, db_path: str) -> None:
        self.dir = db_path + ".bell"
        os.makedirs(self.dir, exist_ok=True)
        self._sock: socket.socket | None = None
        self._path: str | None = None
        self._lock = threading.Lock()
        self._peers: list[str] = []
        self._gen = SharedCounter(self.dir + ".peers")
        self._seen = -1  # the generation self._peers was listed at
        self._out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._out.setblocking(False)

    def ring(self) -> None:
        """Wake every waiter (best effort; a dead peer's socket is removed)."""
        gen = self._gen.read()
        if gen != self._seen:
            try:
                self._peers = [os.path.join(self.dir, n) for n in os.listdir(self.dir)]
            except FileNotFoundError:
                self._peers = []
            self._seen = gen
        gone = False
        for peer in self._peers:
            try:
                self._out.sendto(b"!", peer)
            except BlockingIOError:  # its buffer is full: it has plenty of wake-ups
                pass
            except (ConnectionRefusedError, FileNotFoundError):
                gone = True
                with contextlib.suppress(OSError):
                    os.unlink(peer)
            except OSError:
                pass
        if gone:  # every ringer re-lists the folder (this one too)
            self._gen.bump_anywhere()

    def wait(self, timeout_s: float) -> bool:
        """Block until rung or ``timeout_s``; True if rung (or first call)."""
        with self._lock:
            first = self._sock is None
            if first:
                self._bind()
        sock = self._sock
        assert sock is not None
        if first:
            return True  # a ring before we were bound may have been missed
        ready, _, _ = select.select([sock], [], [], max(timeout_s, 0.0))
        if not ready:
            return False
        with contextlib.suppress(BlockingIOError):
            while sock.recv(64):  # drain the backlog: one wake-up is enough
                pass
        return True

    def _bind(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(self.dir, uuid.uuid4().hex[:16])
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.setblocking(False)
        self._sock, self._path = sock, path
        self._gen.bump_anywhere()  # after the bind: a ring that sees the new value reaches it

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            with contextlib.suppress(OSError):
                os.unlink(self._path or "")
            self._sock = None
            self._gen.bump_anywhere()
        self._out.close()
        self._gen.close()
