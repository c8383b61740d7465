"""Job events on Redis (``Capability.EVENTS``): one capped stream per queue.

``XADD {prefix:queue}:events MAXLEN ~ EVENT_RING`` per batch of a queue's events,
written behind by an
:class:`~bunq.backends.eventlog.EventWriter` (one pipeline per batch); a reader
remembers the stream id it read last and blocks in ``XREAD``. Stream ids survive a
reconnect, so a reader that lost its connection reads on from its id: nothing the capped
stream still holds is lost.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ...jobevents import JobEvent, by_queue, pack_events, unpack_events
from ..eventlog import (
    EVENT_RING,
    LISTEN_REFRESH_S,
    READ_BATCH,
    register_reader,
)
from ..eventwriter import EventWriter, ListenCache
from .errors import translated
from .keys import Keys


def stream(keys: Keys, queue: str) -> str:
    return keys.queue(queue) + ":events"


class RedisEventLog:
    def __init__(self, backend: Any, client: Any, keys: Keys) -> None:
        self.b, self.r, self.keys = backend, client, keys
        self._listened = ListenCache(backend)
        self._writer = EventWriter(self._write, "bunq-redis-events", self._listened)
        self.publish_events = self._writer.publish_events
        self.has_readers = self._listened  # drivers build no events nobody reads
        self.flush_events = self._writer.flush

    def close(self) -> None:
        self._writer.close()

    def _write(self, events: Sequence[JobEvent]) -> None:
        with translated("events"):
            pipe = self.r.pipeline(transaction=False)
            for q, evs in by_queue(events).items():  # one entry per queue and batch
                pipe.xadd(stream(self.keys, q), {b"e": pack_events(evs)}, maxlen=EVENT_RING,
                          approximate=True)  # fmt: skip
            pipe.execute()

    def event_reader(self, queue: str) -> RedisEventReader:
        key = stream(self.keys, queue)
        register_reader(self.b, queue)  # before the cursor
        self._listened.forget(queue)
        with translated("events"):
            last = self.r.xrevrange(key, count=1)
        return RedisEventReader(self.b, queue, key, last[0][0] if last else b"0-0")


class RedisEventReader:
    def __init__(self, backend: Any, queue: str, key: str, after: bytes) -> None:
        self.b, self.r, self.queue, self.key = backend, backend._r, queue, key
        self.after, self.missed = after, 0
        self.registered = time.monotonic()

    def read(self, timeout_ms: int) -> list[JobEvent]:
        if time.monotonic() - self.registered > LISTEN_REFRESH_S:
            register_reader(self.b, self.queue)
            self.registered = time.monotonic()
        block = max(int(timeout_ms), 1)
        with translated("events"):
            got = self.r.xread({self.key: self.after}, count=READ_BATCH, block=block)
        out = []
        for _, entries in got or ():
            for sid, fields in entries:
                self.after = sid
                out.extend(unpack_events(self.queue, fields.get(b"e", b"")))
        return out

    def close(self) -> None:
        pass
