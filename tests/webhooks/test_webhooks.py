"""Webhooks in the library: stored in the backend's kv records, delivered signed, retried,
guarded. Deliveries go to a real HTTP receiver on loopback (allowed explicitly)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from webhooks.receiver import receiver, until

from bunq.errors import (
    ConfigError,
    ValidationError,
    WebhookNotFound,
    WebhookSignatureError,
    WebhookTargetRefused,
)
from bunq.webhooks import Dispatcher, TargetGuard, Webhooks, sign, verify

LOOPBACK = TargetGuard(allow=["127.0.0.1/32"])
LOCAL = ["memory", "sqlite"]


@pytest.mark.parametrize("kind", LOCAL)
def test_a_delivery_is_signed_json_the_receiver_can_verify(make_backend: Any, kind: str) -> None:
    hooks = Webhooks(make_backend(kind), guard=LOOPBACK)
    with receiver() as r:
        hook = hooks.add(r.url, ["job.completed"], queue="emails")
        with Dispatcher(hooks, backoff_ms=20) as d:
            assert d.dispatch("completed", "emails", {"jobId": "42", "data": {"sent": 1}}) == 1
            assert d.dispatch("completed", "other", {"jobId": "43"}) == 0  # another queue
            assert d.dispatch("failed", "emails", {"jobId": "44"}) == 0  # another event
            [req] = r.wait_for(1)
            until(lambda: d.deliveries())
    assert verify(hook.secret, req.headers, req.body) > 0
    doc = json.loads(req.body)
    assert doc["event"] == "job.completed" and doc["queue"] == "emails"
    assert doc["jobId"] == "42" and doc["data"] == {"sent": 1}
    assert req.headers["Content-Type"] == "application/json"
    assert req.headers["X-Webhook-Event"] == "job.completed"
    [rec] = d.deliveries()
    assert (rec.outcome, rec.status, rec.attempt, rec.job_id) == ("delivered", 200, 1, "42")
    assert d.stats(hook.id)["succeeded"] == 1


def test_a_500_is_retried_with_backoff_under_the_same_delivery_id(make_backend: Any) -> None:
    hooks = Webhooks(make_backend("memory"), guard=LOOPBACK)
    with receiver([500, 503]) as r:
        hook = hooks.add(r.url, ["job.failed"])
        with Dispatcher(hooks, backoff_ms=50) as d:
            d.dispatch("failed", "q", {"jobId": "7", "error": "boom", "terminal": False})
            reqs = r.wait_for(3)
            until(lambda: len(d.deliveries()) == 3)
    assert [x.headers["X-Webhook-Attempt"] for x in reqs] == ["1", "2", "3"]
    assert len({x.headers["X-Webhook-Id"] for x in reqs}) == 1
    for x in reqs:  # each attempt is signed anew
        verify(hook.secret, x.headers, x.body)
    log = d.deliveries(hook.id)  # newest first
    assert [(x.outcome, x.status) for x in log] == [
        ("delivered", 200), ("retrying", 503), ("retrying", 500)]  # fmt: skip
    gap = int(reqs[2].headers["X-Webhook-Timestamp"]) - int(reqs[1].headers["X-Webhook-Timestamp"])
    assert gap >= 80  # the second retry waits about twice the first (100 ms ± 10%)


def test_a_4xx_is_not_retried_and_attempts_are_bounded(make_backend: Any) -> None:
    hooks = Webhooks(make_backend("memory"), guard=LOOPBACK)
    with receiver([404, 500, 500]) as r:
        hooks.add(r.url, ["job.pushed"])
        with Dispatcher(hooks, backoff_ms=10, attempts=2) as d:
            d.dispatch("pushed", "q", {"jobId": "a"})  # 404: failed at once
            until(lambda: d.failed == 1)
            d.dispatch("pushed", "q", {"jobId": "b"})  # 500, 500: two attempts, failed
            until(lambda: d.failed == 2)
            assert len(r.requests) == 3
    assert [x.outcome for x in d.deliveries()] == ["failed", "retrying", "failed"]


def test_a_terminal_failure_is_also_job_dead(make_backend: Any) -> None:
    hooks = Webhooks(make_backend("memory"), guard=LOOPBACK)
    with receiver() as r:
        hooks.add(r.url, ["job.dead"])
        with Dispatcher(hooks) as d:
            assert d.dispatch("failed", "q", {"jobId": "x", "terminal": False}) == 0
            assert d.dispatch("failed", "q", {"jobId": "y", "terminal": True}) == 1
            [req] = r.wait_for(1)
    assert json.loads(req.body)["event"] == "job.dead"


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://127.0.0.1:9/",
    "http://localhost:9/", "http://[::ffff:127.0.0.1]/", "http://metadata.google.internal/",
    "http://[fe80::1]/", "http://0.0.0.0/",
])  # fmt: skip
def test_the_guard_refuses_metadata_link_local_and_loopback(make_backend: Any, url: str) -> None:
    hooks = Webhooks(make_backend("memory"))
    with pytest.raises(WebhookTargetRefused) as err:
        hooks.add(url, ["job.completed"])
    assert err.value.code == "webhook_target_refused"
    assert hooks.list() == []


def test_the_allow_list_lets_a_network_through_and_private_ranges_pass(make_backend: Any) -> None:
    hooks = Webhooks(make_backend("memory"), guard=TargetGuard(allow=["127.0.0.0/8"]))
    hooks.add("http://127.0.0.1:9/", ["job.completed"])
    hooks.add("http://10.0.0.5/hook", ["job.completed"])  # a receiver inside the cluster
    with pytest.raises(WebhookTargetRefused):  # the allow-list holds 127/8 only
        hooks.add("http://169.254.169.254/", ["job.completed"])


def test_delivery_rechecks_the_resolved_address(make_backend: Any) -> None:
    """A webhook stored by a process that allowed loopback is refused by one that does not."""
    backend = make_backend("memory")
    with receiver() as r:
        Webhooks(backend, guard=LOOPBACK).add(r.url, ["job.completed"])
        with Dispatcher(Webhooks(backend)) as d:  # the default guard
            assert d.dispatch("completed", "q", {"jobId": "1"}) == 1
            until(lambda: d.deliveries())
        assert r.requests == []
    [rec] = d.deliveries()
    assert rec.outcome == "refused" and "loopback" in (rec.error or "")


@pytest.mark.parametrize("bad, code", [
    ({"url": "ftp://example.com/"}, "validation"), ({"url": "http://"}, "validation"),
    ({"events": []}, "validation"), ({"events": ["job.exploded"]}, "validation"),
    ({"events": "job.completed"}, "validation"), ({"secret": ""}, "validation"),
    ({"queue": "bad queue!"}, "config"),
])  # fmt: skip
def test_bad_input_is_a_typed_error(make_backend: Any, bad: dict[str, Any], code: str) -> None:
    args = {"url": "https://example.com/hook", "events": ["job.completed"], **bad}
    with pytest.raises((ValidationError, ConfigError)) as err:
        Webhooks(make_backend("memory")).add(**args)
    assert err.value.code == code


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_webhooks_are_shared_through_the_store_and_survive_reopening(
        make_backend: Any, kind: str, tmp_path: Any) -> None:  # fmt: skip
    a = make_backend(kind)
    hook = Webhooks(a).add("https://example.com/h", ["job.completed", "failed"], queue="q",
                           secret="s3cret")  # fmt: skip
    if kind == "sqlite":  # another process's view of the same file
        from bunq.backends.sql.sqlite import SQLiteBackend

        b = SQLiteBackend(a.path)
    else:
        b = a
    other = Webhooks(b)
    assert other.list() == [hook] and hook.events == ("job.completed", "job.failed")
    assert other.enable(hook.id, False).enabled is False
    assert Webhooks(a).get(hook.id).enabled is False  # type: ignore[union-attr]
    with pytest.raises(WebhookNotFound):
        other.enable("nope")
    assert other.remove(hook.id) and not other.remove(hook.id)
    assert Webhooks(a).list() == []
    if b is not a:
        b.close()


def test_a_dispatcher_sees_webhooks_added_by_another_process(make_backend: Any) -> None:
    from bunq.backends.sql.sqlite import SQLiteBackend

    first = make_backend("sqlite")
    second = SQLiteBackend(first.path)
    with Dispatcher(Webhooks(first), refresh_s=0.05) as d:
        assert not d.active and not d.wants("q")
        Webhooks(second).add("https://example.com/h", ["job.completed"], queue="q")
        until(lambda: d.wants("q"))
        assert d.active and not d.wants("other")
    second.close()


def test_a_full_queue_drops_the_oldest_and_counts(make_backend: Any) -> None:
    hooks = Webhooks(make_backend("memory"))
    hooks.add("https://example.com/h", ["job.completed"])
    d = Dispatcher(hooks, max_pending=2)  # not started: nothing is sent
    for i in range(5):
        assert d.dispatch("completed", "q", {"jobId": str(i)}) == 1
    assert (d.pending(), d.dropped) == (2, 3)
    d.close()


def test_verify_refuses_tampering_staleness_and_unsigned() -> None:
    body = b'{"event":"job.completed"}'
    headers = sign("k", body)
    assert verify("k", {k.lower(): v for k, v in headers.items()}, body) > 0  # any case
    cases = [("k", headers, body + b" ", "mismatch"), ("other", headers, body, "mismatch"),
             ("k", {}, body, "missing"),
             ("k", sign("k", body, timestamp_ms=int(time.time() * 1000) - 600_000), body, "stale"),
             ("k", {**headers, "X-Webhook-Timestamp": "soon"}, body, "malformed")]  # fmt: skip
    for secret, h, b, reason in cases:
        with pytest.raises(WebhookSignatureError) as err:
            verify(secret, h, b, tolerance_s=300)
        assert err.value.data["reason"] == reason and err.value.code == "webhook_signature"


def test_a_delivery_queued_before_its_webhook_was_disabled_is_not_sent(make_backend: Any) -> None:
    hooks = Webhooks(make_backend("memory"), guard=LOOPBACK)
    with receiver() as r:
        hook = hooks.add(r.url, ["job.completed"])
        d = Dispatcher(hooks)  # not started yet: the delivery waits in the queue
        assert d.dispatch("completed", "q", {"jobId": "1"}) == 1
        hooks.enable(hook.id, False)
        assert d.dispatch("completed", "q", {"jobId": "2"}) == 0  # disabled at once
        with d:
            until(lambda: d.deliveries())
        assert r.requests == []
    [rec] = d.deliveries()
    assert (rec.outcome, rec.error) == ("failed", "webhook removed or disabled")


def test_https_delivery_checks_the_certificate(make_backend: Any) -> None:
    import ssl

    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    hooks = Webhooks(make_backend("memory"), guard=LOOPBACK)
    with receiver(tls=server_ctx) as r:
        hook = hooks.add(r.url, ["job.completed"])
        with Dispatcher(hooks, tls=trusting) as d:  # trusts the test CA
            d.dispatch("completed", "q", {"jobId": "1"})
            [req] = r.wait_for(1)
        with Dispatcher(hooks, attempts=1) as strict:  # the system CAs: refused
            strict.dispatch("completed", "q", {"jobId": "2"})
            until(lambda: strict.deliveries())
    verify(hook.secret, req.headers, req.body)
    [rec] = strict.deliveries()
    assert rec.outcome == "failed" and "CERTIFICATE_VERIFY_FAILED" in (rec.error or "")
