"""What the contract cannot state about SQS: visibility, redrive, FIFO, sizes, re-parking."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from bunq import Worker
from bunq.backends.sqs.codec import BASE, DUE, REASON, Envelope, encode_body
from bunq.errors import ConfigError, PayloadTooLarge, UnsupportedError
from bunq.job import FailureReason, JobOptions, JobState, Settle, now_ms
from bunq.policy import decide_failure
from bunq.queue import new_job

pytestmark = pytest.mark.sqs


def add(backend: Any, queue: str = "q", data: Any = None, **opts: Any) -> Any:
    return backend.add([new_job(queue, "job", data, opts)])[0]


def url_of(backend: Any, queue: str = "q") -> str:
    return str(backend.api.info(queue).url)


def raw(client: Any, url: str, data: Any = None, delay_s: int = 0, **attrs: int) -> None:
    """Send a message the way bunq would, with chosen bunq-* attributes."""
    env = Envelope(f"raw-{now_ms()}", "q", "job", data, JobOptions(), now_ms())
    client.send_message(QueueUrl=url, MessageBody=encode_body(env), DelaySeconds=delay_s,
                        MessageAttributes={k: {"DataType": "Number", "StringValue": str(v)}
                                           for k, v in attrs.items()})  # fmt: skip


def test_redrive_to_the_dlq_after_max_receive_count(make_sqs: Any) -> None:
    sqs = make_sqs(max_receives=2)
    job = add(sqs, attempts=10)
    for attempt in (1, 2):  # two leases lapse without an outcome
        [lease] = sqs.lease("q", 1, 1_000)
        assert lease.attempt == attempt
        time.sleep(1.1)
    assert sqs.lease("q", 1, 1_000) == []  # SQS moved it on this receive
    [entry] = sqs.dlq_list("q")
    assert entry.job.id == job.id and entry.reason is FailureReason.STALLED
    assert "maxReceiveCount" in (entry.error or "")


def test_last_attempt_lapsed_goes_to_the_dlq_as_stalled(sqs: Any) -> None:
    job = add(sqs, attempts=1)
    sqs.lease("q", 1, 1_000)
    time.sleep(1.1)
    assert sqs.lease("q", 1, 1_000) == []
    [entry] = sqs.dlq_list("q")
    assert (entry.job.id, entry.reason, entry.history[0].attempt) == (
        job.id,
        FailureReason.STALLED,
        1,
    )


def test_worker_extends_visibility_during_a_long_handler(make_sqs: Any) -> None:
    sqs, rival = make_sqs(), make_sqs()
    add(sqs, data="slow")
    runs: list[int] = []
    stolen: list[Any] = []
    stop = threading.Event()

    def handler(job: Any) -> str:
        runs.append(job.attempts)
        time.sleep(3.2)  # more than twice the 1.5 s lease (a 2 s visibility)
        return "done"

    def steal() -> None:
        while not stop.is_set():
            stolen.extend(rival.lease("q", 1, 1_000))
            time.sleep(0.2)

    worker = Worker("q", handler, sqs, lease_ms=1_500, idle_wait_ms=200).start()
    thief = threading.Thread(target=steal)
    thief.start()
    try:
        deadline = time.monotonic() + 10
        while worker.processed < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thief.join()
        worker.close()
    assert runs == [1] and worker.processed == 1 and stolen == []
    assert sqs.counts("q")[JobState.ACTIVE] == 0 and sqs.counts("q")[JobState.WAITING] == 0


def test_fifo_groups_keep_order_and_lock_while_in_flight(sqs: Any) -> None:
    for data, group in [("a1", "A"), ("b1", "B"), ("a2", "A"), ("b2", "B"), ("a3", "A")]:
        add(sqs, "orders.fifo", data, group=group)
    [first] = sqs.lease("orders.fifo", 1, 30_000)
    assert first.job.data == "a1"
    others = sqs.lease("orders.fifo", 10, 30_000)
    assert [ls.job.data for ls in others] == ["b1", "b2"]  # group A waits for a1
    assert sqs.complete(first) is Settle.OK
    assert sqs.complete_many([(ls, None) for ls in others]) == [Settle.OK, Settle.OK]
    assert [ls.job.data for ls in sqs.lease("orders.fifo", 10, 30_000)] == ["a2", "a3"]


def test_fifo_deduplicates_job_ids_and_unique_keys(sqs: Any) -> None:
    add(sqs, "d.fifo", 1, job_id="order-7")
    add(sqs, "d.fifo", 2, job_id="order-7")
    add(sqs, "d.fifo", 3, unique_key="k")
    add(sqs, "d.fifo", 4, unique_key="k")
    add(sqs, "d.fifo", 5)  # default group
    got = sqs.lease("d.fifo", 10, 30_000)
    assert [ls.job.data for ls in got] == [1, 3, 5] and got[0].id == "order-7"


@pytest.mark.parametrize(("queue", "opts", "feature"), [
    ("f.fifo", {"delay": 1000}, "delay"),
    ("f.fifo", {"unique_key": "k", "unique_strategy": "extend"}, "unique_key"),
    ("f.fifo", {"unique_key": "k", "unique_ttl": 1000}, "unique_key"),
    ("s", {"group": "g"}, "groups"),
    ("s", {"job_id": "x"}, "job_id"),
    ("s", {"unique_key": "k"}, "unique_key"),
    ("s", {"priority": 1}, "priority"),
    ("s", {"lifo": True}, "lifo"),
    ("s", {"depends_on": ["x"]}, "flows"),
])  # fmt: skip
def test_options_sqs_cannot_honour_are_refused(sqs: Any, queue: str, opts: dict[str, Any],
                                               feature: str) -> None:  # fmt: skip
    with pytest.raises(UnsupportedError) as err:
        add(sqs, queue, **opts)
    assert err.value.data == {"backend": "sqs", "feature": feature}
    assert sum(sqs.counts(queue).values()) == 0


def test_unsupported_operations_name_backend_and_feature(sqs: Any) -> None:
    calls = [
        ("get_job", ("x",)),
        ("get_jobs", ("q", JobState.WAITING)),
        ("pause", ("q",)),
        ("clean", ("q", 0, 10, JobState.COMPLETED)),
        ("update_progress", ("x", 1)),
        ("add_log", ("x", "l")),
        ("kv_get", ("cron", "k")),
        ("get_children_results", ("x",)),
    ]
    for name, args in calls:
        with pytest.raises(UnsupportedError) as err:
            getattr(sqs, name)(*args)
        assert err.value.data["backend"] == "sqs" and "sqs" in str(err.value)
    assert sqs.is_paused("q") is False and sqs.sweep().requeued == 0


def test_oversize_payload_against_the_queue_limit(sqs: Any, client: Any, prefix: str) -> None:
    client.create_queue(QueueName=f"{prefix}small", Attributes={"MaximumMessageSize": "1024"})
    with pytest.raises(PayloadTooLarge) as err:
        add(sqs, "small", "x" * 1000)  # base64 makes it ~1,400 bytes
    assert err.value.data["limit"] == 1024 and err.value.data["size"] > 1024
    add(sqs, "small", "x" * 500)
    with pytest.raises(PayloadTooLarge) as err:
        add(sqs, "q", "x" * (1 << 20))
    assert err.value.data["limit"] == 1 << 20
    assert sqs.counts("small")[JobState.WAITING] == 1


def test_retry_waits_out_the_backoff_as_visibility(sqs: Any) -> None:
    add(sqs, attempts=3, backoff=1_500)
    [lease] = sqs.lease("q", 1, 30_000)
    assert sqs.fail(lease, "boom", decide_failure(lease.job, sqs.clock())) is Settle.OK
    assert sqs.counts("q")[JobState.ACTIVE] == 1 and sqs.lease("q", 1, 30_000) == []
    time.sleep(2.1)
    [again] = sqs.lease("q", 1, 30_000)
    assert again.attempt == 2 and again.token != lease.token


def test_delayed_error_gives_the_attempt_back(sqs: Any) -> None:
    add(sqs, attempts=1)
    [lease] = sqs.lease("q", 1, 30_000)
    decision = decide_failure(lease.job, sqs.clock(), delay_ms=1_000, give_back_attempt=True)
    assert sqs.fail(lease, None, decision) is Settle.OK
    assert sqs.counts("q")[JobState.DELAYED] == 1
    time.sleep(1.1)
    [again] = sqs.lease("q", 1, 30_000)
    assert again.attempt == 1  # not spent: a one-attempt job is not dead


def test_long_delay_is_sent_with_its_due_time(sqs: Any, client: Any) -> None:
    add(sqs, data="later", delay=3_600_000)
    assert sqs.counts("q")[JobState.DELAYED] == 1  # DelaySeconds 900, then re-parked


def test_a_receive_before_the_due_time_re_parks(sqs: Any, client: Any) -> None:
    url = url_of(sqs)
    raw(client, url, "hour", **{DUE: now_ms() + 3_600_000})
    raw(client, url, "soon", **{DUE: now_ms() + 1_500})
    raw(client, url, "overdue", **{DUE: now_ms() - 1, BASE: 2})
    assert sqs.lease("q", 10, 30_000) == []
    counts = sqs.counts("q")
    assert counts[JobState.ACTIVE] == 1  # "hour" is hidden for an hour
    assert counts[JobState.DELAYED] == 1 and counts[JobState.WAITING] == 1  # fresh copies
    [overdue] = sqs.lease("q", 10, 30_000)
    assert (overdue.job.data, overdue.attempt) == ("overdue", 3)  # base 2 kept, receives reset
    time.sleep(2.1)
    [soon] = sqs.lease("q", 10, 30_000)
    assert (soon.job.data, soon.attempt) == ("soon", 1)


def test_ttl_expired_before_start_goes_to_the_dlq(sqs: Any) -> None:
    job = add(sqs, ttl=500)
    time.sleep(0.6)
    assert sqs.lease("q", 1, 30_000) == []
    [entry] = sqs.dlq_list("q")
    assert (entry.job.id, entry.reason) == (job.id, FailureReason.TTL_EXPIRED)


def test_wait_keeps_what_it_receives_for_the_next_lease(sqs: Any) -> None:
    assert sqs.wait("q", 1_000) is False  # an empty long poll of one second
    for i in range(3):
        add(sqs, data=i)
    calls: list[str] = []
    sqs.api.client.meta.events.register("before-call.sqs", lambda model, **_: calls.append(
        model.name))  # fmt: skip
    assert sqs.wait("q", 1_000) is True
    assert sqs.wait("q", 1_000) is True  # already holding messages: no call
    leases = sqs.lease("q", 10, 30_000)
    assert sorted(ls.job.data for ls in leases) == [0, 1, 2]
    assert calls == ["ReceiveMessage", "ReceiveMessage"]  # wait's, and the lease's top-up
    assert sqs.complete_many([(ls, None) for ls in leases]) == [Settle.OK] * 3


def test_close_gives_back_what_wait_held_without_spending_attempts(make_sqs: Any) -> None:
    first, second = make_sqs(), make_sqs()
    add(first, attempts=1)
    assert first.wait("q", 1_000) is True
    first.close()
    [lease] = second.lease("q", 1, 30_000)
    assert lease.attempt == 1


def test_drain_removes_waiting_and_leaves_active(sqs: Any) -> None:
    for i in range(3):
        add(sqs, data=i)
    [active] = sqs.lease("q", 1, 30_000)
    assert sqs.drain("q") == 2
    counts = sqs.counts("q")
    assert counts[JobState.WAITING] == 0 and counts[JobState.ACTIVE] == 1
    assert sqs.complete(active) is Settle.OK


def test_dlq_operations_act_only_on_their_queue(make_sqs: Any, client: Any,
                                                prefix: str) -> None:  # fmt: skip
    client.create_queue(QueueName=f"{prefix}shared-dlq")
    sqs = make_sqs(dlq=f"{prefix}shared-dlq", create=0)
    for q in ("a", "b"):
        client.create_queue(QueueName=f"{prefix}{q}")
        for _ in range(2):
            add(sqs, q, attempts=1)
        for lease in sqs.lease(q, 10, 30_000):
            sqs.fail(lease, f"{q} failed", decide_failure(lease.job, sqs.clock()))
    assert sqs.dlq_size("a") == 4  # the shared DLQ's size
    assert [e.error for e in sqs.dlq_list("a")] == ["a failed"] * 2
    b_entries = sqs.dlq_list("b")
    assert sqs.dlq_remove("a", b_entries[0].job.id) is False
    assert sqs.dlq_remove("b", b_entries[0].job.id) is True
    assert sqs.dlq_retry("a") == 2 and sqs.dlq_purge("b") == 1
    assert sqs.dlq_size("a") == 0
    assert sorted(ls.attempt for ls in sqs.lease("a", 10, 30_000)) == [1, 1]


def test_a_foreign_message_goes_to_the_dlq_and_a_json_job_runs(sqs: Any, client: Any) -> None:
    url = url_of(sqs)
    client.send_message(QueueUrl=url, MessageBody="not a job")
    client.send_message(QueueUrl=url, MessageBody='{"name": "hello", "data": {"x": 1}}')
    [lease] = sqs.lease("q", 10, 30_000)
    assert (lease.job.name, lease.job.data, lease.attempt) == ("hello", {"x": 1}, 1)
    assert lease.id and sqs.complete(lease) is Settle.OK
    dead = client.receive_message(QueueUrl=sqs.api.info("q").dlq_url,
                                  MessageAttributeNames=["All"])["Messages"]  # fmt: skip
    assert dead[0]["Body"] == "not a job"
    assert dead[0]["MessageAttributes"][REASON]["StringValue"] == "unknown"


def test_queue_without_a_dlq(make_sqs: Any, client: Any, prefix: str,
                             caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    client.create_queue(QueueName=f"{prefix}plain")
    sqs = make_sqs(create=0)
    with pytest.raises(UnsupportedError, match="no DLQ"):
        sqs.dlq_size("plain")
    add(sqs, "plain", attempts=1)
    [lease] = sqs.lease("plain", 1, 30_000)
    assert sqs.fail(lease, "x", decide_failure(lease.job, sqs.clock())) is Settle.OK
    assert "no DLQ" in caplog.text and sum(sqs.counts("plain").values()) == 0
    with pytest.raises(ConfigError, match="create"):
        sqs.counts("missing")


def test_url_naming_a_queue_by_its_url(moto_endpoint: str, client: Any, prefix: str) -> None:
    from bunq.backends import connect

    url = client.create_queue(QueueName=f"{prefix}home")["QueueUrl"]
    backend = connect("sqs://" + url.split("://", 1)[1] + "?region=us-east-1")
    try:
        job = backend.add([new_job(f"{prefix}home", "j", 1, {})])[0]
        [lease] = backend.lease(f"{prefix}home", 1, 30_000)
        assert lease.id == job.id and backend.complete(lease) is Settle.OK
    finally:
        backend.close()


class Jump:
    """A clock that can leap ahead (the server's clock stays real)."""

    def __init__(self) -> None:
        self.offset = 0

    def __call__(self) -> int:
        return now_ms() + self.offset


def test_leases_cannot_outlive_the_12_hour_visibility_cap(make_sqs: Any) -> None:
    clock = Jump()
    sqs = make_sqs(clock)
    add(sqs, data=1, attempts=3, backoff=3_600_000)
    add(sqs, data=2)
    first, second = sqs.lease("q", 2, 30_000)
    clock.offset = 11 * 3_600_000 + 1_900_000  # 11 h 31 m after the receive (by our clock)
    assert sqs.extend(second, 3_600_000) is Settle.STALE  # past 12 h: refused, no call made
    # a retry whose backoff passes the cap goes back as a copy carrying its due time
    assert sqs.fail(first, "boom", decide_failure(first.job, clock())) is Settle.OK
    assert sqs.counts("q")[JobState.DELAYED] == 1
    assert sqs.complete(second) is Settle.OK


def test_a_lease_superseded_by_a_later_receive_is_stale(sqs: Any) -> None:
    """A lapsed lease's job received again by the same process: the old fence is stale.

    SQS accepts a delete with an old receipt handle (and may not delete), so
    only the process can tell; without this both holders recorded a completion.
    """
    job = add(sqs, attempts=5)
    first = sqs.lease("q", 1, 1_000)[0]
    time.sleep(1.3)  # the 1 s visibility lapses
    second = sqs.lease("q", 1, 10_000)[0]
    assert (second.id, second.attempt) == (job.id, first.attempt + 1)
    assert sqs.complete(first) is Settle.STALE
    assert sqs.extend(first, 5_000) is Settle.STALE
    assert sqs.fail(first, "late", decide_failure(first.job, now_ms())) is Settle.STALE
    assert sqs.complete(second) is Settle.OK
    assert sqs.lease("q", 1, 1_000) == []
