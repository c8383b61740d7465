"""PUSH, PUSHB and PUSHF: admission through the server's group commit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...backends.base import Capability, require
from ...errors import UnsupportedError
from ...job import Job
from ...protocol import Prepared
from ...repeat import add_repeatable
from ...wire_shapes import job_to_wire
from ..context import ServerContext, Session
from ..fields import as_str
from ..flows import flow_jobs
from ..wire import name_and_data, push_batch, push_job, push_options, queue_of
from . import command


@command("PUSH")
async def push(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, name, data, ...options}`` -> ``{id}`` (a live custom id returns its job).

    With ``repeat`` the job is repeatable (:mod:`bunq.repeat`, on the cron machinery):
    ``id`` is its first run's."""
    if msg.get("repeat") is not None:
        return Prepared(id=(await _push_repeatable(ctx, msg)).id)
    stored = await ctx.add([push_job(queue_of(msg), msg)])
    return Prepared(id=stored[0].id)  # a string: nothing for the int64 rule


async def _push_repeatable(ctx: ServerContext, msg: Mapping[str, Any]) -> Job:
    require(ctx.backend, Capability.CRON)
    queue = queue_of(msg)
    fields = {k: v for k, v in msg.items() if k != "repeat"}
    name, data = name_and_data(fields)
    opts = push_options(fields, "jobId")
    job: Job = await ctx.run(add_repeatable, ctx.backend, queue, name, data, opts, msg["repeat"])
    ctx.events.added([job], 0, ctx.backend.clock())
    ctx.metrics.pushed.inc()
    ctx.waiters.notify((queue,))
    return job


@command("PUSHB")
async def push_b(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, jobs: [...]}`` -> ``{ids}``; atomic: every job or none."""
    stored = await ctx.add(push_batch(msg))
    return Prepared(ids=[j.id for j in stored])  # strings only: nothing for the int64 rule


@command("UpdateParent")
async def update_parent(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{childId, parentId}``: name a flow child's parent after admission (bunqueue's
    Python FlowProducer pushes children first); unknown jobs answer 'Job not found'."""
    child, parent = as_str(msg.get("childId"), "childId"), as_str(msg.get("parentId"), "parentId")
    relink = getattr(ctx.backend, "set_parent", None)
    if relink is None:
        raise UnsupportedError(ctx.backend.kind, "UpdateParent (flows)")
    await ctx.run(relink, child, parent)
    return {}


@command("PUSHF")
async def push_f(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{jobs: [{id, queue, input}]}`` -> ``{data: {jobs}}``: one atomic job graph
    (bunqueue's FlowProducer); the snapshots come back in the order sent."""
    stored = {j.id: j for j in await ctx.add(flow_jobs(msg))}
    sent = [str(node["id"]) for node in msg["jobs"]]
    return Prepared(data={"jobs": [job_to_wire(stored[i], stored[i].state.value) for i in sent]})
