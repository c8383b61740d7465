"""Job events on Redis (``Capability.EVENTS``): one capped stream per queue.

``XADD {prefix:queue}:events MAXLEN ~ EVENT_RING`` per event (one pipeline per batch,
in the queue's slot); a reader remembers the stream id it read last and blocks in
``XREAD``. Stream ids survive a reconnect, so a reader that lost its connection reads
on from its id: nothing the capped stream still holds is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...jobevents import JobEvent
from ..eventlog import EVENT_RING, READ_BATCH
from .errors import translated
from .keys import Keys


def stream(keys: Keys, queue: str) -> str:
    return keys.queue(queue) + ":events"


class RedisEventLog:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.r, self.keys = client, keys

    def publish_events(self, events: Sequence[JobEvent]) -> None:
        if not events:
            return
        with translated("events"):
            pipe = self.r.pipeline(transaction=False)
            for ev in events:
                pipe.xadd(stream(self.keys, ev.queue), {b"e": ev.to_blob()},
                          maxlen=EVENT_RING, approximate=True)  # fmt: skip
            pipe.execute()

    def event_reader(self, queue: str) -> RedisEventReader:
        key = stream(self.keys, queue)
        with translated("events"):
            last = self.r.xrevrange(key, count=1)
        return RedisEventReader(self.r, queue, key, last[0][0] if last else b"0-0")


class RedisEventReader:
    def __init__(self, client: Any, queue: str, key: str, after: bytes) -> None:
        self.r, self.queue, self.key, self.after, self.missed = client, queue, key, after, 0

    def read(self, timeout_ms: int) -> list[JobEvent]:
        block = max(int(timeout_ms), 1)
        with translated("events"):
            got = self.r.xread({self.key: self.after}, count=READ_BATCH, block=block)
        out = []
        for _, entries in got or ():
            for sid, fields in entries:
                self.after = sid
                ev = JobEvent.from_blob(self.queue, fields.get(b"e", b""))
                if ev is not None:
                    out.append(ev)
        return out

    def close(self) -> None:
        pass
