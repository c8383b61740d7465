"""TLS contexts for ``bunq serve``'s listeners and for the ``bunqs://`` client.

``server_context`` serves a certificate chain (PEM) and, given a CA bundle,
requires and verifies client certificates (mutual TLS). ``client_context``
verifies the server against the system's CAs or a given bundle, and may present
a client certificate. Both refuse TLS below 1.2.
"""

from __future__ import annotations

import ssl

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
