"""Jobs: add, get, list by state (cursor pages), search, progress, logs, per-job operations.

A page of a listing ends with ``next``, an opaque cursor for the page after it
(null on the last page): the backend's keyset cursor (``Backend.get_jobs_page``,
:mod:`bunq.pages`), so a deep page costs what the first does and jobs added
or removed between pages shift nothing.
"""

from __future__ import annotations

from typing import Any

from ....backends.base import Backend, Capability, require
from ....errors import JobNotFound, UnsupportedError
from ....job import JobState
from ....wire_shapes import job_to_wire
from ...fields import as_int
from ...wire import state_of
from ..router import body_of, call, query_int, route
from ..schemas import ANY, EMPTY, INT, JOB, NEW_JOB, NULLABLE_STR, NUM, STATE, STR, array, obj
from ..transport import Request

MAX_PAGE = 500


@route("POST", "/queues/{queue}/jobs", "Add a job; a live custom id (jobId) returns its job",
       "jobs", body=NEW_JOB, reply=obj(("id",), id=STR))  # fmt: skip
async def add(req: Request) -> dict[str, Any]:
    return await call(req, "PUSH", {**body_of(req), "queue": req.params["queue"]})


@route("POST", "/queues/{queue}/jobs/bulk", "Add jobs atomically (custom ids: customId)",
       "jobs", body=obj(("jobs",), jobs=array(NEW_JOB)),
       reply=obj(("ids",), ids=array(STR)))  # fmt: skip
async def add_bulk(req: Request) -> dict[str, Any]:
    jobs = body_of(req).get("jobs")
    return await call(req, "PUSHB", {"jobs": jobs, "queue": req.params["queue"]})


def _page(backend: Backend, queue: str, state: JobState, limit: int, cursor: str | None) -> Any:
    page = backend.get_jobs_page(queue, state, limit, cursor)
    paused = state is JobState.WAITING and backend.is_paused(queue)
    shown = JobState.PAUSED.value if paused else state.value
    return {"jobs": [job_to_wire(j, shown, with_result=True) for j in page.jobs],
            "next": page.next}  # fmt: skip


@route("GET", "/queues/{queue}/jobs/list", "Jobs of one state, a page at a time", "jobs",
       query={"state": STATE, "limit": INT, "cursor": STR},
       reply=obj(("jobs", "next"), jobs=array(JOB), next=NULLABLE_STR))  # fmt: skip
async def list_jobs(req: Request) -> dict[str, Any]:
    state = state_of(req.query.get("state") or "waiting")
    limit = query_int(req, "limit", 50, 1, MAX_PAGE)
    cursor = req.query.get("cursor") or None
    ctx = req.server.ctx
    page: dict[str, Any] = await ctx.run(_page, ctx.backend, req.params["queue"], state, limit,
                                         cursor)  # fmt: skip
    return page


@route("GET", "/jobs/search", "Find a job by id or custom id (a custom id is the job's id)",
       "jobs", query={"q": STR}, reply=obj(("jobs",), jobs=array(JOB)))  # fmt: skip
async def search(req: Request) -> dict[str, Any]:
    q = req.query.get("q", "").strip()
    if not q:
        return {"jobs": []}
    try:
        return {"jobs": [(await call(req, "GetJob", {"id": q}))["job"]]}
    except JobNotFound:
        return {"jobs": []}


@route("GET", "/jobs/custom/{id}", "A job by its custom id (the id it was added with)",
       "jobs", reply=obj(("job",), job=JOB))  # fmt: skip
async def get_by_custom_id(req: Request) -> dict[str, Any]:
    return await call(req, "GetJob", {"id": req.params["id"]})


@route("GET", "/jobs/{id}", "A job with its state, result, error and attempt history", "jobs",
       reply=obj(("job",), job=JOB))  # fmt: skip
async def get_job(req: Request) -> dict[str, Any]:
    return await call(req, "GetJob", {"id": req.params["id"]})


@route("GET", "/jobs/{id}/state", "A job's state (unknown when missing)", "jobs",
       reply=obj(("id", "state"), id=STR, state=STR))  # fmt: skip
async def get_state(req: Request) -> dict[str, Any]:
    return await call(req, "GetState", {"id": req.params["id"]})


