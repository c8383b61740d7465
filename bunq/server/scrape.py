"""Scrape answers (``/metrics``, ``/stats``) rendered at most once per ``ttl`` seconds.

A scrape reads counts of every queue and renders text; doing that per request
lets a fast scraper slow every client down. Here the first scrape after the
answer expires renders it (concurrent scrapes wait for that one render) and
the others get the cached bytes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class ScrapeCache:
    """Rendered answers by name, each reused for ``ttl`` seconds (event-loop thread only)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._done: dict[str, tuple[float, bytes]] = {}
        self._rendering: dict[str, asyncio.Future[bytes]] = {}
        self.renders = 0

    async def get(self, name: str, render: Callable[[], Awaitable[bytes]]) -> bytes:
        """The cached answer ``name``, rendered by ``render()`` when missing or stale."""
        hit = self._done.get(name)
        if hit is not None and time.monotonic() < hit[0]:
            return hit[1]
        running = self._rendering.get(name)
        if running is not None:
            return await asyncio.shield(running)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._rendering[name] = fut
        try:
            body = await render()
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters (if any) re-raise it
            raise
        finally:
            del self._rendering[name]
        self.renders += 1
        self._done[name] = (time.monotonic() + self.ttl, body)
        fut.set_result(body)
        return body
