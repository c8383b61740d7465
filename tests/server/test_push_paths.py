"""The admission paths' shortcuts: PUSHB's per-bulk parse (bunq.server.wire.push_batch:
a job of the previous job's shape shares its work, every other job is parsed in full,
with its errors), the options cache of single PUSHes, PUSH's prepared reply."""

from __future__ import annotations

from typing import Any

import pytest

from bunq.errors import ValidationError
from bunq.job import JobState
from bunq.server.wire import push_batch, push_job


def _name(s: str) -> str:
    return "".join(list(s))  # a fresh str object, as msgpack decodes each job's name


def test_jobs_of_one_shape_share_the_name_and_options_objects() -> None:
    jobs = [{"name": _name("send"), "data": i, "removeOnComplete": False, "priority": 3}
            for i in range(4)]  # fmt: skip
    out = push_batch({"queue": "q", "jobs": jobs})
    assert [j.data for j in out] == [0, 1, 2, 3]
    assert all(j.name is out[0].name and j.opts is out[0].opts for j in out)
    assert out[0].opts.priority == 3 and not out[0].opts.remove_on_complete
    assert len({j.id for j in out}) == 4


def test_every_shape_change_is_parsed_as_a_single_push() -> None:
    jobs: list[Any] = [
        {"name": "a", "data": 1, "priority": 1},
        {"name": "a", "data": 2, "priority": 2},  # a value changes
        {"name": "b", "data": 3, "priority": 2},  # the name changes
        {"name": "b", "data": 4, "priority": 2, "lifo": True},  # a field is added
        {"name": "b", "data": 5, "priority": 2.0},  # equal, another type (int64 rule)
        {"data": {"name": "legacy", "x": 1}},  # the legacy envelope
        {"data": {"name": "legacy", "x": 2}},
        {"name": "c", "data": 6, "customId": "c1"},  # custom ids are never shared
        {"name": "c", "data": 7, "customId": "c2"},
        {"name": "d", "data": 8, "backoff": {"type": "fixed", "delay": 5}},  # not a scalar
        {"name": "d", "data": 9, "backoff": {"type": "fixed", "delay": 6}},
    ]
    out = push_batch({"queue": "q", "jobs": jobs})
    for job, fields in zip(out, jobs, strict=True):
        alone = push_job("q", fields, "customId")
        assert (job.name, job.data, job.opts) == (alone.name, alone.data, alone.opts)
    assert [j.id for j in out[7:9]] == ["c1", "c2"]
    assert out[10].opts.backoff.delay == 6


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "a", "data": 2, "priority": True},  # == 1, but a bool is refused
        {"name": "a", "data": 2, "priority": 1, "tags": ["x"]},
        {"name": "", "data": 2, "priority": 1},
        {"name": 1, "data": 2, "priority": 1},
        ["not", "a", "map"],
    ],
)
def test_a_bad_job_after_a_good_one_gets_its_error(bad: Any) -> None:
    good = {"name": "a", "data": 1, "priority": 1}
    with pytest.raises(Exception) as want:
        push_job("q", bad, "customId")
    with pytest.raises(type(want.value)) as got:
        push_batch({"queue": "q", "jobs": [good, dict(good), bad]})
    assert str(got.value) == str(want.value)
    assert isinstance(got.value, ValidationError) or "tags" in str(got.value)


def test_single_pushes_share_options_whatever_their_request_id() -> None:
    def push(req_id: str, **fields: Any) -> Any:
        msg = {"cmd": "PUSH", "queue": "q", "name": "j", "data": 1, "reqId": req_id, **fields}
        return push_job("q", msg)

    a, b = push("1", priority=2), push("2", priority=2)
    assert a.opts is b.opts and a.opts.priority == 2
    assert push("3", priority=3).opts.priority == 3
    assert push("4", removeOnComplete=True).opts.remove_on_complete
    with pytest.raises(ValidationError):
        push("5", removeOnComplete=1)  # == True, but not a bool: refused, never the cached


def test_a_push_reply_is_prepared_and_encodes_as_before() -> None:
    import asyncio

    from bunq import connect
    from bunq.protocol import Prepared, encode
    from bunq.server.commands import load
    from bunq.server.context import ServerConfig, ServerContext, Session

    ctx = ServerContext(connect("memory://"), ServerConfig())
    msg = {"cmd": "PUSH", "queue": "q", "name": "j", "data": {"n": 2**40}, "reqId": "7"}
    reply = asyncio.run(load()["PUSH"](ctx, msg, Session(authed=True)))
    assert type(reply) is Prepared and list(reply) == ["id"]
    assert encode(reply, exact_ints=True) == encode(dict(reply))
    assert [j.id for j in ctx.backend.get_jobs("q", JobState.WAITING)] == [reply["id"]]
