"""Webhooks: job events POSTed as signed JSON to URLs, per queue and event.

::

    from bunq.webhooks import Dispatcher, Webhooks, verify

    hooks = Webhooks(backend)                       # stored in the backend's kv records
    hook = hooks.add("https://example.com/hook", ["job.completed", "job.failed"],
                     queue="emails")                # hook.secret signs every delivery
    with Dispatcher(hooks) as d:                    # the sender thread
        d.dispatch("completed", "emails", {"jobId": "42", "data": {"sent": True}})

    # the receiver
    verify(secret, request.headers, request.body, tolerance_s=300)

``bunq serve`` runs a dispatcher fed by its event hub (bunqueue's AddWebhook,
RemoveWebhook, ListWebhooks, SetWebhookEnabled commands). Without a server, one
:class:`WebhookRunner` per deployment feeds one from the backend's job events
(``bunq webhooks run``). See docs/webhooks.md.
"""

from __future__ import annotations

from .delivery import DeliveryRecord, Dispatcher
from .guard import REFUSED, TargetGuard
from .model import WEBHOOK_EVENT_OF, WEBHOOK_EVENTS, Webhook, public
from .runner import WebhookRunner
from .signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, signature, verify
from .store import Webhooks

__all__ = ["REFUSED", "SIGNATURE_HEADER", "TIMESTAMP_HEADER", "WEBHOOK_EVENTS",
           "WEBHOOK_EVENT_OF", "DeliveryRecord", "Dispatcher", "TargetGuard", "Webhook",
           "WebhookRunner", "Webhooks", "public", "sign", "signature", "verify"]  # fmt: skip
