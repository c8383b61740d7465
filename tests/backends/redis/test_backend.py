"""What the contract suite does not cover: URLs, the key layout, wake-ups, durability,
what Redis refuses (dependencies across queues), and batches over several queues."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from contract.helpers import add, lease1

from bunq import (
    BackendError,
    ConfigError,
    DuplicateJob,
    JobState,
    Settle,
    connect,
)
from bunq.backends.redis.config import RedisConfig
from bunq.job import DEFAULT_OPTIONS, NewJob

pytestmark = pytest.mark.redis


@pytest.mark.parametrize("url", [
    "redis://", "redis://h:notaport/0", "redis://h:6379/x", "redis://h/0?prefix=a{b}",
    "redis://h/0?prefix=", "redis://h/0?bogus=1", "redis://h/0?replicas=-1",
])  # fmt: skip
def test_bad_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError):
        RedisConfig.parse(url)


def test_url_options() -> None:
    c = RedisConfig.parse("rediss://u:p@h:6380/2?prefix=app&replicas=1&wait_timeout=50"
                          "&ssl_cert_reqs=none&socket_timeout=3")  # fmt: skip
    assert (c.prefix, c.replicas, c.wait_timeout) == ("app", 1, 50)
    assert c.client_url == "rediss://u:p@h:6380/2?ssl_cert_reqs=none&socket_timeout=3"


def test_missing_redis_py_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    gone = ("redis.", "bunq.backends.redis")
    for mod in [m for m in sys.modules if m == "redis" or m.startswith(gone)]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis -> ImportError
    with pytest.raises(ConfigError, match=r"pip install 'bunq-queue\[redis\]'") as err:
        connect("redis://127.0.0.1:6379/0")
    assert "\n" not in str(err.value)


def test_unreachable_server_is_backend_unavailable() -> None:
    from backends.redis.conftest import free_port

    from bunq.errors import BackendUnavailable

    with pytest.raises(BackendUnavailable):
        connect(f"redis://127.0.0.1:{free_port()}/0")


def test_idle_wait_wakes_on_add_without_polling(backend: Any) -> None:
    woke = threading.Event()

    def waiter() -> None:
        if backend.wait("q", 10_000):
            woke.set()

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    assert not woke.is_set()
    t0 = time.monotonic()
    add(backend)
    assert woke.wait(5) and time.monotonic() - t0 < 2.0  # woken: the wait was 10 s
    t.join()
    assert lease1(backend)


def test_wait_ends_when_the_next_delayed_job_is_due(backend: Any, clock: Any) -> None:
    add(backend, delay=300)
    t0 = time.monotonic()
    clock.advance(200)
    assert backend.wait("q", 5_000) is True  # the job is due in 100 ms (fake clock)
    assert time.monotonic() - t0 < 2.0
    assert backend.wait("empty", 50) is False


def test_a_batch_over_several_queues_is_all_or_none(backend: Any) -> None:
    add(backend, "b", job_id="taken", data=0)
    backend.add([NewJob("b", "j", 0, DEFAULT_OPTIONS, "fixed")])
    with pytest.raises(DuplicateJob):
        backend.add([NewJob("a", "j", 1, DEFAULT_OPTIONS), NewJob("a", "j", 2, DEFAULT_OPTIONS),
                     NewJob("b", "j", 3, DEFAULT_OPTIONS, "fixed")])  # fmt: skip
    assert sum(backend.counts("a").values()) == 0
    assert backend.counts("b")[JobState.WAITING] == 2


def test_durable_add_waits_for_replicas_and_says_so_when_they_do_not_answer() -> None:
    from conftest import REDIS_URL

    sep = "&" if "?" in REDIS_URL else "?"
    be = connect(f"{REDIS_URL}{sep}prefix=t{uuid.uuid4().hex[:12]}&replicas=1&wait_timeout=50")
    be._test_prefix = be.config.prefix
    try:
        from bunq import Queue

        q = Queue("q", be)
        q.add("plain")  # not durable: no WAIT
        with pytest.raises(BackendError, match="0 of 1 replicas") as err:
            q.add("important", durable=True)  # this server has no replica
        assert err.value.data["replicas"] == 0
        assert q.counts()["waiting"] == 2  # admitted on the primary, as the error says
    finally:
        be.close()
        from conftest import drop_redis_keys

        drop_redis_keys(be)


def test_counts_come_from_counters(backend: Any, clock: Any) -> None:
    for i in range(50):
        add(backend, data=i, delay=1_000 if i % 2 else 0, group="g" if i % 5 == 0 else None)
    for lease in backend.lease("q", 10, 30_000):
        backend.complete(lease)
    c = backend.counts("q")
    assert (c[JobState.WAITING], c[JobState.DELAYED], c[JobState.COMPLETED]) == (15, 25, 10)
    clock.advance(1_000)  # due delayed jobs count as waiting before a lease moves them
    c = backend.counts("q")
    assert (c[JobState.WAITING], c[JobState.DELAYED]) == (40, 0)


def test_obliterate_removes_every_key_of_the_queue(backend: Any) -> None:
    import redis

    from bunq.backends.base import QueueLimits

    backend.set_limits("q", QueueLimits(group_concurrency=1))
    for i in range(2500):  # more than one removal batch
        add(backend, data=i, group=f"g{i % 7}", unique_key=f"u{i}", ttl=60_000)
    lease1(backend)
    backend.obliterate("q", force=True)
    client = redis.Redis.from_url(backend.config.client_url)
    left = list(client.scan_iter(match=backend.keys.queue("q").replace("{", "\\{") + "*"))
    client.close()
    assert left == [] and "q" not in backend.queues()


def libraries(admin: Any) -> list[bytes]:
    """The names of the server's function libraries (FUNCTION LIST: flat pairs per one)."""
    return [dict(zip(x[::2], x[1::2], strict=True))[b"library_name"] for x in admin.function_list()]


