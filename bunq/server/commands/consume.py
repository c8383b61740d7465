"""The worker loop: PULL/PULLB (long poll), ACK/ACKB, FAIL, heartbeats and lock extension.

A pulled job's lock token is ``<lease token>.<attempt>`` (see
:func:`bunq.protocol.wire_token`); clients send it back unchanged and the
server turns it into the bunq Lease whose fence the backend checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ...backends.base import Backend
from ...errors import BunqError, LeaseLost, ValidationError
from ...execution import give_back
from ...job import FailureReason, Lease, Settle
from ...policy import FailDecision, decide_failure
from ...protocol import Prepared
from ...stacks import DEFAULT_STACK_LIMIT, with_stack
from ...validate import MAX_ERROR_CHARS
from ...wire_shapes import job_to_wire
from .. import leasewatch
from ..context import ServerContext, Session
from ..fields import as_bool, as_int, as_str, opt_int, str_list
from ..jobwait import failed
from ..wire import queue_of
from . import command

MAX_PULL = 1000
MAX_POLL_MS = 60_000
MAX_STACK_LINES = 100  # stack lines read from a FAIL (bunqueue's wire cap)
LATE = {"applied": False, "reason": "already-finalized"}


async def lease_with_poll(
    ctx: ServerContext, s: Session, queue: str, n: int, lease_ms: int, owner: str, timeout_ms: int
) -> list[Lease]:
    """Lease up to ``n`` jobs, waiting up to ``timeout_ms`` for the first one.

    A full batch wakes the next waiter of the queue (there may be more work:
    see :class:`~bunq.server.state.Waiters`). Jobs leased for a client that
    has gone meanwhile are given back at once (their attempt is not spent).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    while True:
        leases: list[Lease] = await ctx.run(ctx.backend.lease, queue, n, lease_ms, owner)
        if leases and s.closed:
            await ctx.run(give_back, ctx.backend, leases, FailureReason.WORKER_LOST)
            ctx.waiters.notify((queue,))
            return []
        if leases:
            ctx.events.leased(queue, leases)
            if len(leases) >= n:
                ctx.waiters.notify((queue,))
        left = deadline - loop.time()
        if leases or left <= 0 or ctx.stopping or s.closed:
            return leases
        await ctx.waiters.wait(queue, left)


async def pull_args(ctx: ServerContext, msg: Mapping[str, Any], n_default: int) -> tuple[Any, ...]:
    """``(queue, n, timeout, lease_ms, owner)``; without ``lockTtl`` the lease is the
    queue's stall setting (:mod:`bunq.server.stallconfig`)."""
    queue = queue_of(msg)
    n = opt_int(msg, "count", n_default, 1, MAX_PULL)
    timeout = opt_int(msg, "timeout", 0, 0, MAX_POLL_MS)
    if msg.get("lockTtl") is None:
        lease_ms = await ctx.stalls.lease_ms(ctx, queue)
    else:
        lease_ms = as_int(msg.get("lockTtl"), "lockTtl", 1, ctx.config.max_lease_ms)
    owner = msg.get("owner")
    if owner is not None:
        owner = as_str(owner, "owner", 512)
    return queue, n, timeout, lease_ms, owner


