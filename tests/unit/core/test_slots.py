"""SlotBuilder: a slotted class's instance filled without __init__ or __setattr__, the same
on both twins."""

from __future__ import annotations

import gc
import sys
import weakref
from dataclasses import FrozenInstanceError, dataclass, fields
from types import SimpleNamespace
from typing import Any

import pytest


class Base:
    __slots__ = ("handle",)


@dataclass(frozen=True, slots=True)
class Item(Base):
    id: str
    data: Any
    state: str = "new"
    tries: int = 0
    note: str | None = None


class Box:
    item: Any = None


def test_builds_what_the_constructor_builds(impl: SimpleNamespace) -> None:
    make = impl.slots.SlotBuilder(Item, ("data", "id"), {"tries": 0, "state": "new", "note": None})
    payload = {"a": [1, 2]}
    built = make(payload, "i-1")
    assert type(built) is Item and built == Item("i-1", payload)
    assert built.data is payload  # the very object, not a copy
    slow = Item("i-1", payload)
    assert all(getattr(built, f.name) == getattr(slow, f.name) for f in fields(Item))
    assert hash(make(("t",), "i-2")) == hash(Item("i-2", ("t",)))
    with pytest.raises(FrozenInstanceError):  # still frozen
        built.id = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):  # a slot named nowhere stays unset
        _ = built.handle


def test_each_call_is_a_new_object_holding_its_references(impl: SimpleNamespace) -> None:
    make = impl.slots.SlotBuilder(Item, ("id", "data", "state", "tries", "note"))
    data = ["payload"]
    before = sys.getrefcount(data)
    a, b = make("a", data, "s", 1, None), make("b", data, "s", 1, None)
    assert a is not b and (a.id, b.id) == ("a", "b")
    assert sys.getrefcount(data) == before + 2
    del a, b
    gc.collect()
    assert sys.getrefcount(data) == before


def test_built_objects_are_collected_in_cycles(impl: SimpleNamespace) -> None:
    """The cyclic GC tracks them as it tracks constructed ones: a cycle through one is freed."""
    make = impl.slots.SlotBuilder(Item, ("id", "data"), {"state": "s", "tries": 0, "note": None})
    box = Box()
    built = make("c", box)
    box.item = built  # built -> box -> built
    assert gc.is_tracked(built)
    ref = weakref.ref(box)
    del built, box
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize(
    ("cls", "names", "consts"),
    [
        (Item, ("id", "nope"), {}),  # not a field
        (Item, ("id", "__hash__"), {}),  # not a slot
        (Item, ("id",), {"id": "x"}),  # named twice
        (Item, ("id", "id"), {}),
        (SimpleNamespace, ("x",), {}),  # no slots
        (int, (), {}),  # not allocated by object.__new__
    ],
)
def test_refuses_what_it_cannot_fill(impl: SimpleNamespace, cls: type, names: tuple[str, ...],
                                     consts: dict[str, Any]) -> None:  # fmt: skip
    with pytest.raises(TypeError):
        impl.slots.SlotBuilder(cls, names, consts)


def test_refuses_too_many_fields_and_a_wrong_count(impl: SimpleNamespace) -> None:
    wide = type("Wide", (), {"__slots__": tuple(f"f{i}" for i in range(70))})
    with pytest.raises(ValueError, match="64"):
        impl.slots.SlotBuilder(wide, [f"f{i}" for i in range(65)])
    make = impl.slots.SlotBuilder(wide, [f"f{i}" for i in range(64)])
    assert make(*range(64)).f63 == 63
    with pytest.raises(TypeError):
        make(*range(63))
