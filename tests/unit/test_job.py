from __future__ import annotations

import multiprocessing
import re

import pytest

from bunq.errors import ValidationError
from bunq.job import Backoff, JobOptions, UniqueStrategy, new_job_id

UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_job_ids_are_uuid7_shaped_unique_and_time_ordered() -> None:
    ids = [new_job_id() for _ in range(50_000)]
    assert all(UUID7.match(i) for i in ids[:100])
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)


def _child_ids(q: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    q.put([new_job_id() for _ in range(1000)])


def test_forked_children_never_repeat_the_parent_ids() -> None:
    parent = {new_job_id() for _ in range(1000)}
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child_ids, args=(q,)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [set(q.get(timeout=10)), set(q.get(timeout=10))]
    for p in procs:
        p.join()
    assert not (got[0] & got[1]) and not (got[0] & parent) and not (got[1] & parent)


def test_options_parse_defaults_and_values() -> None:
    assert JobOptions.parse({}) == JobOptions()
    o = JobOptions.parse({"priority": 5, "delay": 10, "backoff": 250, "unique_key": "k",
                          "unique_strategy": "extend", "depends_on": ["a"]})  # fmt: skip
    assert o.backoff == Backoff("fixed", 250) and o.unique_strategy is UniqueStrategy.EXTEND
    assert o.depends_on == ("a",)
    full = JobOptions.parse({"backoff": {"type": "exponential", "delay": 10, "cap": 40,
                                         "jitter": 0.5}})  # fmt: skip
    assert full.backoff == Backoff("exponential", 10, 40, 0.5)


@pytest.mark.parametrize("opts", [
    {"x": 1}, {"priority": None}, {"delay": 1.5}, {"attempts": 10_001},
    {"backoff": {"delay": 1, "bogus": 2}}, {"backoff": {"jitter": 2}}, {"group": ""},
    {"depends_on": [1]}, {"unique_key": "k" * 2000},
])  # fmt: skip
def test_bad_options_name_the_field(opts: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        JobOptions.parse(opts)


def test_options_roundtrip_through_plain_data() -> None:
    o = JobOptions.parse({"priority": 2, "backoff": {"type": "fixed", "delay": 7}, "lifo": True})
    d = o.to_dict()
    d["backoff"] = Backoff(**d["backoff"])
    d["unique_strategy"] = UniqueStrategy(d["unique_strategy"])
    d["depends_on"] = tuple(d["depends_on"])
    assert JobOptions(**d) == o


def test_admitted_job_equals_the_constructor_for_every_field() -> None:
    from dataclasses import fields

    from bunq.engine.builders import admitted_job
    from bunq.job import Job, JobState

    opts = JobOptions.parse({"priority": 3})
    fast = admitted_job("id-1", "q", "n", {"a": 1}, JobState.DELAYED, opts, 5, 9)
    slow = Job(id="id-1", queue="q", name="n", data={"a": 1}, state=JobState.DELAYED,
               opts=opts, created_at=5, run_at=9)  # fmt: skip
    assert fast == slow
    # a field added to Job with a default must be set by admitted_job too
    assert all(getattr(fast, f.name) == getattr(slow, f.name) for f in fields(Job))
    assert type(fast) is Job and getattr(fast, "_queue", None) is None  # detached
    with pytest.raises(AttributeError):  # still frozen
        fast.name = "other"  # type: ignore[misc]


def test_job_with_and_lease_with_equal_the_constructors() -> None:

    from bunq.engine.builders import job_with, lease_with
    from bunq.job import Job, JobState, Lease

    slow = Job(id="id-1", queue="q", name="n", data=[1], state=JobState.ACTIVE,
               opts=JobOptions.parse({"attempts": 4}), attempts=2, created_at=5, run_at=9,
               started_at=11, finished_at=None, progress=40, result=None, error="boom",
               reason=None, history=(), stalls=1)  # fmt: skip
    fast = job_with(*(getattr(slow, name) for name in Job.__slots__))
    assert fast == slow and type(fast) is Job and getattr(fast, "_queue", None) is None
    lease = lease_with(fast, "tok", 2, 99, "me")
    assert lease == Lease(slow, "tok", 2, 99, "me") and type(lease) is Lease
    with pytest.raises(AttributeError):  # still frozen
        lease.token = "other"  # type: ignore[misc]


def test_build_new_job_equals_the_constructor() -> None:
    from bunq.engine.builders import build_new_job
    from bunq.job import NewJob

    opts = JobOptions.parse({"delay": 3})
    fast = build_new_job("q", "n", {"a": 1}, opts, "id-1")
    assert type(fast) is NewJob
    assert fast == NewJob("q", "n", {"a": 1}, opts, "id-1")
    assert hash(build_new_job("q", "n", 7, opts, "i")) == hash(NewJob("q", "n", 7, opts, "i"))
    with pytest.raises(AttributeError):  # still frozen
        fast.name = "other"  # type: ignore[misc]


def test_ids_keep_their_layout_across_counter_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools

    from bunq import job as jobmod

    def reference(ms: int, c: int, node: int) -> str:  # the layout as first written
        tail = ((c & 0x3FFF) << 34) | node
        return (f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-7{(c >> 28) & 0xFFF:03x}-"
                f"{0x8000 | ((c >> 14) & 0x3FFF):04x}-{tail:012x}")  # fmt: skip

    src = jobmod._IdSource()
    start = (1 << 28) - 3  # crosses a 2**14 and a 2**28 boundary of the counter
    src._count = itertools.count(start)
    clock = iter([1_700_000_000_000] * 4 + [1_700_000_000_001] * 4)
    monkeypatch.setattr(jobmod.time, "time_ns", lambda: next(clock) * 1_000_000)
    got = [src.next() for _ in range(8)]
    ms = [1_700_000_000_000] * 4 + [1_700_000_000_001] * 4
    assert got == [reference(m, start + i, src._node) for i, m in enumerate(ms)]


def test_id_take_keeps_the_layout_and_shares_the_counter(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """``new_job_ids(n)`` (add_bulk's ids): next()'s layout, one clock read, one counter."""
    import itertools

    from bunq import job as jobmod

    src = jobmod._IdSource()
    start = (1 << 28) - 3  # crosses a 2**14 and a 2**28 boundary of the counter
    src._count = itertools.count(start)
    monkeypatch.setattr(jobmod.time, "time_ns", lambda: 1_700_000_000_000 * 1_000_000)
    got = src.take(4) + [src.next()] + src.take(3) + src.take(0)
    src._count = itertools.count(start)
    assert got == [src.next() for _ in range(8)]
    assert all(UUID7.match(i) for i in got) and got == sorted(got)
    # every value of the last group's counter digits, and two head boundaries in one take
    start = (5 << 14) - 7
    src._count = itertools.count(start)
    many = src.take((1 << 15) + 9)
    src._count = itertools.count(start)
    assert many == [src.next() for _ in range(len(many))] and len(set(many)) == len(many)


def test_last_id_group_is_zero_padded() -> None:
    from bunq import job as jobmod

    for tail in (0, 1, 0xABC, (1 << 34) - 1, (1 << 48) - 1):
        assert hex(jobmod._LAST_GROUP_BIT | tail)[3:] == f"{tail:012x}"


@pytest.mark.parametrize("bad", [None, 7, "", "a\x00b", "x" * 257, "é" * 129, "\ud800"])
def test_check_new_jobs_refuses_bad_ids(bad: object) -> None:
    from bunq.job import DEFAULT_OPTIONS, NewJob, check_new_jobs

    ok = NewJob("q", "n", 1, DEFAULT_OPTIONS, "fine")
    with pytest.raises(ValidationError) as err:
        check_new_jobs([ok, NewJob("q", "n", 1, DEFAULT_OPTIONS, bad)])  # type: ignore[arg-type]
    assert err.value.data["field"] == "id"


def test_check_new_jobs_takes_valid_non_ascii_ids() -> None:
    from bunq.job import DEFAULT_OPTIONS, NewJob, check_new_jobs

    check_new_jobs([NewJob("q", "n", 1, DEFAULT_OPTIONS, i) for i in ("é" * 128, "x" * 256)])
