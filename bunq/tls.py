"""TLS contexts for ``bunq serve``'s listeners and for the ``bunqs://`` client.

``server_context`` serves a certificate chain (PEM) and, given a CA bundle,
requires and verifies client certificates (mutual TLS). ``client_context``
verifies the server against the system's CAs or a given bundle, and may present
a client certificate. Both refuse TLS below 1.2.
"""

from __future__ import annotations

import socket
import ssl
import threading

from .errors import ConfigError


def server_context(
    cert: str, key: str | None = None, client_ca: str | None = None
) -> ssl.SSLContext:
    """A server context for ``cert``/``key`` (PEM); ``client_ca``: require client certificates."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
        if client_ca:
            ctx.load_verify_locations(client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load TLS files: {exc}") from None
    return ctx


def client_context(
    ca: str | None = None, cert: str | None = None, key: str | None = None
) -> ssl.SSLContext:
    """A client-side context: verify the server (``ca`` or the system's CAs), present ``cert``."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca or None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        if cert:
            ctx.load_cert_chain(cert, key or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load TLS client certificate: {exc}") from None
    return ctx


class TlsSocket:
    """A client TLS connection over a connected socket, for one reader thread and any
    number of writer threads at once (what ``bunq://``'s pipelined link does).

    ``ssl.SSLSocket`` is not safe for that: OpenSSL forbids using one SSL object
    from two threads at once, and a read that handles a TLS 1.3 session ticket
    while another thread writes loses the connection now and then. Here TLS runs
    in memory (``SSLContext.wrap_bio``): every use of the TLS object holds
    ``_tls``, socket I/O never does, and encrypted bytes leave in the order they
    were produced (drained and sent under ``_send``).
    """

    def __init__(self, sock: socket.socket, ctx: ssl.SSLContext, server_hostname: str) -> None:
        self._sock = sock
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._obj = ctx.wrap_bio(self._in, self._out, server_hostname=server_hostname)
        self._tls = threading.Lock()
        self._send = threading.Lock()
        while True:  # the handshake, before any other thread sees the socket
            try:
                self._obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("closed during the TLS handshake") from None
                self._in.write(data)
        self._flush()

    def _flush(self) -> None:
        with self._send:
            with self._tls:
                data = self._out.read()
            if data:
                self._sock.sendall(data)

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def sendall(self, data: bytes) -> None:
        with self._send:
            with self._tls:
                self._obj.write(data)
                out = self._out.read()
            self._sock.sendall(out)

    def recv(self, size: int) -> bytes:
        """Up to ``size`` decrypted bytes; b"" once the server closed; TimeoutError as a socket."""
        while True:
            with self._tls:
                try:
                    data = self._obj.read(size)
                except ssl.SSLWantReadError:
                    data = None
                except ssl.SSLZeroReturnError:
                    return b""
                pending = self._out.pending
            if pending:  # e.g. an answer to a key update
                self._flush()
            if data:
                return data
            raw = self._sock.recv(max(size, 16384))
            if not raw:
                return b""
            with self._tls:
                self._in.write(raw)

    def close(self) -> None:
        self._sock.close()
