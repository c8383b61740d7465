"""Webhooks kept in the backend's shared records (``kv_*``, namespace ``"webhooks"``).

Stored there, they survive restarts and every process sharing the backend
(SQL, Redis, one ``bunq serve``) sees the same set. A :class:`Dispatcher`
re-reads them every ``refresh_s``; changes made through the same
:class:`Webhooks` object reach its dispatcher at once.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..backends.base import Backend
from ..errors import WebhookNotFound
from .guard import TargetGuard
from .model import Webhook, check_events, check_queue, check_secret

NS = "webhooks"


class Webhooks:
    """Add, remove, list and enable webhooks of one backend.

    :param guard: checks each URL as it is added (default: :class:`TargetGuard`
        with no allow-list: loopback and link-local refused).
    """

    def __init__(self, backend: Backend, guard: TargetGuard | None = None) -> None:
        self.backend = backend
        self.guard = guard or TargetGuard()
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` after each change made through this object."""
        self._listeners.append(fn)

    def _changed(self) -> None:
        for fn in self._listeners:
            fn()

    def add(self, url: str, events: Any, queue: str | None = None,
            secret: str | None = None) -> Webhook:  # fmt: skip
        """Store a webhook; return it (with a generated ``secret`` when none was given).

        Raises ValidationError (bad url, events, secret), WebhookTargetRefused (the
        guard refused the url), ConfigError (bad queue name).
        """
        self.guard.check_url(url)
        hook = Webhook(
            id=uuid.uuid4().hex, url=url, events=check_events(events), queue=check_queue(queue),
            secret=check_secret(secret) or secrets.token_hex(32),
            created_at=int(time.time() * 1000),
        )  # fmt: skip
        self.backend.kv_put(NS, hook.id, hook.to_json(), create=True)
        self._changed()
        return hook

    def get(self, webhook_id: str) -> Webhook | None:
        raw = self.backend.kv_get(NS, webhook_id) if isinstance(webhook_id, str) else None
        return None if raw is None else Webhook.from_json(raw)

    def remove(self, webhook_id: str) -> bool:
        """Delete a webhook; return whether it existed."""
        if not isinstance(webhook_id, str) or not webhook_id:
            return False
        gone = self.backend.kv_delete(NS, webhook_id)
        if gone:
            self._changed()
        return gone

    def list(self) -> list[Webhook]:
        """Every webhook, oldest first."""
        hooks = [Webhook.from_json(raw) for raw in self.backend.kv_list(NS).values()]
        return sorted(hooks, key=lambda h: (h.created_at, h.id))

    def enable(self, webhook_id: str, enabled: bool = True) -> Webhook:
        """Turn deliveries of a webhook on or off; WebhookNotFound if there is none."""
        for _ in range(10):  # compare-and-set: a concurrent change makes us read again
            raw = self.backend.kv_get(NS, webhook_id) if isinstance(webhook_id, str) else None
            if raw is None:
                raise WebhookNotFound(f"Webhook not found: {webhook_id}", webhook_id=webhook_id)
            hook = replace(Webhook.from_json(raw), enabled=bool(enabled))
            if self.backend.kv_put(NS, webhook_id, hook.to_json(), expected=raw):
                self._changed()
                return hook
        raise WebhookNotFound(f"Webhook {webhook_id} kept changing", webhook_id=webhook_id)
