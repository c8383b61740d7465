"""Cron and repeat schedules: list, get, add (or replace), delete."""

from __future__ import annotations

from typing import Any

from ..router import body_of, call, route
from ..schemas import ANY, BOOL, CRON, EMPTY, INT, STR, array, obj
from ..transport import Request

NEW_CRON = obj(
    ("name", "queue"),
    name=STR,
    queue=STR,
    schedule=STR,
    repeatEvery=INT,
    jobName=STR,
    data=ANY,
    timezone=STR,
    maxLimit=INT,
    immediately=BOOL,
    priority=INT,
    jobOptions=obj(),
)


@route("GET", "/crons", "Every schedule", "cron", reply=obj(("crons",), crons=array(CRON)))
async def list_crons(req: Request) -> dict[str, Any]:
    return await call(req, "CronList", {})


@route("POST", "/crons", "Add or replace a schedule (cron pattern or repeatEvery ms)", "cron",
       body=NEW_CRON, reply=obj(("cron",), cron=CRON))  # fmt: skip
async def add_cron(req: Request) -> dict[str, Any]:
    return await call(req, "Cron", body_of(req))


@route("GET", "/crons/{name}", "One schedule", "cron", reply=obj(("cron",), cron=CRON))
async def get_cron(req: Request) -> dict[str, Any]:
    return await call(req, "CronGet", {"name": req.params["name"]})


@route("DELETE", "/crons/{name}", "Delete a schedule", "cron", reply=EMPTY)
async def delete_cron(req: Request) -> dict[str, Any]:
    return await call(req, "CronDelete", {"name": req.params["name"]})