def test_flushed_library_reloads(own_redis: Any, clock: Any) -> None:
    """A server that lost the library (FUNCTION FLUSH, a restart without persistence)
    answers "Function not found" and did nothing; the call loads it and runs once."""
    import redis

    from bunq.backends.redis.scripts import SCRIPTS

    be = connect(own_redis.url + "?prefix=ns", clock=clock)
    admin = redis.Redis.from_url(own_redis.url)
    try:
        libs = libraries(admin)
        assert libs == [SCRIPTS.prefix.encode()]  # loaded once, under its versioned name
        add(be, data=1)
        admin.function_flush()
        add(be, data=2)  # a pipelined FCALL: reloads, resends
        admin.function_flush()
        leases = be.lease("q", 5, 30_000)
        assert [x.job.data for x in leases] == [1, 2]
        admin.function_flush()
        assert be.complete_many([(x, None) for x in leases]) == [Settle.OK, Settle.OK]
        admin.function_flush()
        assert be.counts("q")[JobState.COMPLETED] == 2  # Script.run: reloads, resends
        admin.function_flush()
        assert be.sweep().requeued == 0
        assert libraries(admin) == libs
    finally:
        admin.close()
        be.close()


def test_another_versions_library_stays_beside_this_one(own_redis: Any, clock: Any) -> None:
    """Processes of two bunq versions on one server (a rolling deploy): each loads and
    calls its own library; neither replaces the other's."""
    import redis

    from bunq.backends.redis.scripts import SCRIPTS

    other = SCRIPTS.source.replace(SCRIPTS.prefix, "bunq_0123456789abcdef")
    admin = redis.Redis.from_url(own_redis.url)
    admin.function_load(other)  # an older bunq connected first
    be = connect(own_redis.url + "?prefix=two", clock=clock)
    try:
        add(be, data=1)
        assert [x.job.data for x in be.lease("q", 5, 30_000)] == [1]
        assert sorted(libraries(admin)) == sorted([b"bunq_0123456789abcdef",
                                                   SCRIPTS.prefix.encode()])  # fmt: skip
    finally:
        admin.close()
        be.close()


def test_reads_run_while_the_server_refuses_writes(own_redis: Any, clock: Any) -> None:
    """A server over maxmemory (noeviction) refuses writes; the read-only functions are
    flagged ``no-writes``, so counts and lookups by id still answer, and an add is a
    BackendError that wrote nothing."""
    import redis

    own_redis.restart("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    be = connect(own_redis.url + "?prefix=oom", clock=clock)
    admin = redis.Redis.from_url(own_redis.url)
    try:
        job = add(be, data=1)
        with pytest.raises(redis.ResponseError, match="maxmemory"):
            for i in range(100):  # 10 MB of filler, in pipelines of 100 KB
                pipe = admin.pipeline(transaction=False)
                for k in range(100):
                    pipe.set(f"filler:{i}:{k}", b"x" * 1000)
                pipe.execute()
        with pytest.raises(BackendError, match="maxmemory"):
            add(be, data=2)
        assert be.counts("q")[JobState.WAITING] == 1
        found = be.get_job(job.id)
        assert found is not None and found.data == 1  # the read function, under OOM
    finally:
        admin.close()
        be.close()


def test_a_server_without_functions_is_refused_at_connect(redis_without_functions: Any) -> None:
    """Redis before 7.0 has no FUNCTION command: connect says what is needed."""
    with pytest.raises(ConfigError, match=r"needs Redis 7\.0 or newer"):
        connect(redis_without_functions.url + "?prefix=old")


def test_job_ids_are_global_across_queues(backend: Any) -> None:
    """As on SQL: a caller-chosen id held in another queue is a duplicate, a live job_id
    answers with the live job, a finished one is reused."""
    a = backend.add([NewJob("a", "j", 1, DEFAULT_OPTIONS, "fixed")])[0]
    with pytest.raises(DuplicateJob):
        backend.add([NewJob("b", "j", 2, DEFAULT_OPTIONS), NewJob("b", "j", 3, DEFAULT_OPTIONS,
                                                                   "fixed")])  # fmt: skip
    assert sum(backend.counts("b").values()) == 0
    assert backend.get_job("fixed").queue == "a" and backend.get_job(a.id).data == 1
    live = add(backend, "a", data=1, job_id="order")
    again = add(backend, "b", data=2, job_id="order")
    assert again.queue == "a" and again.data == 1 and again.id == live.id
    assert sum(backend.counts("b").values()) == 0
    backend.complete(lease1(backend, "a"))  # "fixed" first (FIFO)
    backend.complete(lease1(backend, "a"))  # then "order": finished, its id may be reused
    reused = add(backend, "b", data=3, job_id="order")
    assert reused.queue == "b" and backend.get_job("order").data == 3
    assert backend.counts("a")[JobState.COMPLETED] == 1


def test_clean_waiting_and_delayed_by_age(backend: Any, clock: Any) -> None:
    old = [add(backend, data=i, priority=0).id for i in range(3)]
    old_delayed = add(backend, data="d", delay=60_000).id
    clock.advance(5_000)
    add(backend, data="new", priority=9)  # first in its lane, but too young to clean
    add(backend, data="new-delayed", delay=60_000)
    assert sorted(backend.clean("q", 1_000, 10, JobState.WAITING)) == sorted(old)
    assert backend.clean("q", 1_000, 10, JobState.DELAYED) == [old_delayed]
    c = backend.counts("q")
    assert (c[JobState.WAITING], c[JobState.DELAYED]) == (1, 1)
    assert backend.get_job(old[0]) is None
