"""Bad input gets a typed error with a stable code; nothing is admitted."""

from __future__ import annotations

from typing import Any

import pytest
from contract.capability import requires

from bunq import ConfigError, PayloadTooLarge, Queue, ValidationError
from bunq.backends.base import Capability as C
from bunq.validate import DEFAULT_MAX_PAYLOAD


@pytest.mark.parametrize("opts", [
    {"bogus": 1}, {"priority": "high"}, {"priority": 1.5}, {"delay": -1}, {"attempts": 0},
    {"attempts": True}, {"backoff": "fast"}, {"backoff": {"type": "linear"}},
    {"depends_on": "abc"}, {"lifo": "yes"}, {"unique_strategy": "maybe"}, {"job_id": ""},
    {"ttl": -5}, {"timeout": "1s"},
])  # fmt: skip
def test_bad_options_raise_validation_error(backend: Any, opts: dict[str, Any]) -> None:
    q = Queue("q", backend)
    with pytest.raises(ValidationError) as err:
        q.add("j", 1, **opts)
    assert err.value.code in {"validation"}
    assert sum(q.counts().values()) == 0


def test_unserialisable_data_is_refused(backend: Any) -> None:
    q = Queue("q", backend)
    with pytest.raises(ValidationError):
        q.add("j", {"f": object()})
    assert sum(q.counts().values()) == 0


def test_oversized_payload_is_refused(backend: Any) -> None:
    """bunqueue's 10 MB of job data on every backend that can hold it; SQS its queue's
    MaximumMessageSize (at most 1 MiB); past it the same typed error everywhere."""
    q = Queue("q", backend)
    with pytest.raises(PayloadTooLarge) as err:
        q.add("j", "x" * DEFAULT_MAX_PAYLOAD)  # plus msgpack's header: one byte too many
    limit = err.value.data["limit"]
    assert err.value.code == "payload_too_large"
    if backend.kind == "sqs":
        assert 0 < limit <= 1 << 20
        return
    assert limit == DEFAULT_MAX_PAYLOAD
    big = "y" * (DEFAULT_MAX_PAYLOAD - 16)
    assert q.get_job(q.add("j", big).id).data == big


@pytest.mark.parametrize("name", ["", " ", "a" * 200, "bad/name", None, 5])
def test_bad_queue_names_raise_config_error(backend: Any, name: Any) -> None:
    with pytest.raises(ConfigError):
        Queue(name, backend)


def test_bad_job_name_is_refused(backend: Any) -> None:
    with pytest.raises(ValidationError):
        Queue("q", backend).add("", 1)


@requires(C.PRIORITY)
def test_bulk_is_atomic_on_bad_item(backend: Any) -> None:
    q = Queue("q", backend)
    with pytest.raises(ValidationError):
        q.add_bulk([{"name": "a", "data": 1}, {"name": "b", "data": 2, "opts": {"nope": 1}}])
    assert sum(q.counts().values()) == 0
    jobs = q.add_bulk([{"name": "a", "data": 1}, ("b", 2), ("c", 3, {"priority": 2})])
    assert [j.name for j in jobs] == ["a", "b", "c"]


def test_bulk_item_shapes(backend: Any) -> None:
    """Tuples of one, two (a tuple subclass too) or three items, and mappings."""
    from collections import namedtuple

    pair = namedtuple("pair", "name data")
    q = Queue("q", backend)
    jobs = q.add_bulk([("a",), ("b", 2), pair("c", 3), ("d", 4, {}), ("e", 5, None),
                       {"name": "f"}, ("g", 7, {"attempts": 2})])  # fmt: skip
    assert [(j.name, j.data, j.opts.attempts) for j in jobs] == [
        ("a", None, 3), ("b", 2, 3), ("c", 3, 3), ("d", 4, 3), ("e", 5, 3), ("f", None, 3),
        ("g", 7, 2)]  # fmt: skip
    assert len({j.id for j in jobs}) == 7
    with pytest.raises(ValidationError):
        q.add_bulk([("a", 1), ("b", 2, 3, 4)])
    with pytest.raises(ValidationError):
        q.add_bulk([("a", 1), ("b", 2, [("priority", 1)])])


@requires(C.GET_JOB)
def test_a_caller_chosen_id_that_exists_is_a_duplicate(backend: Any) -> None:
    """Ids given by a client (not the idempotent job_id option) never overwrite."""
    from bunq import DuplicateJob
    from bunq.job import DEFAULT_OPTIONS, NewJob

    assert backend.get_job("fixed-id") is None  # SQS: ids are not looked up (unsupported)
    first = backend.add([NewJob("q", "j", 1, DEFAULT_OPTIONS, "fixed-id")])[0]
    with pytest.raises(DuplicateJob):
        backend.add([NewJob("q", "j", 2, DEFAULT_OPTIONS, "fixed-id")])
    with pytest.raises(DuplicateJob):
        backend.add([NewJob("q", "j", 3, DEFAULT_OPTIONS, "x"),
                     NewJob("q", "j", 4, DEFAULT_OPTIONS, "x")])  # fmt: skip
    assert backend.get_job(first.id).data == 1 and backend.get_job("x") is None


# ------------------------------------------------- one validation layer (issue 12, item 8)

