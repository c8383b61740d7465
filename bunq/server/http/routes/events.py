"""``GET /events``: Server-Sent Events of job transitions, plus a ``stats`` tick.

Each job event of :mod:`bunq.server.events` (the frames TCP subscribers get)
is sent as ``event: job`` with the event as JSON data; ``/events/queues/{queue}``
keeps one queue's events (bunqueue's path). Every ``interval`` seconds
(default 1) an ``event: stats`` carries the server's running totals
(``pushed``, ``pulled``, ``completed``, ``failed``): a dashboard draws
throughput from their differences at no cost to the backend. A client that
does not read fast enough (more than ``event_buffer`` bytes queued) is
disconnected, as TCP subscribers are.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from ....protocol import FrameDecoder
from ...fields import as_str
from ..router import route
from ..schemas import INT
from ..transport import Request, Response

SSE = "text/event-stream"


class _SseSubscriber:
    """An EventHub subscriber that queues encoded frames for one HTTP stream."""

    def __init__(self, limit: int) -> None:
        self.frames: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.queued = 0
        self.limit = limit
        self.dropped = False

    def push_event(self, frame: bytes) -> bool:
        if self.dropped or self.queued + len(frame) > self.limit:
            self.dropped = True
            self.frames.put_nowait(None)
            return False
        self.queued += len(frame)
        self.frames.put_nowait(frame)
        return True


def _sse(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, default=str)}\n\n".encode()


@route("GET", "/events/queues/{queue}", "Server-Sent Events of one queue's jobs (and totals)",
       "events", query={"interval": INT}, raw=SSE)  # fmt: skip
async def queue_events(req: Request) -> Response:
    return await events(req)


@route("GET", "/events", "Server-Sent Events: every job transition (event: job) and the "
       "server's totals (event: stats)", "events", query={"interval": INT}, raw=SSE)  # fmt: skip
async def events(req: Request) -> Response:
    queue = req.params.get("queue")
    if queue is not None:
        queue = as_str(queue, "queue", 256)
    interval = min(max(float(req.query.get("interval") or 1), 0.2), 5.0)
    server = req.server
    ctx = server.ctx

    async def stream(writer: asyncio.StreamWriter) -> None:
        sub = _SseSubscriber(ctx.config.event_buffer)
        if queue is None:
            ctx.events.subscribe_all(sub)
        else:
            ctx.events.subscribe(sub, queue)
        decoder = FrameDecoder(ctx.config.max_frame)
        try:
            writer.write(b": bunq events\nretry: 2000\n\n")
            next_tick = 0.0
            while not server.stopping and not writer.is_closing():
                now = time.monotonic()
                if now >= next_tick:
                    next_tick = now + interval
                    totals = {**ctx.metrics.totals(), "time": time.time() * 1000}
                    writer.write(_sse("stats", totals))
                    await writer.drain()
                try:
                    frame = await asyncio.wait_for(sub.frames.get(), next_tick - now)
                except asyncio.TimeoutError:
                    continue
                if frame is None:
                    return
                sub.queued -= len(frame)
                for msg in decoder.feed(frame):
                    writer.write(_sse("job", msg.get("event")))
                await writer.drain()
        finally:
            ctx.events.unsubscribe(sub)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return Response(200, ctype=SSE, headers=headers, stream=stream)
