"""The key layout: every key of a queue shares the hash tag ``{prefix:queue}``.

A queue therefore lives in one Redis Cluster slot and every per-queue script
touches one slot. Keys shared by all queues live under their own tags: the
queue registry and the kv records under ``{prefix}``, the id index (job id ->
queue, for lookups by id alone) in 16 shards ``{prefix:ids:N}`` so it spreads
over a cluster.
"""

from __future__ import annotations

import zlib

ID_SHARDS = 16


class Keys:
    """Key names for one prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.registry = f"{{{prefix}}}:queues"
        self._tags: dict[str, str] = {}

    def queue(self, queue: str) -> str:
        """The tag of ``queue``: KEYS[1] of every per-queue script, the stem of its keys."""
        tag = self._tags.get(queue)
        if tag is None:
            if len(self._tags) > 10_000:
                self._tags.clear()
            tag = self._tags[queue] = f"{{{self.prefix}:{queue}}}"
        return tag

    def wake(self, queue: str) -> str:
        return self.queue(queue) + ":wake"

    def delayed(self, queue: str) -> str:
        return self.queue(queue) + ":delayed"

    def meta(self, queue: str) -> str:
        return self.queue(queue) + ":meta"

    def job(self, queue: str, job_id: str) -> str:
        return f"{self.queue(queue)}:j:{job_id}"

    def logs(self, queue: str, job_id: str) -> str:
        return f"{self.queue(queue)}:l:{job_id}"

    def results(self, queue: str, parent_id: str) -> str:
        return f"{self.queue(queue)}:res:{parent_id}"

    def ids(self, job_id: str) -> str:
        """The id-index shard holding ``job_id``."""
        return f"{{{self.prefix}:ids:{zlib.crc32(job_id.encode()) % ID_SHARDS}}}"

    def kv(self, ns: str) -> str:
        return f"{{{self.prefix}}}:kv:{ns}"