UNSTORABLE = [
    pytest.param({"delay": 2**63}, id="delay-2^63"),
    pytest.param({"delay": 10**30}, id="delay-10^30"),
    pytest.param({"ttl": 2**63}, id="ttl-2^63"),
    pytest.param({"priority": 2**31}, id="priority-2^31"),
    pytest.param({"timeout": 2**64}, id="timeout-2^64"),
    pytest.param({"unique_ttl": -1}, id="unique_ttl-negative"),
    pytest.param({"job_id": "a\x00b"}, id="nul-job_id"),
    pytest.param({"job_id": "\ud800"}, id="surrogate-job_id"),
    pytest.param({"unique_key": "k\udcff"}, id="surrogate-unique_key"),
    pytest.param({"unique_key": "😀" * 257}, id="unique_key-1028-bytes"),
    pytest.param({"group": "g\x00"}, id="nul-group"),
    pytest.param({"group": 5}, id="int-group"),
    pytest.param({"backoff": {"delay": 2**64}}, id="backoff-2^64"),
    pytest.param({"backoff": {"jitter": float("nan")}}, id="jitter-nan"),
]


@pytest.mark.parametrize("opts", UNSTORABLE)
def test_values_no_backend_can_store_are_refused_everywhere(
    backend: Any, opts: dict[str, Any]
) -> None:
    """Before: OverflowError / UnicodeEncodeError / accepted, depending on the backend."""
    q = Queue("q", backend)
    with pytest.raises(ValidationError) as err:
        q.add("j", 1, **opts)
    assert err.value.code == "validation" and err.value.data["field"]
    assert sum(q.counts().values()) == 0


@pytest.mark.parametrize("name", [None, 5, b"name", "n\x00", "n\udc80", "é" * 129, ""])
def test_bad_job_names_are_refused_everywhere(backend: Any, name: Any) -> None:
    """Before: TypeError on PostgreSQL (None, int, bytes), NUL accepted by two backends."""
    q = Queue("q", backend)
    with pytest.raises(ValidationError) as err:
        q.add(name, 1)
    assert err.value.code == "validation"
    assert sum(q.counts().values()) == 0


@pytest.mark.parametrize("name", ["q\n", "q\r\n", "\nq", "q\x00", "q\udc80"])
def test_queue_names_must_match_whole(backend: Any, name: str) -> None:
    """Before: ``q\\n`` was accepted (``$`` matches before a final newline)."""
    from bunq.job import DEFAULT_OPTIONS, NewJob

    with pytest.raises(ConfigError):
        Queue(name, backend)
    with pytest.raises(ConfigError):
        backend.add([NewJob(name, "j", 1, DEFAULT_OPTIONS)])


def test_options_built_without_parse_are_checked_by_the_backend(backend: Any) -> None:
    """A JobOptions made directly (no parse) gets the same checks in ``Backend.add``."""
    from bunq.job import JobOptions, NewJob

    for opts in (JobOptions(delay=10**30), JobOptions(priority=-(2**40)), JobOptions(attempts=0)):
        with pytest.raises(ValidationError):
            backend.add([NewJob("q", "j", 1, opts)])
    assert sum(Queue("q", backend).counts().values()) == 0


@pytest.mark.parametrize("state", ["bogus", None, "WAITING", "waiting\n", 3])
def test_state_names_are_validated(backend: Any, state: Any) -> None:
    """Before: ValueError (not a bunq error) for ``get_jobs("bogus")``."""
    with pytest.raises(ValidationError) as err:
        Queue("q", backend).get_jobs(state)
    assert err.value.data["field"] == "state"


@requires(C.LIST_JOBS)
@pytest.mark.parametrize(("offset", "limit"), [
    (-1, 10), (2**64, 10), (0, -1), (0, 2**64), ("0", 10), (0, None), (0, 1.5),
])  # fmt: skip
def test_listing_pages_are_validated(backend: Any, offset: Any, limit: Any) -> None:
    """Before: OverflowError for 2**64 offsets on SQLite; negatives silently clamped."""
    with pytest.raises(ValidationError):
        Queue("q", backend).get_jobs("waiting", offset, limit)


@requires(C.DLQ)
@pytest.mark.parametrize("changes", [
    {"max_entries": -1}, {"max_entries": 2**64}, {"max_age": -5}, {"auto_retry_interval": 0},
    {"max_auto_retries": -1}, {"auto_retry": "yes"}, {"max_entries": 1.5},
])  # fmt: skip
def test_dlq_settings_are_validated(backend: Any, changes: dict[str, Any]) -> None:
    """Before: max_entries=-1 was accepted, and every PostgreSQL sweep then raised."""
    q = Queue("q", backend)
    before = q.dlq.config()
    with pytest.raises(ConfigError) as err:
        q.dlq.config(**changes)
    assert err.value.code == "config"
    assert q.dlq.config() == before
    backend.sweep()  # sweeping still works


@requires(C.RATE_LIMIT)
@pytest.mark.parametrize(("max_jobs", "duration"), [(5, 0), (5, -1), (-1, 1000), (5, 2**64)])
def test_rate_limits_are_validated(backend: Any, max_jobs: int, duration: int) -> None:
    """Before: rate_limit(5, 0) was accepted."""
    with pytest.raises(ConfigError):
        Queue("q", backend).rate_limit(max_jobs, duration)


@requires(C.CRON)
@pytest.mark.parametrize(("ns", "key"), [("ns", "k\udc80"), ("ns", "k\x00"), ("", "k"), ("ns", 5)])
def test_small_record_keys_are_validated(backend: Any, ns: Any, key: Any) -> None:
    """Before: a surrogate key made the memory engine's every later flush fail."""
    with pytest.raises(ValidationError):
        backend.kv_put(ns, key, b"v")
