"""PUSH and PUSHB: admission through the server's group commit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...protocol import Prepared
from ..context import ServerContext, Session
from ..wire import push_batch, push_job, queue_of
from . import command


@command("PUSH")
async def push(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, name, data, ...options}`` -> ``{id}`` (a live custom id returns its job)."""
    stored = await ctx.add([push_job(queue_of(msg), msg)])
    return {"id": stored[0].id}


@command("PUSHB")
async def push_b(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{queue, jobs: [...]}`` -> ``{ids}``; atomic: every job or none."""
    stored = await ctx.add(push_batch(msg))
    return Prepared(ids=[j.id for j in stored])  # strings only: nothing for the int64 rule
