"""Dependencies across queues: two slots, so two steps, made safe by an outbox.

A job of queue B that depends on a job D of queue A is *linked* first (``link.lua``
on A: D remembers its dependent, or answers that it is already done or unknown),
then admitted on B with the count of linked dependencies still pending. Completing
D appends a release to A's outbox in the same script; the completer delivers it
(``xrelease.lua`` on B, idempotent) and removes it, and any sweep delivers what a
crashed completer left. A release that arrives before its dependent's admission is
remembered on B and counted by the admission.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from ...codec import unpackb
from ...errors import DependencyError
from ...job import NewJob
from .errors import translated
from .keys import Keys
from .scripts import SCRIPTS, Script

OUTBOX_BATCH = 100
MAX_FLOW_DEPTH = 100  # a fail_parent_on_failure chain climbs at most this many queues
Done = list[tuple[str, str, Any]]  # (parent, child, result) of children already completed


class RemoteDeps(ABC):
    """Mixin of RedisBackend: needs ``_r``, ``keys``, ``_scripted``, ``_pipelined``, ``_now``."""

    _r: Any
    keys: Keys

    @abstractmethod
    def _now(self) -> int: ...

    @abstractmethod
    def _scripted(self, cmds: list[tuple[Any, ...]]) -> list[Any]: ...

    @abstractmethod
    def _pipelined(self, script: Script, calls: dict[str, list[Any]]) -> list[Any]: ...

    def _resolve_deps(self, queue: str, jobs: list[NewJob]) -> tuple[list[list[Any]], Done]:
        """Per job ``[xpending, n, local deps...]`` for add.lua, and the results of
        children in other queues that are already done (parent, child, result)."""
        where = self._queues_of(jobs)
        links: dict[str, list[tuple[str, str]]] = {}
        local: dict[str, list[str]] = {}
        for job in jobs:
            local[job.id] = []
            for dep in job.opts.depends_on:
                other = where.get(dep)
                if other is None or other == queue:
                    local[job.id].append(dep)  # the script checks it (or calls it unknown)
                else:
                    links.setdefault(other, []).append((job.id, dep))
        pending = dict.fromkeys(local, 0)
        done: Done = []
        if links:
            calls = {self.keys.queue(q): [queue, *(x for pair in pairs for x in pair)]
                     for q, pairs in links.items()}  # fmt: skip
            with translated("link"):
                replies = self._pipelined(SCRIPTS.link, calls)
            for pairs, reply in zip(links.values(), replies, strict=True):
                for (jid, dep), (status, *rest) in zip(pairs, reply, strict=True):
                    if status == b"unknown":
                        raise DependencyError(f"unknown dependency {dep!r} of job {jid}",
                                              job_id=dep)  # fmt: skip
                    if status == b"pending":
                        pending[jid] += 1
                    elif rest and rest[0]:
                        done.append((jid, dep, rest[0]))
        return [[pending[j.id], len(local[j.id]), *local[j.id]] for j in jobs], done

    def _queues_of(self, jobs: list[NewJob]) -> dict[str, str | None]:
        """The queues (by the id index) of dependencies outside this run of jobs."""
        here = {job.id for job in jobs}
        outside = sorted({d for job in jobs for d in job.opts.depends_on if d not in here})
        if not outside:
            return {}
        with translated("dependencies"):
            pipe = self._r.pipeline(transaction=False)
            for dep in outside:
                pipe.hget(self.keys.ids(dep), dep)
            got = pipe.execute()
        return {d: None if q is None else q.decode() for d, q in zip(outside, got, strict=True)}

    def _store_results(self, queue: str, done: Done) -> None:
        """Results of children (in other queues) that were done before their parent came."""
        with translated("results"):
            pipe = self._r.pipeline(transaction=False)
            for parent, child, result in done:
                pipe.hset(self.keys.results(queue, parent), child, result)
            pipe.execute()

    def _deliver(self, queue: str, depth: int = 0) -> None:
        """Deliver the releases in ``queue``'s outbox to dependents in other queues, and
        the flow failure policies of its dead-lettered children to their parents (a
        parent failed by one may queue its own policy: delivered in turn)."""
        key = self.keys.queue(queue) + ":outbox"
        failed_parents: set[str] = set()
        while True:
            with translated("outbox"):
                entries = self._r.lrange(key, 0, OUTBOX_BATCH - 1)
                if not entries:
                    break
                now = self._now()
                cmds: list[tuple[Any, ...]] = []
                for raw in entries:
                    q, dependent, dep, result, *policy = unpackb(raw, raw=True)
                    target = queue if q is False else q.decode()
                    has = b"0" if result is False else b"1"
                    cmd = SCRIPTS.xrelease.command(
                        self.keys.queue(target), dependent, dep, result or b"", has, now
                    )
                    if policy:  # (policy, error): common.lua child_dead
                        cmd += (policy[0], policy[1], queue)
                        if policy[0] == b"fail_parent_on_failure":
                            failed_parents.add(target)
                    cmds.append(cmd)
                self._scripted(cmds)
                pipe = self._r.pipeline(transaction=False)
                for raw in entries:
                    pipe.lrem(key, 1, raw)
                pipe.execute()
        if depth < MAX_FLOW_DEPTH:
            for target in failed_parents:
                self._deliver(target, depth + 1)
