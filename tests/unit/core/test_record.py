"""The engine's job record: the same fields and methods on both twins; the compiled
one is invisible to the cyclic GC."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace
from typing import Any

import pytest

FIELDS = (
    "id", "queue", "name", "data", "opts", "state", "priority", "lifo", "group", "seq",
    "eseq", "run_at", "created_at", "started_at", "finished_at", "attempts", "stalls",
    "token", "owner", "lease_until", "expire_at", "pending", "progress", "error",
    "reason", "dlq_at", "dlq_retries", "history", "saved",
)  # fmt: skip


class State:
    value = "waiting"


def opts(**kw: Any) -> SimpleNamespace:
    return SimpleNamespace(**{"priority": 0, "lifo": False, "group": None, "ttl": None, **kw})


def make(impl: SimpleNamespace, **kw: Any) -> Any:
    o = opts(**kw)
    return impl.record.Record("j1", "q", "n", b"\x01", o, State, 7, 100, 130)


def test_record_initial_fields(impl: SimpleNamespace) -> None:
    o = opts(priority=3, lifo=True, group="g", ttl=25)
    r = impl.record.Record("j1", "q", "n", b"\x01", o, State, 7, 100, 130)
    expected = {
        "id": "j1", "queue": "q", "name": "n", "data": b"\x01", "opts": o, "state": State,
        "priority": 3, "lifo": True, "group": "g", "seq": 7, "eseq": 0, "run_at": 130,
        "created_at": 100, "started_at": None, "finished_at": None, "attempts": 0,
        "stalls": 0, "token": None, "owner": "", "lease_until": 0, "expire_at": 125,
        "pending": 0, "progress": 0, "error": None, "reason": None, "dlq_at": None,
        "dlq_retries": 0, "history": None, "saved": False,
    }  # fmt: skip
    assert {f: getattr(r, f) for f in FIELDS} == expected
    assert r.opts is o and r.state is State
    assert make(impl).expire_at is None  # no ttl


def test_records_of_alternating_options_take_each_ones_fields(impl: SimpleNamespace) -> None:
    """Each record copies its own options' priority, lifo, group and ttl, whether the
    options object is the one the record before took (a bulk) or another."""
    a, b = opts(priority=1, group="a"), opts(priority=9, lifo=True, ttl=5)
    made = [impl.record.Record(f"j{i}", "q", "n", b"", o, State, i, 100, 100)
            for i, o in enumerate([a, a, b, a, b, b])]  # fmt: skip
    got = [(r.priority, r.lifo, r.group, r.expire_at) for r in made]
    one, other = (1, False, "a", None), (9, True, None, 105)
    assert got == [one, one, other, one, other, other]


def test_record_fields_are_writable_and_keep_any_value(impl: SimpleNamespace) -> None:
    r = make(impl)
    big = 2**80  # never stored by the engine (validation bounds ints), but not refused here
    for f in FIELDS:
        setattr(r, f, big)
        assert getattr(r, f) == big
    r.started_at = None
    assert r.started_at is None


def test_record_refuses_unknown_attributes(impl: SimpleNamespace) -> None:
    r = make(impl)
    with pytest.raises(AttributeError):
        r.nope = 1
    assert not hasattr(r, "__dict__")
    with pytest.raises(TypeError):
        weakref.ref(r)


def test_record_methods(impl: SimpleNamespace) -> None:
    fifo = make(impl, priority=2)
    assert fifo.order_key() == (-2, 130, 7)
    assert fifo.signed_seq() == 7
    lifo = make(impl, priority=2, lifo=True)
    assert lifo.order_key() == (-2, -130, -7)
    assert lifo.signed_seq() == -7
    assert repr(fifo) == "Rec('j1', 'q', waiting, attempts=0)"
    fifo.add_attempt("a1")
    history = fifo.history
    fifo.add_attempt("a2")
    assert fifo.history is history and history == ["a1", "a2"]
    key = impl.record.Record.order_key  # the engine sorts with the unbound method
    assert sorted([lifo, fifo], key=key) == [lifo, fifo]


def test_record_compiled_is_not_tracked_by_the_gc(
    both: tuple[SimpleNamespace, SimpleNamespace],
) -> None:
    r = make(both[0])
    r.add_attempt(("attempt", 1))
    r.error = "boom"
    assert gc.is_tracked(r) is False
    gc.collect()  # a collection with untracked records held is harmless
    assert r.history == [("attempt", 1)]


def test_record_pure_is_a_slots_class(builds: SimpleNamespace) -> None:
    r = make(builds.pure)
    assert builds.pure.record.Record.__slots__ == builds.pure.record.FIELDS == FIELDS
    assert gc.is_tracked(r)


def test_record_deleted_field_reads_as_attribute_error(impl: SimpleNamespace) -> None:
    """As with __slots__: a deleted field is missing until set again (the compiled
    methods check rather than read a NULL)."""
    r = make(impl)
    del r.lifo
    with pytest.raises(AttributeError):
        r.lifo  # noqa: B018
    with pytest.raises(AttributeError):
        r.order_key()
    with pytest.raises(AttributeError):
        r.signed_seq()
    del r.history
    with pytest.raises(AttributeError):
        r.add_attempt("a1")
    r.lifo = True
    r.history = None
    r.add_attempt("a1")
    assert r.signed_seq() == -7 and r.history == ["a1"]


def test_record_compiled_fields_are_slot_descriptors(
    both: tuple[SimpleNamespace, SimpleNamespace],
) -> None:
    """The compiled fields are the member descriptors __slots__ makes (what CPython
    specialises attribute access on), not properties."""
    compiled, pure = both
    assert compiled.record.FIELDS == FIELDS
    for name in FIELDS:
        c = compiled.record.Record.__dict__[name]
        assert type(c) is type(pure.record.Record.__dict__[name]), name
        assert c.__name__ == name
