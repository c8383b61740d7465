"""bunqueue's webhook commands on ``bunq serve``, and deliveries of the server's job events."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from server.raw import Raw
from server.remote_factory import QUIET
from webhooks.receiver import receiver

from bunq.server.app import BackgroundServer
from bunq.server.context import ServerConfig
from bunq.webhooks import verify


@pytest.fixture
def hooked(served: Any) -> Iterator[BackgroundServer]:
    """A server whose webhooks may reach loopback (``--webhook-allow 127.0.0.1/32``)."""
    cfg = ServerConfig(port=0, http_port=None, webhook_allow=("127.0.0.1/32",), **QUIET)
    with BackgroundServer(served, cfg) as srv:
        yield srv


def test_signed_deliveries_of_a_jobs_lifecycle(hooked: Any) -> None:
    c = Raw(hooked.port)
    with receiver() as r:
        got = c.call({"cmd": "AddWebhook", "url": r.url, "queue": "mail", "secret": "k",
                      "events": ["job.pushed", "job.started", "job.completed"]})  # fmt: skip
        assert got["ok"] and set(got["data"]) == {"webhookId", "url", "events", "queue",
                                                  "createdAt"}  # fmt: skip
        jid = c.call({"cmd": "PUSH", "queue": "mail", "data": {"to": "a@b"}})["id"]
        c.call({"cmd": "PUSH", "queue": "other", "data": {}})  # not this webhook's queue
        pulled = c.call({"cmd": "PULL", "queue": "mail", "owner": "w"})
        assert c.call({"cmd": "ACK", "id": jid, "token": pulled["token"], "result": 7})["ok"]
        reqs = r.wait_for(3)
        time.sleep(0.1)
        assert len(r.requests) == 3
    docs = [json.loads(x.body) for x in reqs]
    assert sorted(d["event"] for d in docs) == ["job.completed", "job.pushed", "job.started"]
    assert all(d["jobId"] == jid and d["queue"] == "mail" for d in docs)
    assert next(d for d in docs if d["event"] == "job.completed")["data"] == 7
    for x in reqs:
        verify("k", x.headers, x.body)
    log = c.call({"cmd": "WebhookDeliveries", "webhookId": got["data"]["webhookId"]})["data"]
    assert [d["outcome"] for d in log["deliveries"]] == ["delivered"] * 3
    text = c.call({"cmd": "Prometheus"})["data"]["metrics"]
    assert 'bunq_webhook_deliveries_total{outcome="delivered"} 3.0' in text
    assert "bunq_webhook_pending 0.0" in text


def test_a_failed_delivery_is_retried(hooked: Any) -> None:
    hooked.server.ctx.hooks.backoff_ms = 20
    c = Raw(hooked.port)
    with receiver([500]) as r:
        hid = c.call({"cmd": "AddWebhook", "url": r.url, "events": ["job.failed"]})["data"]
        jid = c.call({"cmd": "PUSH", "queue": "q", "data": {}, "maxAttempts": 1})["id"]
        tok = c.call({"cmd": "PULL", "queue": "q", "owner": "w"})["token"]
        assert c.call({"cmd": "FAIL", "id": jid, "token": tok, "error": "boom"})["ok"]
        first, second = r.wait_for(2)
    assert first.headers["X-Webhook-Id"] == second.headers["X-Webhook-Id"]
    doc = json.loads(second.body)
    assert (doc["event"], doc["jobId"], doc["error"]) == ("job.failed", jid, "boom")
    verify(hid["secret"], second.headers, second.body)  # the server generated the secret


def test_list_disable_and_remove(hooked: Any) -> None:
    c = Raw(hooked.port)
    with receiver() as r:
        hid = c.call({"cmd": "AddWebhook", "url": r.url, "events": ["job.pushed"]})["data"]
        wid = hid["webhookId"]
        assert c.call({"cmd": "SetWebhookEnabled", "id": wid, "enabled": False})["ok"]
        listed = c.call({"cmd": "ListWebhooks"})["data"]
        [w] = listed["webhooks"]
        assert (w["id"], w["enabled"], w["events"], w["queue"]) == (wid, False, ["job.pushed"],
                                                                    None)  # fmt: skip
        assert "secret" not in w and listed["stats"]["total"] == 1
        assert listed["stats"]["enabled"] == 0
        c.call({"cmd": "PUSH", "queue": "q", "data": {}})
        time.sleep(0.2)
        assert r.requests == []  # disabled: nothing sent
        assert c.call({"cmd": "RemoveWebhook", "webhookId": wid})["data"] == {"removed": True}
        gone = c.call({"cmd": "RemoveWebhook", "webhookId": wid})
        assert not gone["ok"] and gone["code"] == "webhook_not_found"
        missing = c.call({"cmd": "SetWebhookEnabled", "id": wid, "enabled": True})
        assert missing["code"] == "webhook_not_found"


def test_the_default_guard_refuses_loopback_and_metadata(server: Any) -> None:
    c = Raw(server.port)
    for url in ("http://127.0.0.1:9/", "http://169.254.169.254/latest"):
        got = c.call({"cmd": "AddWebhook", "url": url, "events": ["job.completed"]})
        assert not got["ok"] and got["code"] == "webhook_target_refused", got
    bad = c.call({"cmd": "AddWebhook", "url": "https://example.com", "events": ["job.nope"]})
    assert bad["code"] == "validation"
    assert c.call({"cmd": "ListWebhooks"})["data"]["webhooks"] == []


def test_webhooks_survive_a_server_restart(tmp_path: Any) -> None:
    from bunq.backends.sql.sqlite import SQLiteBackend

    path = str(tmp_path / "hooks.db")
    cfg = ServerConfig(port=0, http_port=None, webhook_allow=("127.0.0.1/32",), **QUIET)
    with receiver() as r:
        with BackgroundServer(SQLiteBackend(path), cfg) as first:
            c = Raw(first.port)
            wid = c.call({"cmd": "AddWebhook", "url": r.url, "events": ["job.pushed"],
                          "secret": "k"})["data"]["webhookId"]  # fmt: skip
        with BackgroundServer(SQLiteBackend(path), cfg) as second:
            c = Raw(second.port)
            [w] = c.call({"cmd": "ListWebhooks"})["data"]["webhooks"]
            assert w["id"] == wid
            jid = c.call({"cmd": "PUSH", "queue": "q", "data": {}})["id"]
            [req] = r.wait_for(1)
    assert json.loads(req.body)["jobId"] == jid
    verify("k", req.headers, req.body)
