"""Bad input gets a typed error with a stable code; nothing is admitted."""

from __future__ import annotations

from typing import Any

import pytest
from contract.capability import requires

from bunq import ConfigError, PayloadTooLarge, Queue, ValidationError
from bunq.backends.base import Capability as C


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
    q = Queue("q", backend)
    with pytest.raises(PayloadTooLarge) as err:
        q.add("j", "x" * (2 << 20))
    assert err.value.code == "payload_too_large" and err.value.data["limit"] > 0


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
