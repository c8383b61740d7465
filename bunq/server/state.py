"""Server-side state shared by the command handlers.

- :class:`Runner` runs blocking backend calls: on a small thread pool, or
  inline on the event loop for a backend that never blocks (the memory engine).
- :class:`LeaseTable` remembers the leases this server handed out, so a
  bunqueue client's ``{id, token}`` can be turned back into a bunq ``Lease``
  (with its job snapshot) without a lookup per acknowledgement.
- :class:`Waiters` parks long-polling ``PULL`` requests and wakes them when a queue
  may have work (no CPU per parked request).
- :class:`Coalescer` merges concurrent requests into one backend call (group
  commit): many single ``PUSH``/``ACK`` frames become one ``add`` / ``complete_many``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextvars
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import BunqError
from ..job import Job, Lease
from ..protocol import wire_token

log = logging.getLogger("bunq.server")

T = TypeVar("T")
R = TypeVar("R")

#: backends whose calls never block (memory, no I/O on the caller's path): run inline
INLINE_KINDS = frozenset({"memory", "embedded"})


class Runner:
    """Run backend calls where they belong: inline, or on ``threads`` worker threads.

    :param inline: call on the event loop (only for backends that never block).
    :param threads: pool size otherwise; 1 suits SQLite (one writer), more suits
        network databases.
    """

    def __init__(self, inline: bool, threads: int = 1) -> None:
        self.inline = inline
        self._pool = None if inline else cf.ThreadPoolExecutor(threads, "bunq-backend")
        self._side: cf.ThreadPoolExecutor | None = None
        self._reads: cf.ThreadPoolExecutor | None = None

    async def __call__(self, fn: Callable[..., R], *args: Any) -> R:
        if self._pool is None:
            return fn(*args)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    async def offload(self, fn: Callable[..., R], *args: Any) -> R:
        """Run a call that may block even on an inline backend (a durable commit)."""
        if self._pool is not None:
            return await self(fn, *args)
        if self._side is None:
            self._side = cf.ThreadPoolExecutor(1, "bunq-durable")
        return await asyncio.get_running_loop().run_in_executor(self._side, fn, *args)

    async def read(self, fn: Callable[..., R], *args: Any) -> R:
        """Run a long read (a big listing, packed for the wire) off the event loop,
        so one client's heavy query does not hold up everyone else's requests."""
        if self._pool is not None:
            return await self(fn, *args)
        if self._reads is None:
            self._reads = cf.ThreadPoolExecutor(1, "bunq-reads")
        return await asyncio.get_running_loop().run_in_executor(self._reads, fn, *args)

    def close(self) -> None:
        for pool in (self._pool, self._side, self._reads):
            if pool is not None:
                pool.shutdown(wait=True)


@dataclass(slots=True)
class Held:
    """A lease this server handed out, with what it needs to renew it."""

    lease: Lease
    wire: str
    lease_ms: int
    locked: bool  # pulled with an owner: settling needs the token
    expires_at: int
    renewed: bool = False  # a heartbeat or extension came since the pull
    timer: asyncio.TimerHandle | None = (
        None  # the job's timeout (leasewatch), cancelled when dropped
    )


class LeaseTable:
    """Leases handed out by this server, by job id (event-loop thread only).

    Bounded by the leases live within one lease length: :meth:`prune` drops
    entries past their expiry (the backend's sweep takes those jobs back).
    """

    SETTLED_MAX = 65_536

    def __init__(self) -> None:
        self._by_id: dict[str, Held] = {}
        # wire tokens of leases settled here: a late heartbeat or ack for one of them
        # is answered without a backend lookup (workers heartbeat jobs being acked)
        self._settled: dict[str, None] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, leases: Iterable[Lease], lease_ms: int, locked: bool) -> list[str]:
        """Remember leases; return their wire tokens in order."""
        out = []
        for lease in leases:
            w = wire_token(lease.token, lease.attempt)
            old = self._by_id.get(lease.job.id)
            if old is not None and old.timer is not None:
                old.timer.cancel()
            self._by_id[lease.job.id] = Held(lease, w, lease_ms, locked, lease.expires_at)
            out.append(w)
        return out

    def find(self, job_id: str, token: object) -> Held | None:
        """Return the held lease of ``job_id`` if ``token`` opens it.

        A missing token opens only a lease pulled without an owner (bunqueue's
        lock-free pulls); any other token must match exactly.
        """
        held = self._by_id.get(job_id)
        if held is None:
            return None
        if token is None or token == "":
            return None if held.locked else held
        return held if token == held.wire else None

    def job(self, job_id: str) -> Job | None:
        """The job snapshot of the lease held here for ``job_id`` (None: none is)."""
        held = self._by_id.get(job_id)
        return None if held is None else held.lease.job

    def lease_ms(self, lease: Lease, default: int) -> int:
        """The lease length ``lease`` was pulled with (``default`` if this server did not)."""
        held = self._by_id.get(lease.job.id)
        if held is not None and held.lease.token == lease.token:
            return held.lease_ms
        return default

    def fresh(self, lease: Lease, now: int, margin_ms: int) -> bool:
        """Whether ``lease`` is held here and still runs more than ``margin_ms`` past ``now``."""
        held = self._by_id.get(lease.job.id)
        return (
            held is not None
            and held.lease.token == lease.token
            and held.lease.attempt == lease.attempt
            and held.expires_at - now > margin_ms
        )

    def forget(self, lease: Lease) -> None:
        """Drop a settled lease (and remember its token as settled)."""
        held = self._by_id.get(lease.job.id)
        if (
            held is not None
            and held.lease.token == lease.token
            and held.lease.attempt == lease.attempt
        ):
            del self._by_id[lease.job.id]
            if held.timer is not None:
                held.timer.cancel()
            if len(self._settled) >= self.SETTLED_MAX:
                del self._settled[next(iter(self._settled))]
            self._settled[held.wire] = None

    def settled(self, token: object) -> bool:
        """Whether ``token`` belonged to a lease already settled on this server."""
        return isinstance(token, str) and token in self._settled

    def touch(self, job_id: str, expires_at: int) -> None:
        held = self._by_id.get(job_id)
        if held is not None:
            held.expires_at = expires_at
            held.renewed = True

    def renewed(self, job_id: str) -> None:
        """Note a heartbeat answered without a backend write (the lock is in use)."""
        held = self._by_id.get(job_id)
        if held is not None:
            held.renewed = True

    def set_timer(self, job_id: str, timer: asyncio.TimerHandle) -> None:
        """Attach a timeout timer to the lease held for ``job_id`` (cancelled with it)."""
        held = self._by_id.get(job_id)
        if held is None:
            timer.cancel()
        else:
            held.timer = timer

    def holds(self, job_id: str, wire: str) -> bool:
        """Whether the lease with wire token ``wire`` is still held here for ``job_id``."""
        held = self._by_id.get(job_id)
        return held is not None and held.wire == wire

    def take_unrenewed(self, pulled: Iterable[tuple[str, str]]) -> list[Lease]:
        """Of ``(job id, wire token)`` pairs, drop and return the leases still held and
        never renewed (a closed connection's jobs to give back)."""
        out = []
        for job_id, wire in pulled:
            held = self._by_id.get(job_id)
            if held is not None and held.wire == wire and not held.renewed:
                del self._by_id[job_id]
                if held.timer is not None:
                    held.timer.cancel()
                out.append(held.lease)
        return out

    def expired(self, now: int, most: int = 1000) -> list[Lease]:
        """Up to ``most`` leases held here whose expiry passed (stall candidates)."""
        out = []
        for held in self._by_id.values():
            if held.expires_at < now:
                out.append(held.lease)
                if len(out) >= most:
                    break
        return out

    def prune(self, now: int, grace_ms: int = 5_000) -> int:
        """Drop leases expired more than ``grace_ms`` ago; return how many."""
        dead = [k for k, h in self._by_id.items() if h.expires_at + grace_ms < now]
        for k in dead:
            timer = self._by_id.pop(k).timer
            if timer is not None:
                timer.cancel()
        return len(dead)


class Waiters:
    """Per-queue wake-ups for long polls (event-loop thread only).

    A parked request costs one future and one timer, and no CPU until it is
    woken: waiters of a queue stand in FIFO order, ``notify(queues, n)`` wakes
    the first ``n`` of each (as many as there may be jobs for), and a woken
    poller that leases a full batch calls :meth:`notify` again for the next
    one (there may be more). Work nobody rings for (a delayed job coming due,
    a job added by another process) is found by one timer per queue that has
    waiters: every ``recheck`` seconds it wakes that queue's first waiter
    only, so the cost is one probe per queue, not one per waiter.
    """

    def __init__(self, recheck: float = 0.1) -> None:
        self.recheck = recheck
        self._queues: dict[str, dict[asyncio.Future[None], None]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.closed = False

    def __len__(self) -> int:
        return sum(len(w) for w in self._queues.values())

    def notify(self, queues: Iterable[str], n: int = 1) -> None:
        """Wake up to ``n`` waiters of each queue, first come first woken."""
        for q in queues:
            parked = self._queues.get(q)
            for _ in range(n):
                if not parked:
                    break
                fut = next(iter(parked))
                del parked[fut]
                if not fut.done():
                    fut.set_result(None)

    def notify_all(self) -> None:
        """Wake the first waiter of every queue (each passes it on if it finds work)."""
        self.notify(list(self._queues))

    def close(self) -> None:
        """Shutdown: wake every waiter; later waits return at once."""
        self.closed = True
        for q, parked in list(self._queues.items()):
            self.notify((q,), len(parked))
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    async def wait(self, queue: str, timeout_s: float) -> None:
        """Return when woken for ``queue`` or after ``timeout_s``."""
        if self.closed or timeout_s <= 0:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        parked = self._queues.get(queue)
        if parked is None:
            parked = self._queues[queue] = {}
        parked[fut] = None
        if queue not in self._timers:
            self._timers[queue] = loop.call_later(self.recheck, self._recheck, queue)
        try:
            await asyncio.wait((fut,), timeout=timeout_s)  # woken, or the time is up
        finally:
            parked.pop(fut, None)
            if not parked and self._queues.get(queue) is parked:
                del self._queues[queue]

    def _recheck(self, queue: str) -> None:
        if self._queues.get(queue):
            self.notify((queue,))
            loop = asyncio.get_running_loop()
            self._timers[queue] = loop.call_later(self.recheck, self._recheck, queue)
        else:
            self._timers.pop(queue, None)


class Coalescer(Generic[T, R]):
    """Merge concurrent submissions into one call of ``run_many`` (group commit).

    ``run_many(items)`` runs through the :class:`Runner` and returns one result
    per item, or the exception that item gets. While one call runs, new items
    wait and go together in the next; at most ``max_items`` per call.
    ``after(items, results)``, when given, runs on the event loop before any
    submitter hears of its result (job events go out in commit order).
    """

    def __init__(
        self,
        run: Runner,
        run_many: Callable[[list[T]], Sequence[R | BaseException]],
        max_items: int = 2_000,
        blocking: Callable[[list[T]], bool] | None = None,
        after: Callable[[list[T], Sequence[R | BaseException]], None] | None = None,
    ) -> None:
        self._run = run
        self._run_many = run_many
        self._blocking = blocking
        self._after = after
        self._max = max_items
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._busy = False

    async def submit(self, item: T) -> R:
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, fut))
        if not self._busy:
            self._busy = True
            # a fresh context: the drain task outlives the request that started it (the task
            # copies the context it is created in; create_task(context=) is 3.11+)
            contextvars.Context().run(asyncio.get_running_loop().create_task, self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending[: self._max], self._pending[self._max :]
                items = [item for item, _ in batch]
                slow = self._blocking is not None and self._blocking(items)
                try:
                    call = self._run.offload if slow else self._run
                    results = await call(self._run_many, items)
                except BaseException as exc:  # every waiter must hear of it
                    results = [exc] * len(batch)
                if self._after is not None:
                    try:
                        self._after(items, results)
                    except Exception:  # a hook must not lose the results
                        log.exception("after-commit hook failed")
                for (_, fut), res in zip(batch, results, strict=False):
                    if fut.done():
                        continue
                    if isinstance(res, BaseException):
                        fut.set_exception(res)
                    else:
                        fut.set_result(res)
        finally:
            self._busy = False


def each_or_error(
    fn: Callable[[T], R], items: Sequence[T], catch: type[Exception] = BunqError
) -> list[R | BaseException]:
    """Apply ``fn`` to each item separately, capturing errors (typed ones by default) per item."""
    out: list[R | BaseException] = []
    for item in items:
        try:
            out.append(fn(item))
        except catch as exc:
            out.append(exc)
    return out


def split(flat: Sequence[T], sizes: Sequence[int]) -> list[list[T]]:
    """Cut ``flat`` into consecutive pieces of ``sizes``."""
    out, at = [], 0
    for n in sizes:
        out.append(list(flat[at : at + n]))
        at += n
    return out
