"""Core: the state every flow works on (shards, routing, engine-wide side tables).

Locking: each shard has its own lock, taken for everything about its queues.
``xlock`` (re-entrant) guards the engine-wide side tables: the dependency
index, the parent -> children index, the window of completed ids, results and
logs. The order is always *shard locks (ascending index) before xlock*; a
flow that must touch another shard afterwards (releasing dependents) first
lets go of both. Nothing ever waits on a shard lock while holding xlock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .._core import BoundedSet, LRUCache, shard_for
from ..errors import DependencyError
from ..job import now_ms
from ..validate import queue_name as check_queue_name
from ..values import Clock
from .config import EngineConfig
from .record import CHILDREN, COMPLETED, Rec
from .shard import Shard

MAX_ROUTES = 65_536  # queue-name -> shard cache; cleared when full


class Store(Protocol):
    """What the engine needs from a write-behind store."""

    def sync(self) -> None:
        """Return once every change noted so far is committed."""
        ...

    def kick(self) -> None:
        """After a change: flush soon; past the backlog, wait for a commit."""
        ...

    def wake(self) -> None:
        """After an add (:meth:`admit` was its backpressure): flush soon, never wait."""
        ...

    def admit(self) -> None:
        """Backpressure before an add; raise (nothing stored) if the file cannot be written."""
        ...

    def commit_held(self, shards: list[Shard]) -> None:
        """Commit the pending changes of ``shards`` now (caller holds ``wlock`` and their locks)."""
        ...

    @property
    def wlock(self) -> threading.Lock:
        """Serialises capture + commit; taken before any shard lock."""
        ...


class Core:
    """Shards plus engine-wide tables; the flows in this package operate on it.

    :param clock: epoch-ms clock used for every decision.
    :param config: bounds and shard count (:class:`EngineConfig`); keyword
        arguments override single fields (``shards=4, max_payload=...``).
    """

    def __init__(self, *, clock: Clock = now_ms, config: EngineConfig | None = None,
                 **overrides: Any) -> None:  # fmt: skip
        base = config or EngineConfig()
        if overrides:
            from dataclasses import replace

            base = replace(base, **overrides)
        cfg = base.resolved()
        self.config = cfg
        self.clock = clock
        self.max_payload = cfg.max_payload
        self.max_stalls = cfg.max_stalls
        self.shards = [Shard(i, cfg, self._forgotten) for i in range(cfg.shards or 1)]
        self._routes: dict[str, Shard] = {}
        self.xlock = threading.RLock()
        self.waiting_on: dict[str, set[Rec]] = {}  # dependency id -> jobs waiting on it
        self.children: dict[str, dict[str, str]] = {}  # parent id -> {child id: queue}
        self.done: BoundedSet[str] = BoundedSet(cfg.done_window, 0.1)
        self.results: LRUCache[str, bytes] = LRUCache(cfg.results_max)
        self.logs: LRUCache[str, list[str]] = LRUCache(cfg.logs_max)
        self.kv: dict[str, dict[str, bytes]] = {}
        self.kv_lock = threading.Lock()
        self.kv_dirty: set[tuple[str, str]] | None = None
        self.store: Store | None = None

    # -- routing ---------------------------------------------------------------------------
    def route(self, queue: str) -> Shard:
        """Return the shard of ``queue`` (validating the name once per name)."""
        shard = self._routes.get(queue)
        if shard is None:
            check_queue_name(queue)
            shard = self.shards[shard_for(queue, len(self.shards))]
            if len(self._routes) >= MAX_ROUTES:
                self._routes.clear()
            self._routes[queue] = shard
        return shard

    def find(self, job_id: str) -> tuple[Shard, Rec] | None:
        """Return the shard and record of ``job_id`` (a racy read; lock, then re-check)."""
        for shard in self.shards:
            rec = shard.jobs.get(job_id)
            if rec is not None:
                return shard, rec
        return None

    def locked(self, job_id: str, fn: Callable[[Shard, Rec], Any], default: Any = None) -> Any:
        """Run ``fn(shard, rec)`` under the lock of the shard holding ``job_id``."""
        for shard in self.shards:
            if job_id in shard.jobs:
                with shard.lock:
                    rec = shard.jobs.get(job_id)
                    if rec is not None:
                        return fn(shard, rec)
        return default

    # -- side tables (xlock) -----------------------------------------------------------------
    def dep_done(self, dep: str, job_id: str) -> bool:
        """Return whether dependency ``dep`` completed; DependencyError if unknown.

        Called with xlock held. Another shard's record is read without its
        lock: completion sets the state before it takes xlock to collect the
        dependents, so either we see COMPLETED or it sees our registration.
        """
        found = self.find(dep)
        if found is not None:
            return found[1].state is COMPLETED
        if dep in self.done:
            return True
        raise DependencyError(f"unknown dependency {dep!r} of job {job_id}", job_id=dep)

    def register(self, rec: Rec, deps: Iterable[str]) -> None:
        """Note that ``rec`` waits for each of ``deps`` (xlock held)."""
        index = self.waiting_on
        for dep in deps:
            waiting = index.get(dep)
            if waiting is None:
                index[dep] = {rec}
            else:
                waiting.add(rec)

    def _forgotten(self, rec: Rec) -> None:
        # A record leaves the engine (its shard lock is held): drop it from side tables.
        with self.xlock:
            if rec.state is COMPLETED:
                self.done.add(rec.id)
            self.results.pop(rec.id)
            self.logs.pop(rec.id)
            parent = rec.opts.parent_id
            if parent is not None:
                kids = self.children.get(parent)
                if kids is not None:
                    kids.pop(rec.id, None)
                    if not kids:
                        del self.children[parent]
            if rec.state is CHILDREN:
                for dep in rec.opts.depends_on:
                    waiting = self.waiting_on.get(dep)
                    if waiting is not None:
                        waiting.discard(rec)
                        if not waiting:
                            del self.waiting_on[dep]

    def sync(self) -> None:
        """Wait until the write-behind store committed everything noted so far."""
        if self.store is not None:
            self.store.sync()
