"""Workers registered with this server (RegisterWorker / Heartbeat over TCP)."""

from __future__ import annotations

from typing import Any

from ..router import call, route
from ..schemas import STR, array, obj
from ..transport import Request

WORKER = obj(("id",), id=STR, name=STR, hostname=STR, queues=array(STR))


@route("GET", "/workers", "Registered workers with their last heartbeat", "workers",
       reply=obj(("workers",), workers=array(WORKER)))  # fmt: skip
async def list_workers(req: Request) -> dict[str, Any]:
    got = await call(req, "ListWorkers", {})
    return {"workers": got["data"]["workers"]}
