"""Rate limits that expire: ``RateLimit {queue, limit, duration, ttl}`` (bunqueue's wire).

bunqueue's ``queue.rateLimit(ms)`` sends ``RateLimit`` with a ``ttl``: the limit
itself lapses after ``ttl`` ms, broker-side, so a worker that was throttled
pulls freely once it has passed. The server keeps one timer per queue; when it
fires it clears the queue's rate limit, unless the limit was changed since.
Another ``RateLimit`` or ``RateLimitClear`` for the queue cancels the timer. The
timers live in the server process: a restart before the ttl keeps the limit
until it is cleared (the limit is stored by the backend, the expiry is not).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Protocol

from ..backends.base import Backend, QueueLimits
from .state import Runner, Waiters


class _Context(Protocol):
    """What an expiry needs of the server's context (no import of it: no cycle)."""

    backend: Backend
    run: Runner
    waiters: Waiters


class RateLimitExpiry:
    """One pending expiry per queue (``asyncio`` timers on the server's loop)."""

    def __init__(self) -> None:
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def remaining_ms(self, queue: str) -> int | None:
        """Milliseconds until the queue's rate limit lapses; None when it does not."""
        timer = self._timers.get(queue)
        if timer is None:
            return None
        return max(0, round((timer.when() - asyncio.get_running_loop().time()) * 1000))

    def cancel(self, queue: str) -> None:
        """Forget the queue's pending expiry (its limit was set or cleared again)."""
        timer = self._timers.pop(queue, None)
        if timer is not None:
            timer.cancel()

    def expire(self, ctx: _Context, queue: str, limits: QueueLimits, ttl_ms: int) -> None:
        """Clear ``limits`` (the rate limit just set) from ``queue`` after ``ttl_ms``."""
        self.cancel(queue)
        loop = asyncio.get_running_loop()
        self._timers[queue] = loop.call_later(ttl_ms / 1000, self._fire, ctx, queue, limits)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def _fire(self, ctx: _Context, queue: str, limits: QueueLimits) -> None:
        self._timers.pop(queue, None)
        task = asyncio.get_running_loop().create_task(self._clear(ctx, queue, limits))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _clear(ctx: _Context, queue: str, limits: QueueLimits) -> None:
        if await ctx.run(_clear_if_unchanged, ctx.backend, queue, limits):
            ctx.waiters.notify((queue,))


def _clear_if_unchanged(backend: Backend, queue: str, limits: QueueLimits) -> bool:
    now = backend.get_limits(queue)
    if (now.rate_max, now.rate_duration) != (limits.rate_max, limits.rate_duration):
        return False  # changed since (bunq's own client, BqLimits): that one stays
    backend.set_limits(queue, replace(now, rate_max=None))
    return True
