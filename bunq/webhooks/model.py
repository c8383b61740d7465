"""A webhook (what it is stored as) and the event names it may subscribe to."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ValidationError
from ..validate import queue_name

# bunqueue's webhook events (domain/types/webhook.ts WEBHOOK_EVENTS), then bunq's own.
WEBHOOK_EVENTS = ("job.pushed", "job.started", "job.completed", "job.failed", "job.progress",
                  "job.retried", "job.delayed", "job.removed", "job.dead")  # fmt: skip
# What each job-event name (the server's bunqueue EventType, or a QueueEvents name)
# is delivered as. A name missing here is not delivered to webhooks.
WEBHOOK_EVENT_OF = {
    "pushed": "job.pushed", "added": "job.pushed", "waiting": "job.pushed",
    "pulled": "job.started", "active": "job.started",
    "completed": "job.completed", "failed": "job.failed", "progress": "job.progress",
    "retried": "job.retried", "delayed": "job.delayed", "removed": "job.removed",
    "dead": "job.dead", **{e: e for e in WEBHOOK_EVENTS},
}  # fmt: skip
MAX_SECRET = 256
MAX_EVENTS = len(WEBHOOK_EVENTS)


@dataclass(frozen=True, slots=True)
class Webhook:
    """A stored webhook: POST ``events`` of ``queue`` (None: every queue) to ``url``.

    ``created_at`` is epoch ms. ``secret`` signs every delivery (:mod:`.signing`).
    """

    id: str
    url: str
    events: tuple[str, ...]
    queue: str | None
    secret: str
    created_at: int
    enabled: bool = True

    def matches(self, event: str, queue: str) -> bool:
        return self.enabled and event in self.events and self.queue in (None, queue)

    def to_json(self) -> bytes:
        return json.dumps({**asdict(self), "events": list(self.events)}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Webhook:
        d = json.loads(raw)
        return cls(d["id"], d["url"], tuple(d["events"]), d.get("queue"), d["secret"],
                   int(d["created_at"]), bool(d.get("enabled", True)))  # fmt: skip


def check_events(events: object) -> tuple[str, ...]:
    """Return ``events`` as webhook event names (job-event names are mapped)."""
    if isinstance(events, str) or not isinstance(events, Iterable):
        raise ValidationError("events must be a list of event names", field="events")
    out: list[str] = []
    for e in events:
        name = WEBHOOK_EVENT_OF.get(e) if isinstance(e, str) else None
        if name is None:
            valid = ", ".join(WEBHOOK_EVENTS)
            raise ValidationError(f"invalid webhook event {e!r}; valid: {valid}", field="events")
        if name not in out:
            out.append(name)
    if not out:
        raise ValidationError("events must name at least one event", field="events")
    return tuple(out)


def check_queue(queue: object) -> str | None:
    return None if queue is None else queue_name(queue)


def check_secret(secret: object) -> str | None:
    if secret is None:
        return None
    if not isinstance(secret, str) or not secret or len(secret) > MAX_SECRET:
        raise ValidationError(f"secret must be a string of 1..{MAX_SECRET} characters",
                              field="secret")  # fmt: skip
    return secret


def public(hook: Webhook, stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """bunqueue's ListWebhooks shape (no secret), with this process's delivery counts."""
    s = stats or {}
    return {"id": hook.id, "url": hook.url, "events": list(hook.events), "queue": hook.queue,
            "createdAt": hook.created_at, "lastTriggered": s.get("last_triggered"),
            "successCount": s.get("succeeded", 0), "failureCount": s.get("failed", 0),
            "enabled": hook.enabled}  # fmt: skip
