"""Consuming over HTTP (bunqueue's routes): pull, pull a batch, ack, fail, heartbeat.

A pulled job comes with its lock ``token``; ``ack``/``fail``/``heartbeat`` send it
back. The lease is the server's, not the HTTP connection's: a client that pulls
and disappears leaves the job until its lock expires (``lockTtl``, default
30 s), then the sweep gives it back. ``timeout`` (ms, at most 30 s here) long-polls
for the first job.
"""

from __future__ import annotations

from typing import Any

from ...fields import as_int
from ..router import body_of, call, query_int, route
from ..schemas import ANY, BOOL, EMPTY, INT, JOB, NULLABLE_STR, STR, array, obj
from ..transport import Request

MAX_HTTP_POLL_MS = 30_000


@route("GET", "/queues/{queue}/jobs", "Pull one job (null when none); long-polls ?timeout= ms",
       "consume", query={"timeout": INT},
       reply=obj(("job", "token"), job={"oneOf": [JOB, {"type": "null"}]},
                 token=NULLABLE_STR))  # fmt: skip
async def pull(req: Request) -> dict[str, Any]:
    timeout = query_int(req, "timeout", 0, 0, MAX_HTTP_POLL_MS)
    return await call(req, "PULL", {"queue": req.params["queue"], "timeout": timeout})


@route("POST", "/queues/{queue}/jobs/pull-batch", "Pull up to count jobs", "consume",
       body=obj(count=INT, timeout=INT, owner=STR, lockTtl=INT),
       reply=obj(("jobs", "tokens"), jobs=array(JOB), tokens=array(STR)))  # fmt: skip
async def pull_batch(req: Request) -> dict[str, Any]:
    b = body_of(req)
    msg = {k: b[k] for k in ("count", "owner", "lockTtl") if b.get(k) is not None}
    timeout = min(as_int(b.get("timeout") or 0, "timeout", 0, 2**31), MAX_HTTP_POLL_MS)
    return await call(req, "PULLB", {**msg, "timeout": timeout, "queue": req.params["queue"]})


@route("POST", "/jobs/{id}/ack", "Complete a pulled job with its result", "consume",
       body=obj(("token",), token=STR, result=ANY), reply=EMPTY)  # fmt: skip
async def ack(req: Request) -> dict[str, Any]:
    b = body_of(req)
    msg = {"id": req.params["id"], "token": b.get("token"), "result": b.get("result")}
    return await call(req, "ACK", msg)


@route("POST", "/jobs/{id}/fail", "Fail a pulled job: retried with backoff or dead-lettered",
       "consume", body=obj(("token",), token=STR, error=STR, unrecoverable=BOOL),
       reply=EMPTY)  # fmt: skip
async def fail(req: Request) -> dict[str, Any]:
    b = body_of(req)
    keys = ("token", "error", "unrecoverable", "stack")
    fields: dict[str, Any] = {k: b[k] for k in keys if k in b}
    return await call(req, "FAIL", {**fields, "id": req.params["id"]})


@route("POST", "/jobs/{id}/heartbeat", "Keep a pulled job's lock (duration ms)", "consume",
       body=obj(("token",), token=STR, duration=INT), reply=obj())  # fmt: skip
async def heartbeat(req: Request) -> dict[str, Any]:
    b = body_of(req)
    fields: dict[str, Any] = {k: b[k] for k in ("token", "duration") if k in b}
    return await call(req, "JobHeartbeat", {**fields, "id": req.params["id"]})
