"""What the server does for the leases its wire clients hold: timeouts and lost workers.

A bunqueue worker runs jobs in its own process, so two guarantees bunq's
``Worker`` gives in-process are kept here, by the server, for ``PULL``/``PULLB``:

- **timeout**: a job pulled with ``opts.timeout`` that is still leased (not
  acked, failed or given back) that long after the pull fails with reason
  ``timeout`` (retried with backoff, or dead-lettered when its attempts are
  spent), whatever heartbeats say; a later ACK answers as stale.
- **stalled events**: after a sweep that recovered leases, each job this server
  leased whose lease ran out and that the sweep took back is announced to
  event subscribers as ``stalled`` (only while someone listens: it costs one
  read per expired lease).
- **worker lost**: when a connection closes, the jobs it pulled whose lock was
  never renewed (no heartbeat, no extension since the pull) go back to waiting
  at once, their attempt not spent (reason ``worker_lost``), instead of waiting
  for the lease to run out. A lock that was renewed is left to its lease, as
  bunqueue does: pooled clients heartbeat over another connection than the one
  that pulled, so its closing does not mean the worker is gone.

bunq's own client (``BqLease``) is not watched: its ``Worker`` enforces timeouts
itself and heartbeats every lease.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from ..errors import BunqError
from ..execution import give_back
from ..job import FailureReason, JobState, Lease, Settle
from ..policy import decide_failure
from .context import ServerContext, Session

log = logging.getLogger("bunq.server")
MAX_TRACKED = 10_000  # pulled leases a session remembers before it drops settled ones


def pulled(ctx: ServerContext, s: Session, leases: Sequence[Lease], tokens: Sequence[str]) -> None:
    """Note leases handed to session ``s`` (and arm their timeouts)."""
    if len(s.pulled) + len(leases) > MAX_TRACKED:
        s.pulled = {j: w for j, w in s.pulled.items() if ctx.leases.holds(j, w)}
    loop = asyncio.get_running_loop()
    for lease, wire in zip(leases, tokens, strict=True):
        s.pulled[lease.job.id] = wire
        timeout = lease.job.opts.timeout
        if timeout:  # cancelled when the lease is settled or dropped here (LeaseTable)
            handle = loop.call_later(timeout / 1000, _fire_timeout, ctx, lease, wire)
            ctx.leases.set_timer(lease.job.id, handle)


def _fire_timeout(ctx: ServerContext, lease: Lease, wire: str) -> None:
    _spawn(ctx, _time_out(ctx, lease, wire))


def _spawn(ctx: ServerContext, coro: Any) -> None:
    task = asyncio.get_running_loop().create_task(coro)
    ctx.background.add(task)
    task.add_done_callback(ctx.background.discard)


async def _time_out(ctx: ServerContext, lease: Lease, wire: str) -> None:
    if ctx.stopping or not ctx.leases.holds(lease.job.id, wire):
        return  # settled, given back or expired meanwhile

    def fail() -> tuple[Settle, Any, int]:
        now = ctx.backend.clock()
        decision = decide_failure(lease.job, now, reason=FailureReason.TIMEOUT)
        error = f"job timed out after {lease.job.opts.timeout} ms"
        started = lease.job.started_at
        spent = max(now - started, 0) if started else 0
        return ctx.backend.fail(lease, error, decision, spent), decision, now

    try:
        settled, decision, now = await ctx.run(fail)
    except BunqError as exc:
        log.warning("could not time out job %s: %s", lease.job.id, exc)
        return
    ctx.leases.forget(lease)
    if settled is Settle.OK:
        ctx.metrics.failed.inc()
        if ctx.events.active:
            ctx.events.failed(lease.job, "timeout", decision, now)
        ctx.waiters.notify((lease.job.queue,))


def connection_lost(ctx: ServerContext, s: Session) -> None:
    """Give back at once the never-renewed leases session ``s`` pulled (see the module)."""
    if ctx.stopping or not s.pulled:
        return
    leases = ctx.leases.take_unrenewed(s.pulled.items())
    s.pulled = {}
    if leases:
        _spawn(ctx, _give_back(ctx, leases))


async def _give_back(ctx: ServerContext, leases: list[Lease]) -> None:
    try:
        await ctx.run(give_back, ctx.backend, leases, FailureReason.WORKER_LOST)
    except BunqError as exc:  # the leases expire and the sweep takes them back
        log.warning("could not give back %d jobs of a closed connection: %s", len(leases), exc)
        return
    ctx.waiters.notify({lease.job.queue for lease in leases})


async def stalled(ctx: ServerContext, expired: list[Lease]) -> None:
    """Announce ``stalled`` for the ``expired`` leases the sweep took back."""

    def states() -> list[Any]:
        return [ctx.backend.get_job(lease.job.id) for lease in expired]

    by_queue: dict[str, list[str]] = {}
    for lease, job in zip(expired, await ctx.run(states), strict=True):
        if job is None or job.state is not JobState.ACTIVE or job.attempts != lease.attempt:
            by_queue.setdefault(lease.job.queue, []).append(lease.job.id)
            ctx.leases.forget(lease)  # announced once, not again by a later sweep
    for queue, ids in by_queue.items():
        ctx.events.stalled(queue, ids)
