"""``bunq serve``'s HTTP port: the JSON API, SSE events, metrics and the dashboard.

:mod:`.transport` reads requests and writes responses (HTTP/1.1, one request
per connection, TLS when configured); :mod:`.router` holds the route table
that :mod:`.routes` fills, one module per resource; :mod:`.openapi` describes
the table at ``/openapi.json``. docs/http.md lists every endpoint.
"""

from __future__ import annotations

import asyncio
import ssl

from .router import ROUTES, dispatch
from .routes import load
from .transport import Host
from .transport import start_http as _start

__all__ = ["ROUTES", "start_http"]

load()


async def start_http(
    server: Host, host: str, port: int, tls: ssl.SSLContext | None = None
) -> asyncio.Server:
    """Serve the HTTP API of ``server`` on (host, port); return the asyncio server."""
    return await _start(server, dispatch, host, port, tls)
