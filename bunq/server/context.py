"""What every command handler sees: the backend and the server's shared state."""

from __future__ import annotations

import asyncio
import hmac
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backends.base import Backend
from ..errors import BunqError, ConfigError, JobNotFound, LeaseLost
from ..job import Job, JobState, Lease, Settle
from ..protocol import Packed, pack_value, parse_token
from ..settings import Settings
from ..webhooks import Dispatcher, TargetGuard, Webhooks
from .events import EventHub, Subscriber
from .jobwait import JobWaiters, completed
from .metrics import Metrics, WebhookCounts
from .ratettl import RateLimitExpiry
from .scrape import ScrapeCache
from .stallconfig import StallConfigs
from .state import INLINE_KINDS, Coalescer, LeaseTable, Runner, Waiters, each_or_error, split

BIG_LIST = 100  # a longer listing is built and packed off the event loop (long_read)


_DEFAULTS = Settings()  # the documented defaults (no BUNQ_* read): one source for both


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Settings of one server (the CLI fills them from flags and ``Settings``).

    :param tokens: accepted ``Auth`` tokens; empty means no authentication.
    :param max_frame: largest frame body accepted (bytes); a larger one closes the connection.
    :param idle_timeout: seconds without a complete frame (and nothing in flight)
        before a connection is closed; also the deadline for finishing a started frame.
    :param max_inflight: requests per connection being served at once; more wait unread.
    :param threads: backend threads (ignored for inline backends).
    :param inline: run backend calls on the event loop (None: decide by backend kind).
    :param sweep_interval: seconds between sweeps (expired leases, TTLs, DLQ upkeep).
    :param cron_interval: seconds between firings of due cron schedules.
    :param poll_recheck: seconds between re-checks of a queue with parked long polls
        (jobs that came due or were added by another process wake no one); one
        probe per queue, whatever the number of waiters.
    :param event_buffer: bytes of unsent output an event subscriber may have
        before the next event disconnects it (it does not read fast enough).
    :param pre_auth_frame: largest frame body before a connection has
        authenticated (only ``Hello`` and ``Auth`` are served then, one at a time).
    :param max_connections: open TCP connections; more are closed on accept.
    :param max_unauthenticated: connections not yet authenticated (with tokens
        configured); a new one past this closes the oldest of them.
    :param auth_timeout: seconds a connection has to authenticate (with tokens).
    :param max_auth_failures: failed ``Auth`` requests before the connection is closed.
    :param auth_fail_delay: seconds before a failed ``Auth`` is answered.
    :param max_unsent: bytes of replies a client has not read before the server
        stops reading its requests; a client that stays there for ``idle_timeout``,
        or reaches ``UNSENT_DROP`` times this, is disconnected.
    :param http_auth: with tokens configured, ``/metrics`` and ``/stats`` need
        ``Authorization: Bearer <token>`` (``/health`` and ``/ready`` stay open).
    :param scrape_cache: seconds a rendered ``/metrics`` or ``/stats`` answer is reused.
    :param http_max_body: largest HTTP request body (bytes); larger is refused with 413.
    :param cors_origins: origins the HTTP API answers cross-origin requests from
        (``"*"``: any); empty (the default) sends no CORS headers.
    :param tls: wrap both listeners in TLS (see :mod:`bunq.server.tls`); None: plain.
    :param webhook_allow: networks webhooks may reach although the target guard
        refuses them by default (loopback, link-local...): ``("127.0.0.1/32",)``.
    """

    host: str = "127.0.0.1"
    port: int = 6789
    http_port: int | None = 6790
    tokens: tuple[str, ...] = ()
    max_frame: int = _DEFAULTS.max_frame
    idle_timeout: float = _DEFAULTS.idle_timeout
    max_inflight: int = _DEFAULTS.max_inflight
    threads: int = 1
    inline: bool | None = None
    sweep_interval: float = 1.0
    cron_interval: float = 1.0
    poll_recheck: float = 0.1
    max_lease_ms: int = 24 * 3600_000
    default_lease_ms: int = 30_000
    event_buffer: int = 32 << 20
    pre_auth_frame: int = _DEFAULTS.pre_auth_frame
    max_connections: int = _DEFAULTS.max_connections
    max_unauthenticated: int = _DEFAULTS.max_unauthenticated
    auth_timeout: float = _DEFAULTS.auth_timeout
    max_auth_failures: int = _DEFAULTS.max_auth_failures
    auth_fail_delay: float = _DEFAULTS.auth_fail_delay
    max_unsent: int = _DEFAULTS.max_unsent
    http_auth: bool = _DEFAULTS.http_auth
    scrape_cache: float = _DEFAULTS.scrape_cache
    http_max_body: int = 1 << 20
    cors_origins: tuple[str, ...] = ()
    tls: ssl.SSLContext | None = None
    webhook_allow: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in _AT_LEAST_ONE:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in _NOT_NEGATIVE:
            if not getattr(self, name) >= 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")

    def accepts(self, token: object) -> bool:
        """Whether ``token`` is one of ``tokens`` (constant-time against every one)."""
        given = token.encode("utf-8", "replace") if isinstance(token, str) else b""
        ok = False
        for accepted in self.tokens:
            ok |= hmac.compare_digest(given, accepted.encode())
        return ok and bool(given)


_AT_LEAST_ONE = ("max_frame", "pre_auth_frame", "max_connections", "max_unauthenticated",
                 "max_auth_failures", "max_inflight", "max_unsent", "http_max_body")  # fmt: skip
_NOT_NEGATIVE = ("idle_timeout", "auth_timeout", "auth_fail_delay", "scrape_cache")


@dataclass(slots=True)
class Session:
    """Per-connection state a handler may read or change."""

    peer: str = ""
    authed: bool = False
    exact_ints: bool = False  # bunq's own client: 64-bit integers are fine
    closed: bool = False
    subscriber: Subscriber | None = None  # the connection, for SubscribeEvents
    auth_failures: int = 0
    long_reads: asyncio.Lock = field(default_factory=asyncio.Lock)  # one at a time
    writable: asyncio.Event = field(default_factory=asyncio.Event)  # the client reads replies

    def __post_init__(self) -> None:
        self.writable.set()

    async def may_send_more(self) -> bool:
        """Wait while the client leaves its replies unread; False once it is gone.

        Heavy handlers call this before building a big reply: a client that
        does not read gets no more work done for it.
        """
        await self.writable.wait()
        return not self.closed

    close_after_reply: str | None = None  # why the connection closes once this reply is out
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    pulled: dict[str, str] = field(default_factory=dict)  # job id -> wire token (leasewatch)


class ServerContext:
    """The backend plus the state shared by all connections."""

    def __init__(self, backend: Backend, config: ServerConfig) -> None:
        self.backend = backend
        self.config = config
        inline = config.inline if config.inline is not None else backend.kind in INLINE_KINDS
        self.run = Runner(inline, config.threads)
        self.leases = LeaseTable()
        self.waiters = Waiters(config.poll_recheck)
        self.job_waiters = JobWaiters()  # WaitJob
        self.metrics = Metrics()
        self.scrapes = ScrapeCache(config.scrape_cache)
        self.webhooks = Webhooks(backend, TargetGuard(config.webhook_allow))
        self.hooks = Dispatcher(self.webhooks)  # started by the server, closed by close()
        self.metrics.registry.register(WebhookCounts(self.hooks))
        self.events = EventHub(self.metrics, self.hooks)
        self._add_since = 0  # backend time an add batch began (tells duplicates apart)
        self.started = time.time()
        self.workers: dict[str, dict[str, Any]] = {}
        self.adder: Coalescer[list[Any], list[Job]] = Coalescer(
            self.run, self._add_groups, blocking=_any_durable, after=self._added
        )
        self.completer: Coalescer[list[tuple[Lease, Any]], list[Settle]] = Coalescer(
            self.run, self._complete_groups, after=self._completed
        )
        self.scheduler: Any = None  # bunq.cron.Scheduler when available
        self.rate_expiry = RateLimitExpiry()  # RateLimit {ttl}
        self.stalls = StallConfigs()  # Get/SetStallConfig
        self.stopping = False
        self.background: set[asyncio.Task[None]] = set()  # leasewatch's timeouts and give-backs

    # -- group commit ------------------------------------------------------------------
    def _add_groups(self, groups: list[list[Any]]) -> Sequence[list[Job] | BaseException]:
        if self.events.active:
            self._add_since = self.backend.clock()
        if len(groups) == 1:
            return each_or_error(self.backend.add, groups)
        try:
            jobs = self.backend.add([j for g in groups for j in g])
        except BunqError:  # one bad request must not fail its neighbours
            return each_or_error(self.backend.add, groups)
        except Exception:  # nor a backend bug hit by one of them
            return each_or_error(self.backend.add, groups, Exception)
        return split(jobs, [len(g) for g in groups])

    def _complete_groups(
        self, groups: list[list[tuple[Lease, Any]]]
    ) -> Sequence[list[Settle] | BaseException]:
        if len(groups) == 1:
            return each_or_error(self.backend.complete_many, groups)
        try:
            settled = self.backend.complete_many([i for g in groups for i in g])
        except BunqError:
            return each_or_error(self.backend.complete_many, groups)
        return split(settled, [len(g) for g in groups])

    # -- job events, sent before any submitter hears back ------------------------------
    def _added(self, groups: list[list[Any]], results: Sequence[Any]) -> None:
        if self.events.active:
            now = self.backend.clock()
            for res in results:
                if not isinstance(res, BaseException):
                    self.events.added(res, self._add_since, now)

    def _completed(self, groups: list[list[tuple[Lease, Any]]], results: Sequence[Any]) -> None:
        if self.events.active:
            for items, res in zip(groups, results, strict=False):
                if not isinstance(res, BaseException):
                    self.events.completed(items, res)

    async def add(self, jobs: list[Any]) -> list[Job]:
        """Admit ``jobs`` (atomic as one request) through the group commit."""
        out = await self.adder.submit(jobs)
        self.metrics.pushed.inc(len(out))
        if len(out) == 1:  # a single PUSH: no Counter to build
            self.waiters.notify((out[0].queue,), 1)
            return out
        for queue, n in Counter(j.queue for j in out).items():
            self.waiters.notify((queue,), n)
        return out

    async def complete(self, items: list[tuple[Lease, Any]]) -> list[Settle]:
        settled = await self.completer.submit(items)
        done = 0
        for (lease, result), s in zip(items, settled, strict=False):
            self.leases.forget(lease)
            if s is Settle.OK:
                done += 1
                self.job_waiters.settle(lease.job.id, completed(result))
        self.metrics.completed.inc(done)
        self.waiters.notify({lease.job.queue for lease, _ in items})  # concurrency slots
        return settled

    # -- leases ------------------------------------------------------------------------
    async def resolve(self, job_id: str, token: object) -> Lease:
        """Turn a client's ``{id, token}`` into a Lease (LeaseLost when it opens nothing)."""
        got = (await self.resolve_many([(job_id, token)]))[0]
        if isinstance(got, BunqError):
            raise got
        return got

    async def resolve_many(self, pairs: Sequence[tuple[str, object]]) -> list[Lease | BunqError]:
        """Resolve many ``(id, token)`` pairs: leases this server holds first, then
        one backend round for the rest (tokens carry the attempt, so a lease
        outlives a server restart)."""
        out: list[Lease | BunqError] = []
        misses: list[tuple[int, str, tuple[str, int]]] = []
        for job_id, token in pairs:
            held = self.leases.find(job_id, token)
            if held is not None:
                out.append(held.lease)
                continue
            parsed = None if self.leases.settled(token) else parse_token(token)
            if parsed is None:
                msg = f"Invalid or expired lock token for job {job_id}"
                out.append(LeaseLost(msg, job_id=job_id))
            else:
                misses.append((len(out), job_id, parsed))
                out.append(LeaseLost("unresolved"))
        if misses:
            jobs = await self.run(_get_jobs, self.backend, [m[1] for m in misses])
            for (i, job_id, (token, attempt)), job in zip(misses, jobs, strict=True):
                out[i] = (
                    Lease(job, token, attempt, 0)
                    if job is not None
                    else JobNotFound(f"Job not found: {job_id}", job_id=job_id)
                )
        return out

    async def finalized(self, job_id: str) -> bool:
        """Whether a stale outcome is late rather than wrong: the job is gone or terminal."""
        job = await self.run(self.backend.get_job, job_id)
        return job is None or job.state in (JobState.COMPLETED, JobState.FAILED)

    # -- long reads --------------------------------------------------------------------
    async def long_read(self, s: Session, fn: Callable[..., Any], *args: Any) -> Packed:
        """``fn(*args)`` run and msgpack-packed off the event loop (a big listing).

        A client gets one long read at a time, none while it leaves its replies
        unread, and none once it is gone (an empty list then).
        """
        async with s.long_reads:
            if not await s.may_send_more():
                return pack_value([])
            return await self.run.read(_packed, fn, *args)

    # -- misc --------------------------------------------------------------------------
    def close(self) -> None:
        self.hooks.close()
        self.run.close()


def _packed(fn: Callable[..., Any], *args: Any) -> Packed:
    return pack_value(fn(*args))


def _get_jobs(backend: Backend, ids: list[str]) -> list[Job | None]:
    return [backend.get_job(i) for i in ids]


def _any_durable(groups: list[list[Any]]) -> bool:
    """A durable add commits before it returns: keep it off an inline event loop."""
    return any(j.opts.durable for g in groups for j in g)


Handler = Callable[[ServerContext, Mapping[str, Any], Session], Awaitable[dict[str, Any]]]
