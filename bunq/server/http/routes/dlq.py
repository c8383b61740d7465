"""The dead-letter queue: list, retry one or all, remove one, purge."""

from __future__ import annotations

from typing import Any

from ..router import body_of, call, query_int, route
from ..schemas import COUNT, DLQ_ENTRY, INT, STR, array, obj
from ..transport import Request


@route("GET", "/queues/{queue}/dlq", "Dead-lettered jobs, newest first", "dlq",
       query={"limit": INT},
       reply=obj(("entries", "total"), entries=array(DLQ_ENTRY), total=INT))  # fmt: skip
async def list_dlq(req: Request) -> dict[str, Any]:
    q = req.params["queue"]
    count = query_int(req, "limit", 50, 1, 1000)
    got = await call(req, "Dlq", {"queue": q, "count": count})
    total = await call(req, "GetDlqStats", {"queue": q})
    return {"entries": got["entries"], "total": total["data"]["stats"]["total"]}


@route("GET", "/queues/{queue}/dlq/stats", "How many jobs the DLQ holds", "dlq",
       reply=obj(("total",), total=INT))  # fmt: skip
async def stats(req: Request) -> dict[str, Any]:
    got = await call(req, "GetDlqStats", {"queue": req.params["queue"]})
    return {"total": got["data"]["stats"]["total"]}


@route("POST", "/queues/{queue}/dlq/retry",
       "Back to waiting with fresh attempts: one (jobId) or all", "dlq",
       body=obj(jobId=STR), reply=COUNT)  # fmt: skip
async def retry(req: Request) -> dict[str, Any]:
    job_id = body_of(req).get("jobId")
    return await call(req, "RetryDlq", {"queue": req.params["queue"], "jobId": job_id})


@route("POST", "/queues/{queue}/dlq/purge", "Delete every dead-lettered job", "dlq",
       reply=COUNT)  # fmt: skip
async def purge(req: Request) -> dict[str, Any]:
    return await call(req, "PurgeDlq", {"queue": req.params["queue"]})


@route("DELETE", "/queues/{queue}/dlq/{id}", "Delete one dead-lettered job", "dlq",
       reply=obj(("removed",), removed={"type": "boolean"}))  # fmt: skip
async def remove(req: Request) -> dict[str, Any]:
    got = await call(req, "RemoveDlqJob", {"queue": req.params["queue"], "jobId": req.params["id"]})
    return dict(got["data"])