@command("PULL", "PULLB")
async def pull(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``PULL`` -> ``{job, token}``; ``PULLB {count}`` -> ``{jobs, tokens}`` (both may be empty)."""
    batch = msg.get("cmd") == "PULLB"
    queue, n, timeout, lease_ms, owner = await pull_args(ctx, msg, 1)
    leases = await lease_with_poll(ctx, s, queue, n if batch else 1, lease_ms, owner or "", timeout)
    tokens = ctx.leases.add(leases, lease_ms, locked=owner is not None)
    if leases:
        leasewatch.pulled(ctx, s, leases, tokens)
    ctx.metrics.pulled.inc(len(leases))
    jobs = [job_to_wire(lease.job) for lease in leases]
    if batch:
        return Prepared(jobs=jobs, tokens=tokens)
    return Prepared(job=jobs[0] if jobs else None, token=tokens[0] if tokens else None)


async def _late(ctx: ServerContext, job_id: str) -> dict[str, Any]:
    """A stale outcome: 'already-finalized' when the job is done, else a lost lock."""
    if await ctx.finalized(job_id):
        return {"data": dict(LATE)}
    raise LeaseLost(f"Invalid or expired lock token for job {job_id}", job_id=job_id)


async def _lease_or_late(ctx: ServerContext, job_id: str, token: object) -> Lease | None:
    """The lease a token opens; None when it belonged to a lease already settled here."""
    try:
        return await ctx.resolve(job_id, token)
    except LeaseLost:
        if ctx.leases.settled(token):
            return None
        raise


@command("ACK")
async def ack(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, token, result}`` -> ``{}`` (or ``{data: {applied: false}}`` when late)."""
    job_id = as_str(msg.get("id"), "id", 1024)
    lease = await _lease_or_late(ctx, job_id, msg.get("token"))
    if lease is None:
        return await _late(ctx, job_id)
    settled = await ctx.complete([(lease, msg.get("result"))])
    return {} if settled[0] is Settle.OK else await _late(ctx, job_id)


def _column(msg: Mapping[str, Any], name: str, n: int) -> Sequence[Any]:
    value = msg.get(name)
    if value is None:
        return [None] * n
    if not isinstance(value, list) or len(value) != n:
        raise ValidationError(f"ACKB {name} length must match ids length", field=name)
    return value


@command("ACKB")
async def ack_b(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{ids, tokens, results}`` -> ``{}`` or ``{data: {ignoredIds, ignoredIndices}}``."""
    ids = str_list(msg.get("ids"), "ids")
    tokens, results = _column(msg, "tokens", len(ids)), _column(msg, "results", len(ids))
    items, late = [], []
    for i, got in enumerate(await ctx.resolve_many(list(zip(ids, tokens, strict=True)))):
        if isinstance(got, BunqError):
            if not ctx.leases.settled(tokens[i]):
                raise got  # a wrong token fails the whole batch, before anything is applied
            late.append(i)
        else:
            items.append((i, got))
    settled = await ctx.complete([(lease, results[i]) for i, lease in items]) if items else []
    stale = sorted(
        late + [i for (i, _), st in zip(items, settled, strict=True) if st is not Settle.OK]
    )
    if not stale:
        return {}
    return {"data": {"ignoredIds": [ids[i] for i in stale], "ignoredIndices": stale}}


def _fail(
    backend: Backend, lease: Lease, error: str, unrecoverable: bool
) -> tuple[Settle, FailDecision, int]:
    now = backend.clock()
    decision = decide_failure(lease.job, now, unrecoverable=unrecoverable)
    started = lease.job.started_at
    settled = backend.fail(lease, error, decision, max(now - started, 0) if started else 0)
    return settled, decision, now


def error_text(msg: Mapping[str, Any], stack_limit: int = DEFAULT_STACK_LIMIT) -> str:
    """The failure text (:mod:`bunq.stacks`): ``error``, then at most ``stack_limit``
    lines of ``stack`` (the job's ``stackTraceLimit``), throw site first as sent."""
    err = msg.get("error")
    text = err if isinstance(err, str) else ("" if err is None else repr(err))
    stack = msg.get("stack")
    if isinstance(stack, list):
        text = with_stack(text or "failed", stack[:MAX_STACK_LINES], stack_limit)
    return text[:MAX_ERROR_CHARS] or "failed"


@command("FAIL")
async def fail(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, token, error, stack, unrecoverable}``: retry with backoff or dead-letter."""
    job_id = as_str(msg.get("id"), "id", 1024)
    unrecoverable = as_bool(msg.get("unrecoverable"), "unrecoverable")
    lease = await _lease_or_late(ctx, job_id, msg.get("token"))
    if lease is None:
        return await _late(ctx, job_id)
    error = error_text(msg, lease.job.opts.stack_trace_limit)
    settled, decision, now = await ctx.run(_fail, ctx.backend, lease, error, unrecoverable)
    ctx.leases.forget(lease)
    if settled is not Settle.OK:
        return await _late(ctx, job_id)
    if ctx.events.active:  # the event's failedReason is the error without the stack
        err = msg.get("error")
        ctx.events.failed(lease.job, err[:4000] if isinstance(err, str) else error, decision, now)
    ctx.metrics.failed.inc()
    ctx.waiters.notify((lease.job.queue,))
    if decision.is_dead:
        ctx.job_waiters.settle(job_id, failed(error))
    return {}


def _extend(backend: Backend, items: list[tuple[Lease, int]]) -> list[tuple[Settle, int]]:
    out = []
    for lease, ms in items:
        try:
            out.append((backend.extend(lease, ms), backend.clock() + ms))
        except BunqError:
            out.append((Settle.STALE, 0))
    return out


async def _renew(
    ctx: ServerContext, ids: Sequence[str], tokens: Sequence[Any], durations: Sequence[Any]
) -> int:
    """Extend the leases that the tokens open, in one backend round; return how many.

    A heartbeat (no ``duration``) for a lease this server handed out and that
    still has more than two thirds of its length to run is acknowledged
    without a backend write: bunqueue's JS worker heartbeats every job right
    after pulling it, and the lease stays live until the next beat anyway.
    """
    items, renewed = [], 0
    now = ctx.backend.clock()
    resolved = await ctx.resolve_many(list(zip(ids, tokens, strict=True)))
    for lease, dur in zip(resolved, durations, strict=True):
        if isinstance(lease, BunqError):
            continue
        if dur is None:
            ms = ctx.leases.lease_ms(lease, ctx.config.default_lease_ms)
            if ctx.leases.fresh(lease, now, ms * 2 // 3):
                ctx.leases.renewed(lease.job.id)
                renewed += 1
                continue
        else:
            ms = as_int(dur, "duration", 1, ctx.config.max_lease_ms)
        items.append((lease, ms))
    if not items:
        return renewed
    for (lease, _), (settle, until) in zip(
        items, await ctx.run(_extend, ctx.backend, items), strict=True
    ):
        if settle is Settle.OK:
            renewed += 1
            ctx.leases.touch(lease.job.id, until)
    return renewed


@command("JobHeartbeat", "ExtendLock")
async def heartbeat(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """Renew one lock: ``{id, token, duration?}``."""
    job_id = as_str(msg.get("id"), "id", 1024)
    if await _renew(ctx, [job_id], [msg.get("token")], [msg.get("duration")]) == 0:
        raise LeaseLost(f"Lock not found or invalid token for job {job_id}", job_id=job_id)
    return {"data": {"ok": True}} if msg.get("cmd") == "JobHeartbeat" else {}


@command("JobHeartbeatB", "ExtendLocks")
async def heartbeat_b(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """Renew many locks: ``{ids, tokens, durations?}`` -> ``{data: {ok, count}}``."""
    ids = str_list(msg.get("ids"), "ids")
    tokens = _column(msg, "tokens", len(ids))
    durations = _column(msg, "durations", len(ids))
    count = await _renew(ctx, ids, tokens, durations)
    if msg.get("cmd") == "ExtendLocks":
        return {"count": count}
    return {"data": {"ok": True, "count": count}}
