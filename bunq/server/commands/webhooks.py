"""Webhooks: bunqueue's AddWebhook, RemoveWebhook, ListWebhooks, SetWebhookEnabled (its
field names), and bunq's WebhookDeliveries (the delivery log). See docs/webhooks.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import WebhookNotFound
from ...webhooks import public
from ..context import ServerContext, Session
from ..fields import as_bool, as_str, opt_int
from . import command


@command("AddWebhook")
async def add_webhook(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{url, events, queue?, secret?}`` -> ``{webhookId, url, events, queue, createdAt}``
    (and ``secret`` when the server generated one: every delivery is signed)."""
    given = msg.get("secret")
    hook = await ctx.run(ctx.webhooks.add, msg.get("url"), msg.get("events"), msg.get("queue"),
                         given)  # fmt: skip
    out = {"webhookId": hook.id, "url": hook.url, "events": list(hook.events),
           "queue": hook.queue, "createdAt": hook.created_at}  # fmt: skip
    if given is None:
        out["secret"] = hook.secret
    return {"data": out}


@command("RemoveWebhook")
async def remove_webhook(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{webhookId}`` -> ``{removed: true}``; webhook_not_found if there is none."""
    webhook_id = as_str(msg.get("webhookId"), "webhookId")
    if not await ctx.run(ctx.webhooks.remove, webhook_id):
        raise WebhookNotFound("Webhook not found", webhook_id=webhook_id)
    return {"data": {"removed": True}}


@command("ListWebhooks")
async def list_webhooks(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """-> ``{webhooks: [...], stats: {total, enabled}}``; counts are this server's."""
    hooks = await ctx.run(ctx.webhooks.list)
    return {"data": {
        "webhooks": [public(h, ctx.hooks.stats(h.id)) for h in hooks],
        "stats": {"total": len(hooks), "enabled": sum(h.enabled for h in hooks),
                  "pending": ctx.hooks.pending(), "dropped": ctx.hooks.dropped},
    }}  # fmt: skip


@command("SetWebhookEnabled")
async def set_enabled(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """``{id, enabled}``; webhook_not_found if there is none."""
    webhook_id = as_str(msg.get("id"), "id")
    await ctx.run(ctx.webhooks.enable, webhook_id, as_bool(msg.get("enabled"), "enabled", True))
    return {}


@command("WebhookDeliveries")
async def deliveries(ctx: ServerContext, msg: Mapping[str, Any], s: Session) -> dict[str, Any]:
    """bunq's: ``{webhookId?, limit?}`` -> ``{deliveries: [...]}``, newest first."""
    webhook_id = msg.get("webhookId")
    if webhook_id is not None:
        webhook_id = as_str(webhook_id, "webhookId")
    limit = opt_int(msg, "limit", 100, 0, 10_000)
    return {"data": {"deliveries": [d.to_dict() for d in ctx.hooks.deliveries(webhook_id, limit)]}}
