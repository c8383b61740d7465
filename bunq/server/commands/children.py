"""A flow parent's children on the wire: bunqueue's ``GetChildrenValues``,
``GetFailedChildrenValues``, ``GetIgnoredChildrenFailures``,
``RemoveChildDependency`` and ``RemoveUnprocessedChildren``.

A parent's children are the ids it depends on (``opts.depends_on``, what
``FlowProducer``/``PUSHF`` admit), so each read touches the parent and its
children only. Keys are bunqueue's ``<queue>:<child id>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...backends.base import Backend, Capability, require
from ...errors import JobNotFound, UnsupportedError
from ...job import JobState
from ...queue import failed_children, flow_children
from ...stacks import split
from ..context import ServerContext, Session
from ..fields import as_str
from . import command

UNPROCESSED = (JobState.WAITING, JobState.DELAYED, JobState.PAUSED)


def _values(backend: Backend, parent_id: str) -> dict[str, Any]:
    results = backend.get_children_results(parent_id)
    out = {}
    for child_id, value in results.items():
        child = backend.get_job(child_id)
        out[child_id if child is None else f"{child.queue}:{child_id}"] = value
    return out


def _failures(backend: Backend, parent_id: str, ignored: bool) -> dict[str, str]:
    return {f"{c.queue}:{c.id}": split(c.error)[0] or "unknown error"
            for c in failed_children(backend, parent_id, ignored=ignored)}  # fmt: skip


def _id(msg: Mapping[str, Any]) -> str:
    return as_str(msg.get("id"), "id", 1024)


@command("GetChildrenValues")
async def children_values(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id}`` -> ``{data: {values: {"<queue>:<child>": result}}}`` (completed children)."""
    return {"data": {"values": await ctx.run(_values, ctx.backend, _id(msg))}}


@command("GetFailedChildrenValues")
async def failed_values(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id}`` -> ``{values: {"<queue>:<child>": error}}`` (the message, without the stack):
    dead-lettered children the parent still counts as failed
    (:func:`bunq.queue.failed_children`)."""
    return {"values": await ctx.run(_failures, ctx.backend, _id(msg), False)}


@command("GetIgnoredChildrenFailures")
async def ignored_children(
    ctx: ServerContext, msg: Mapping[str, Any], s: Session
) -> dict[str, Any]:
    """``{id}`` -> ``{values}``: dead-lettered children with ``ignore_dependency_on_failure``."""
    return {"values": await ctx.run(_failures, ctx.backend, _id(msg), True)}


@command("RemoveChildDependency")
async def remove_child_dependency(
    ctx: ServerContext, msg: Mapping[str, Any], s: Session
) -> dict[str, Any]:
    """``{id}`` (the child) -> ``{removed}``: the parent stops waiting for it (and runs
    once nothing else is pending). ``false`` when the parent no longer waits; ``queue``
    (bunq's addition) names the parent's queue when it became waiting."""
    release = getattr(ctx.backend, "remove_child_dependency", None)
    if release is None:
        raise UnsupportedError(ctx.backend.kind, "RemoveChildDependency (flows)")
    removed, queue = await ctx.run(release, _id(msg))
    if queue is not None:
        ctx.waiters.notify((queue,))
    return {"removed": removed, "queue": queue}


def _remove_unprocessed(backend: Backend, parent_id: str) -> int:
    if backend.get_job(parent_id) is None:
        raise JobNotFound(f"Job not found: {parent_id}", job_id=parent_id)
    ops: Any = backend
    return sum(
        1 for child in flow_children(backend, parent_id)
        if child.state in UNPROCESSED and ops.remove_job(child.id)
    )  # fmt: skip


@command("RemoveUnprocessedChildren")
async def remove_unprocessed(
    ctx: ServerContext, msg: Mapping[str, Any], s: Session
) -> dict[str, Any]:
    """``{id}``: remove the parent's children that have not started (waiting or delayed);
    active and finished children stay, as in bunqueue."""
    require(ctx.backend, Capability.JOB_OPS)
    await ctx.run(_remove_unprocessed, ctx.backend, _id(msg))
    return {}
