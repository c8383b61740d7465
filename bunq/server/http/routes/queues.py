"""Queues: list with counts, one queue, pause/resume/drain/clean/obliterate, limits."""

from __future__ import annotations

from typing import Any

from ....backends.base import Backend, check_queue_name
from ...commands.monitor import MAX_QUEUES_IN_STATS
from ...wire import counts_to_wire
from ..router import body_of, call, query_int, route
from ..schemas import BOOL, COUNT, COUNTS, EMPTY, INT, LIMITS, QUEUE, STATE, STR, array, obj
from ..transport import Request


def _queue_rows(backend: Backend, names: list[str]) -> list[dict[str, Any]]:
    return [
        {"name": q, "counts": counts_to_wire(backend.counts(q)), "paused": backend.is_paused(q)}
        for q in names
    ]


def _page(backend: Backend, after: str, limit: int) -> tuple[list[dict[str, Any]], str | None]:
    names = sorted(backend.queues())
    if after:
        names = [q for q in names if q > after]
    page = names[:limit]
    nxt = page[-1] if len(names) > limit else None
    return _queue_rows(backend, page), nxt


@route("GET", "/queues", "Queues (by name) with their job counts and paused flag", "queues",
       query={"after": STR, "limit": INT},
       reply=obj(("queues",), queues=array(QUEUE), next={"type": ["string", "null"]}))  # fmt: skip
async def list_queues(req: Request) -> dict[str, Any]:
    limit = query_int(req, "limit", 100, 1, MAX_QUEUES_IN_STATS)
    ctx = req.server.ctx
    rows, nxt = await ctx.run(_page, ctx.backend, req.query.get("after", ""), limit)
    return {"queues": rows, "next": nxt}


def _one(backend: Backend, queue: str) -> dict[str, Any]:
    row = _queue_rows(backend, [queue])[0]
    row["dlq"] = backend.dlq_size(queue)
    return row


@route("GET", "/queues/{queue}", "One queue: counts, paused, DLQ size, limits", "queues",
       reply=obj(("queue",), queue=QUEUE, limits=LIMITS))  # fmt: skip
async def get_queue(req: Request) -> dict[str, Any]:
    ctx = req.server.ctx
    row = await ctx.run(_one, ctx.backend, req.params["queue"])
    return {"queue": row, "limits": await _limits(req)}


@route("GET", "/queues/{queue}/paused", "Whether the queue is paused", "queues",
       reply=obj(("paused",), paused=BOOL))  # fmt: skip
async def paused(req: Request) -> dict[str, Any]:
    return await call(req, "IsPaused", {"queue": req.params["queue"]})


@route("GET", "/queues/{queue}/counts", "Jobs per state", "queues",
       reply=obj(("counts",), counts=COUNTS))  # fmt: skip
async def counts(req: Request) -> dict[str, Any]:
    return await call(req, "GetJobCounts", {"queue": req.params["queue"]})


def _control(cmd: str, what: str) -> None:
    async def handler(req: Request) -> dict[str, Any]:
        return await call(req, cmd, {"queue": req.params["queue"]})

    route("POST", f"/queues/{{queue}}/{what}", f"{cmd} the queue", "queues", reply=EMPTY)(handler)


_control("Pause", "pause")
_control("Resume", "resume")


@route("POST", "/queues/{queue}/drain", "Remove the waiting and delayed jobs", "queues",
       reply=COUNT)  # fmt: skip
async def drain(req: Request) -> dict[str, Any]:
    return await call(req, "Drain", {"queue": req.params["queue"]})


@route("POST", "/queues/{queue}/clean", "Remove finished jobs older than grace ms", "queues",
       body=obj(grace=INT, limit=INT, state=STATE),
       reply=obj(("count", "ids"), count=INT, ids=array(STR)))  # fmt: skip
async def clean(req: Request) -> dict[str, Any]:
    b = body_of(req)
    msg: dict[str, Any] = {k: b[k] for k in ("grace", "limit", "state") if k in b}
    return await call(req, "Clean", {**msg, "queue": req.params["queue"]})


@route("POST", "/queues/{queue}/obliterate", "Remove the queue and all its jobs", "queues",
       body=obj(force=BOOL), reply=EMPTY)  # fmt: skip
async def obliterate(req: Request) -> dict[str, Any]:
    force = body_of(req).get("force", False)
    return await call(req, "Obliterate", {"queue": req.params["queue"], "force": force})


@route("GET", "/queues/{queue}/limits", "Rate limit and concurrency", "queues",
       reply=obj(("limits",), limits=LIMITS))  # fmt: skip
async def get_limits(req: Request) -> dict[str, Any]:
    return {"limits": await _limits(req)}


async def _limits(req: Request) -> dict[str, Any]:
    ctx = req.server.ctx
    got = await ctx.run(ctx.backend.get_limits, check_queue_name(req.params["queue"]))
    rate = got.rate_max is not None
    return {"rateLimit": got.rate_max, "rateDuration": got.rate_duration if rate else None,
            "concurrency": got.concurrency}  # fmt: skip


@route("PUT", "/queues/{queue}/rate-limit", "Set the queue's rate limit", "queues",
       body=obj(("limit",), limit=INT, duration=INT),
       reply=obj(("limits",), limits=LIMITS))  # fmt: skip
async def set_rate_limit(req: Request) -> dict[str, Any]:
    b = body_of(req)
    msg = {"limit": b.get("limit"), "duration": b.get("duration")}
    await call(req, "RateLimit", {**msg, "queue": req.params["queue"]})
    return await get_limits(req)


@route("DELETE", "/queues/{queue}/rate-limit", "Clear the queue's rate limit", "queues",
       reply=obj(("limits",), limits=LIMITS))  # fmt: skip
async def clear_rate_limit(req: Request) -> dict[str, Any]:
    await call(req, "RateLimitClear", {"queue": req.params["queue"]})
    return await get_limits(req)


@route("PUT", "/queues/{queue}/concurrency", "Set the queue's concurrency limit", "queues",
       body=obj(concurrency=INT, limit=INT),
       reply=obj(("limits",), limits=LIMITS))  # fmt: skip
async def set_concurrency(req: Request) -> dict[str, Any]:
    b = body_of(req)
    limit = b["concurrency"] if b.get("concurrency") is not None else b.get("limit")
    await call(req, "SetConcurrency", {"limit": limit, "queue": req.params["queue"]})
    return await get_limits(req)


@route("DELETE", "/queues/{queue}/concurrency", "Clear the queue's concurrency limit",
       "queues", reply=obj(("limits",), limits=LIMITS))  # fmt: skip
async def clear_concurrency(req: Request) -> dict[str, Any]:
    await call(req, "ClearConcurrency", {"queue": req.params["queue"]})
    return await get_limits(req)