@route("GET", "/jobs/{id}/result", "A completed job's return value", "jobs",
       reply=obj(("id",), id=STR, result=ANY))  # fmt: skip
async def get_result(req: Request) -> dict[str, Any]:
    return await call(req, "GetResult", {"id": req.params["id"]})


@route("GET", "/jobs/{id}/progress", "A job's progress (0-100)", "jobs",
       reply=obj(("progress",), progress=NUM))  # fmt: skip
async def get_progress(req: Request) -> dict[str, Any]:
    return await call(req, "GetProgress", {"id": req.params["id"]})


@route("POST", "/jobs/{id}/progress", "Set a job's progress", "jobs",
       body=obj(("progress",), progress=INT, message=STR), reply=EMPTY)  # fmt: skip
async def set_progress(req: Request) -> dict[str, Any]:
    return await call(req, "Progress", {**body_of(req), "id": req.params["id"]})


LOGS = obj(("logs", "count"), logs=array(obj(message=STR, level=STR)), count=INT)


@route("GET", "/jobs/{id}/logs", "A job's log lines", "jobs", reply=LOGS)
async def get_logs(req: Request) -> dict[str, Any]:
    got = await call(req, "GetLogs", {"id": req.params["id"]})
    return dict(got["data"])


@route("POST", "/jobs/{id}/logs", "Append a log line", "jobs",
       body=obj(("message",), message=STR), reply=EMPTY)  # fmt: skip
async def add_log(req: Request) -> dict[str, Any]:
    await call(req, "AddLog", {"message": body_of(req).get("message"), "id": req.params["id"]})
    return {}


def _children(backend: Backend, parent: str) -> list[dict[str, Any]]:
    out = []
    for child_id, result in list(backend.get_children_results(parent).items())[:1000]:
        child = backend.get_job(child_id)
        state = None if child is None else child.state.value
        out.append({"id": child_id, "state": state, "result": result})
    return out


@route("GET", "/jobs/{id}/children", "A parent's children: id, state, result", "jobs",
       reply=obj(("children",), children=array(obj(("id",), id=STR, state=NULLABLE_STR,
                                                  result=ANY))))  # fmt: skip
async def children(req: Request) -> dict[str, Any]:
    ctx = req.server.ctx
    return {"children": await ctx.run(_children, ctx.backend, req.params["id"])}


# -- per-job operations (bunq.backends.jobops, docs/jobs.md) --
def _operation(method: str, path: str, backend_method: str, summary: str, arg: str | None = None,
               feature: Capability | None = Capability.JOB_OPS) -> None:  # fmt: skip
    async def handler(req: Request) -> dict[str, Any]:
        ctx = req.server.ctx
        fn = getattr(ctx.backend, backend_method, None)
        if feature is not None:
            require(ctx.backend, feature)
        if fn is None:  # an operation no backend offers yet
            raise UnsupportedError(ctx.backend.kind, backend_method)
        args: list[Any] = [req.params["id"]]
        if arg is not None:
            args.append(as_int(body_of(req).get(arg), arg, -(2**31), 2**53))
        out = await ctx.run(fn, *args)
        ctx.waiters.notify_all()
        return {"result": out if isinstance(out, (bool, int, str)) or out is None else str(out)}

    body = obj((arg,), **{arg: INT}) if arg else None
    route(method, path, summary, "jobs", body=body, reply=obj(result=ANY))(handler)


_operation("DELETE", "/jobs/{id}", "remove_job", "Remove a job (not while active)")
_operation("POST", "/jobs/{id}/retry", "retry_job", "Retry a failed or completed job")
_operation("POST", "/jobs/{id}/promote", "promote_job", "Run a delayed job now")
_operation("POST", "/jobs/{id}/cancel", "cancel_job", "Cancel a job (a running one settles)",
           feature=None)  # fmt: skip
_operation("POST", "/jobs/{id}/discard", "discard_job", "Dead-letter a job now, no more retries")
_operation("PUT", "/jobs/{id}/priority", "change_priority", "Change a job's priority",
           "priority")  # fmt: skip
_operation("PUT", "/jobs/{id}/delay", "change_delay", "Delay a waiting or delayed job (ms)",
           "delay")  # fmt: skip
