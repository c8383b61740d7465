"""The server: TCP + HTTP listeners around one backend, timers, graceful stop.

:class:`Server` runs inside an event loop (``await server.start()`` ...
``await server.stop()``); :class:`BackgroundServer` runs one on a thread of
its own (tests, benchmarks, embedding). ``bunq serve`` (:mod:`.cli`) serves
one until SIGTERM/SIGINT; :meth:`Server.stop` then stops accepting, lets
in-flight commands finish, closes the backend (which flushes any
write-behind) and returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

from ..backends.base import Backend
from ..errors import BunqError
from . import leasewatch
from .commands import load
from .conn import Connection
from .context import ServerConfig, ServerContext
from .http import start_http

log = logging.getLogger("bunq.server")

READ_CHUNK = 256 << 10  # bytes one socket read may bring (asyncio's own read size)


class Server:
    """``bunq serve`` around ``backend`` (the server closes it on :meth:`stop`).

    :param backend: any Backend.
    :param config: listeners, limits and timers.
    :param close_backend: close the backend on stop (default True).
    """

    def __init__(
        self, backend: Backend, config: ServerConfig | None = None, close_backend: bool = True
    ) -> None:
        self.config = config or ServerConfig()
        self.ctx = ServerContext(backend, self.config)
        self.commands = load()
        self.conns: set[Connection] = set()
        # every socket read lands here first (event-loop thread only), then in its decoder
        self.read_buffer = memoryview(bytearray(READ_CHUNK))
        # connections not yet authenticated, oldest first (a dict keeps insertion order)
        self.unauthed: dict[Connection, None] = {}
        self.close_backend = close_backend
        self.stopping = False
        self.port = 0
        self.http_port: int | None = None
        self._tcp: asyncio.Server | None = None
        self._http: asyncio.Server | None = None
        self._ticker: asyncio.Task[None] | None = None
        try:
            from ..cron import Scheduler

            self.ctx.scheduler = Scheduler(backend)
        except ImportError:  # pragma: no cover - cron is part of bunq
            log.warning("bunq.cron unavailable: Cron commands answer unsupported")

    async def start(self) -> None:
        """Bind the listeners (port 0 picks a free port) and start the timers."""
        loop = asyncio.get_running_loop()
        cfg = self.config
        self._tcp = await loop.create_server(
            lambda: Connection(self),
            cfg.host,
            cfg.port,
            reuse_address=True,
            backlog=1024,
            ssl=cfg.tls,
        )
        self.port = self._tcp.sockets[0].getsockname()[1]
        self.ctx.hooks.start()
        if cfg.http_port is not None:
            self._http = await start_http(self, cfg.host, cfg.http_port, cfg.tls)
            self.http_port = self._http.sockets[0].getsockname()[1]
        self._ticker = loop.create_task(self._tick())
        log.info(
            "listening",
            extra={
                "tcp": f"{cfg.host}:{self.port}",
                "http": self.http_port,
                "backend": self.ctx.backend.kind,
                "inline": self.ctx.run.inline,
            },
        )

    # -- connections -------------------------------------------------------------------
    def admit(self, conn: Connection) -> bool:
        """Take a new connection, or refuse it (False) at ``max_connections``.

        Past ``max_unauthenticated`` connections that have not authenticated yet,
        the oldest of them is closed to make room: a flood of connections that
        never authenticate cannot lock a legitimate client out.
        """
        cfg = self.config
        if len(self.conns) >= cfg.max_connections:
            self.ctx.metrics.refused.labels("max_connections").inc()
            return False
        if not conn.session.authed:
            while len(self.unauthed) >= cfg.max_unauthenticated:
                oldest = next(iter(self.unauthed))
                self.unauthed.pop(oldest)
                self.ctx.metrics.refused.labels("max_unauthenticated").inc()
                oldest.close("too many unauthenticated connections")
            self.unauthed[conn] = None
        self.conns.add(conn)
        return True

    def authenticated(self, conn: Connection) -> None:
        self.unauthed.pop(conn, None)

    def release(self, conn: Connection) -> bool:
        """Forget a closed connection; False if it was never admitted."""
        self.unauthed.pop(conn, None)
        if conn not in self.conns:
            return False
        self.conns.discard(conn)
        return True

    # -- timers ------------------------------------------------------------------------
    async def _tick(self) -> None:
        cfg = self.config
        next_sweep = next_cron = 0.0
        while not self.stopping:
            now = time.monotonic()
            self._close_idle(now)
            if now >= next_sweep:
                next_sweep = now + cfg.sweep_interval
                await self._guard("sweep", self._sweep())
            if now >= next_cron and self.ctx.scheduler is not None:
                next_cron = now + cfg.cron_interval
                await self._guard("cron", self._fire_cron())
            await asyncio.sleep(min(cfg.sweep_interval, cfg.cron_interval, 1.0))

    async def _guard(self, what: str, coro: Any) -> None:
        try:
            await coro
        except BunqError as exc:
            log.warning(f"{what} failed", extra={"error": str(exc), "code": exc.code})
        except Exception:  # a timer must outlive one bad run
            log.exception(f"{what} failed")

    async def _sweep(self) -> None:
        ctx = self.ctx
        result = await ctx.run(ctx.backend.sweep)
        if (result.requeued or result.dead) and ctx.events.active:
            # Candidates read after the sweep: a lease that ran out while it ran was taken
            # back too (read before it, such a lease was never announced); stalled()
            # keeps only those the sweep took back.
            expired = ctx.leases.expired(ctx.backend.clock())
            if expired:
                await leasewatch.stalled(ctx, expired)
        if result.requeued or result.dlq_retried or result.dead:
            ctx.waiters.notify_all()
        if result.dead:
            ctx.job_waiters.wake_all()  # WaitJob: re-read (some may be in the DLQ now)
        ctx.leases.prune(ctx.backend.clock())

    async def _fire_cron(self) -> None:
        jobs = await self.ctx.run(self.ctx.scheduler.fire_due)
        if jobs:
            self.ctx.events.added(jobs, 0, self.ctx.backend.clock())
            self.ctx.metrics.pushed.inc(len(jobs))
            self.ctx.waiters.notify({j.queue for j in jobs})

    def _close_idle(self, now: float) -> None:
        for conn in list(self.conns):
            why = conn.expired(now)
            if why is not None:
                conn.close(why)

    # -- stop --------------------------------------------------------------------------
    async def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, finish in-flight commands (up to ``timeout`` s), close the backend."""
        if self.stopping:
            return
        self.stopping = self.ctx.stopping = True
        self.ctx.waiters.close()
        self.ctx.job_waiters.wake_all()
        self.ctx.rate_expiry.close()
        for srv in (self._tcp, self._http):
            if srv is not None:
                srv.close()
        for conn in list(self.conns):
            conn.stop_reading()
        deadline = time.monotonic() + timeout
        while any(c.inflight for c in self.conns) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0)  # let the last replies be flushed
        for conn in list(self.conns):
            if conn.transport is not None:
                conn.transport.close()
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for srv in (self._tcp, self._http):
            if srv is not None:
                await srv.wait_closed()
        if self.close_backend:
            await asyncio.get_running_loop().run_in_executor(None, self.ctx.backend.close)
        self.ctx.close()
        log.info("stopped")


class BackgroundServer:
    """Run a :class:`Server` on its own thread and event loop.

    ``with BackgroundServer(backend, config) as srv: ... srv.port``
    """

    def __init__(
        self, backend: Backend, config: ServerConfig | None = None, close_backend: bool = False
    ) -> None:
        self.server = Server(
            backend, config or ServerConfig(port=0, http_port=None), close_backend=close_backend
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="bunq-serve", daemon=True
        )

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def url(self) -> str:
        return f"bunq://{self.server.config.host}:{self.server.port}"

    def start(self) -> BackgroundServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(10)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self._stop(timeout), self._loop)
        fut.result(timeout + 5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _stop(self, timeout: float) -> None:
        await self.server.stop(timeout)
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:  # e.g. drains of the group commit: nothing may be left pending
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
