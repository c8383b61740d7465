"""bunqueue's FIFO group commands, answered from bunq's group model.

bunq's groups (``opts.group``) share one set of limits per queue:
``QueueLimits.group_concurrency`` and ``group_rate_max`` per
``group_rate_duration`` apply to every group of the queue alike (set with
``Queue.set_limits`` or ``BqLimits``; :mod:`bunq.engine.lanes`,
:mod:`bunq.backends.sql.groups`). So:

- ``GetGroupConcurrency`` / ``GetGroupRateLimit`` answer the limit that applies to
  the group (the queue's per-group limit, ``null`` without one);
- ``IsGroupPaused`` answers ``false``: bunq never pauses a single group;
- the commands that would give one group its own setting (``Set/RemoveGroupConcurrency``,
  ``Set/RemoveGroupRateLimit``, ``RateLimitGroup``, ``PauseGroup``, ``ResumeGroup``) and the
  per-group counts and timers bunq does not keep (``GetGroupJobsCount``,
  ``GetGroupActiveCount``, ``GetGroupsJobsCount``, ``GetGroupRateLimitTtl``) are refused
  with ``unsupported`` and a message saying why (docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import UnsupportedError
from ..context import ServerContext, Session
from ..fields import as_str
from ..wire import queue_of
from . import command

PER_QUEUE = (
    "bunq applies one group limit to every group of a queue (QueueLimits.group_concurrency, "
    "group_rate_max / group_rate_duration: Queue.set_limits); groups have no settings of their own"
)
NOT_COUNTED = "bunq does not keep per-group job counts or rate timers"
NO_GROUP_PAUSE = "bunq pauses whole queues (Pause), not single groups"


def _group(msg: Mapping[str, Any]) -> str:
    return as_str(msg.get("groupId"), "groupId", 256)


def _refuse(cmd: str, why: str) -> UnsupportedError:
    return UnsupportedError("bunq serve", cmd, f"{cmd} is not supported: {why}")


@command("GetGroupConcurrency")
async def get_group_concurrency(
    ctx: ServerContext, msg: Mapping[str, Any], s: Session
) -> dict[str, Any]:
    """``{queue, groupId}`` -> ``{data: {concurrency}}`` (null: no limit)."""
    queue, _ = queue_of(msg), _group(msg)
    limits = await ctx.run(ctx.backend.get_limits, queue)
    return {"data": {"concurrency": limits.group_concurrency}}


@command("GetGroupRateLimit")
async def get_group_rate_limit(
    ctx: ServerContext, msg: Mapping[str, Any], s: Session
) -> dict[str, Any]:
    """``{queue, groupId}`` -> ``{data: {limit: {max, duration} | null}}``."""
    queue, _ = queue_of(msg), _group(msg)
    limits = await ctx.run(ctx.backend.get_limits, queue)
    limit = None
    if limits.group_rate_max is not None:
        limit = {"max": limits.group_rate_max, "duration": limits.group_rate_duration}
    return {"data": {"limit": limit}}


@command("IsGroupPaused")
async def is_group_paused(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, groupId}`` -> ``{data: {paused: false}}`` (groups are never paused alone)."""
    queue_of(msg), _group(msg)
    return {"data": {"paused": False}}


REFUSED = {
    "SetGroupConcurrency": PER_QUEUE,
    "RemoveGroupConcurrency": PER_QUEUE,
    "SetGroupRateLimit": PER_QUEUE,
    "RemoveGroupRateLimit": PER_QUEUE,
    "RateLimitGroup": PER_QUEUE,
    "PauseGroup": NO_GROUP_PAUSE,
    "ResumeGroup": NO_GROUP_PAUSE,
    "GetGroupJobsCount": NOT_COUNTED,
    "GetGroupActiveCount": NOT_COUNTED,
    "GetGroupRateLimitTtl": NOT_COUNTED,
    "GetGroupsJobsCount": NOT_COUNTED,
}


@command(*REFUSED)
async def refused(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """A deliberate refusal (``unsupported``) naming the reason (see the module docstring)."""
    cmd = str(msg.get("cmd"))
    raise _refuse(cmd, REFUSED[cmd])
