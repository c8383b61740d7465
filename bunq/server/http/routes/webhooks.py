"""Webhooks (issue M): list, add, remove, enable/disable, and the delivery log.

Paths follow bunqueue's HTTP server (``GET``/``POST /webhooks``, ``DELETE
/webhooks/{id}``, ``PUT /webhooks/{id}/enabled``); the delivery log is bunq's
own. Each route calls the TCP command of the same operation (AddWebhook,
ListWebhooks, RemoveWebhook, SetWebhookEnabled, WebhookDeliveries), so the
target guard and the validation are the same on both ports. A listing never
shows a secret; an add shows the secret only when the server generated it.
"""

from __future__ import annotations

from typing import Any

from ....errors import WebhookNotFound
from ...fields import as_bool
from ..router import body_of, call, query_int, route
from ..schemas import BOOL, INT, NULLABLE_INT, NULLABLE_STR, STR, array, obj
from ..transport import Request

EVENTS = array(STR)
WEBHOOK = obj(
    ("id", "url", "events", "enabled"),
    id=STR,
    url=STR,
    events=EVENTS,
    queue=NULLABLE_STR,
    createdAt=INT,
    lastTriggered=NULLABLE_INT,
    successCount=INT,
    failureCount=INT,
    enabled=BOOL,
)
NEW_WEBHOOK = obj(("url", "events"), url=STR, events=EVENTS, queue=NULLABLE_STR, secret=STR)
ADDED = obj(
    ("webhookId", "url", "events", "createdAt"),
    webhookId=STR,
    url=STR,
    events=EVENTS,
    queue=NULLABLE_STR,
    createdAt=INT,
    secret=STR,
)
STATS = obj(("total", "enabled"), total=INT, enabled=INT, pending=INT, dropped=INT)
DELIVERY = obj(
    ("id", "webhook_id", "event", "attempt", "outcome"),
    id=STR,
    webhook_id=STR,
    event=STR,
    queue=STR,
    job_id=NULLABLE_STR,
    attempt=INT,
    outcome={"type": "string", "enum": ["delivered", "retrying", "failed", "refused"]},
    status=NULLABLE_INT,
    error=NULLABLE_STR,
    at=INT,
    duration_ms=INT,
)
DELIVERIES = obj(("deliveries",), deliveries=array(DELIVERY))


@route("GET", "/webhooks", "Every webhook (no secrets) with this server's delivery counts",
       "webhooks", reply=obj(("webhooks", "stats"), webhooks=array(WEBHOOK),
                             stats=STATS))  # fmt: skip
async def list_webhooks(req: Request) -> dict[str, Any]:
    got = await call(req, "ListWebhooks", {})
    return dict(got["data"])


@route("POST", "/webhooks", "Add a webhook: POST these events (of one queue, or all) to url, "
       "signed; the secret is returned when the server made it", "webhooks",
       body=NEW_WEBHOOK, reply=ADDED)  # fmt: skip
async def add_webhook(req: Request) -> dict[str, Any]:
    body = body_of(req)
    msg = {k: body.get(k) for k in ("url", "events", "queue", "secret")}
    got = await call(req, "AddWebhook", msg)
    return dict(got["data"])


@route("DELETE", "/webhooks/{id}", "Remove a webhook", "webhooks",
       reply=obj(("removed",), removed=BOOL))  # fmt: skip
async def remove_webhook(req: Request) -> dict[str, Any]:
    got = await call(req, "RemoveWebhook", {"webhookId": req.params["id"]})
    return dict(got["data"])


@route("PUT", "/webhooks/{id}/enabled", "Turn a webhook's deliveries on or off", "webhooks",
       body=obj(("enabled",), enabled=BOOL),
       reply=obj(("id", "enabled"), id=STR, enabled=BOOL))  # fmt: skip
async def set_enabled(req: Request) -> dict[str, Any]:
    webhook_id = req.params["id"]
    enabled = as_bool(body_of(req).get("enabled"), "enabled", True)
    await call(req, "SetWebhookEnabled", {"id": webhook_id, "enabled": enabled})
    return {"id": webhook_id, "enabled": enabled}


@route("GET", "/webhooks/deliveries", "The latest delivery attempts of every webhook, newest "
       "first (this server's log)", "webhooks", query={"limit": INT},
       reply=DELIVERIES)  # fmt: skip
async def all_deliveries(req: Request) -> dict[str, Any]:
    got = await call(req, "WebhookDeliveries", {"limit": query_int(req, "limit", 100, 0, 10_000)})
    return dict(got["data"])


@route("GET", "/webhooks/{id}/deliveries", "One webhook's latest delivery attempts, newest "
       "first", "webhooks", query={"limit": INT}, reply=DELIVERIES)  # fmt: skip
async def deliveries(req: Request) -> dict[str, Any]:
    webhook_id = req.params["id"]
    ctx = req.server.ctx
    if await ctx.run(ctx.webhooks.get, webhook_id) is None:
        raise WebhookNotFound("Webhook not found", webhook_id=webhook_id)
    limit = query_int(req, "limit", 100, 0, 10_000)
    got = await call(req, "WebhookDeliveries", {"webhookId": webhook_id, "limit": limit})
    return dict(got["data"])
