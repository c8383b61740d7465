from __future__ import annotations

import pytest

from bunq.codec import options_blob, options_from_blob, pack, pack_all, unpack
from bunq.errors import PayloadTooLarge, ValidationError
from bunq.job import DEFAULT_OPTIONS, Backoff, JobOptions, UniqueStrategy


def test_pack_all_is_pack_of_each() -> None:
    values = [{"a": 1}, [1, 2], "x" * 300, None, b"\x00"]
    assert pack_all(values) == [pack(v) for v in values]


def test_pack_all_refuses_the_first_bad_value_in_order() -> None:
    with pytest.raises(PayloadTooLarge):  # the too-large value comes first
        pack_all(["x" * 50, object()], "data", 10)
    with pytest.raises(ValidationError, match="not serialisable"):
        pack_all([object(), "x" * 50], "data", 10)
    with pytest.raises(PayloadTooLarge, match="52 bytes encoded; the limit is 10"):
        pack_all(["ok", "x" * 50], "data", 10)


OPTIONS = [
    {},
    {"priority": 5, "lifo": True},
    {"backoff": {"type": "fixed", "delay": 20}},
    {"backoff": {"type": "exponential", "delay": 1000, "cap": 60_000, "jitter": 0.5}},
    {"job_id": "j-1", "unique_key": "u", "unique_strategy": "replace", "unique_ttl": 50},
    {"depends_on": ["a", "b"], "fail_parent_on_failure": True, "keep_logs": 0},
    {"delay": 10, "ttl": 5, "timeout": 7, "attempts": 1, "remove_on_complete": True,
     "remove_on_fail": True, "group": "g", "group_max_size": 2, "durable": True,
     "stack_trace_limit": 0, "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"},
]  # fmt: skip


def decode_0_1(blob: bytes) -> JobOptions:
    """bunq 0.1.0's options_from_blob, verbatim: what an older bunq reads rows with."""
    d = unpack(blob)
    d["backoff"] = Backoff(**d["backoff"])
    d["unique_strategy"] = UniqueStrategy(d["unique_strategy"])
    d["depends_on"] = tuple(d["depends_on"])
    return JobOptions(**d)


@pytest.mark.parametrize("raw", OPTIONS)
def test_stored_options_name_only_what_differs_and_read_back_whole(raw: dict) -> None:
    opts = JobOptions.parse(raw)
    blob = options_blob(opts)
    assert options_from_blob(blob) == opts
    assert decode_0_1(blob) == opts  # rows written now stay readable by 0.1.x
    full = pack(opts.to_dict(), "options")  # the form 0.1.x wrote, still read
    assert options_from_blob(full) == opts
    stored = unpack(blob)
    always = {"backoff", "unique_strategy", "depends_on"}  # what 0.1.x reads unconditionally
    assert set(stored) - always == set(raw) - always
    assert len(blob) < len(full)


def test_options_of_a_plain_add_store_small() -> None:
    assert len(options_blob(DEFAULT_OPTIONS)) <= 64  # every field: 268 bytes


def test_options_rewritten_by_lua_read_back() -> None:
    """Redis scripts decode and re-encode options with cmsgpack, which writes an empty
    map as an empty array: the stored backoff is never empty, and one read as [] is
    the default."""
    assert unpack(options_blob(DEFAULT_OPTIONS))["backoff"]
    lua = pack({"backoff": [], "unique_strategy": "reject", "depends_on": []}, "options")
    assert options_from_blob(lua) == DEFAULT_OPTIONS
