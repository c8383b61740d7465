"""Reference SlotBuilder: each field set through its member descriptor's ``__set__``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MemberDescriptorType
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_MAX_FIELDS = 64


class SlotBuilder(Generic[T]):
    """``SlotBuilder(cls, fields, consts)(*values)``: a new ``cls`` whose ``fields`` hold
    ``values`` (in that order) and whose ``consts`` fields hold those constants, without
    calling ``cls.__new__``, ``__init__`` or ``__setattr__``. Slots named in neither
    stay unset, as after ``object.__new__(cls)``.

    :raises TypeError: ``cls`` is not a class whose instances ``object.__new__``
        allocates, a name is not a ``__slots__`` field of ``cls`` (or a base), a name
        appears twice, or a call passes another number of values than ``fields``.
    :raises ValueError: more than 64 names in all.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True, slots=True)
    ... class Point:
    ...     x: int
    ...     y: int = 0
    >>> make = SlotBuilder(Point, ("x",), {"y": 2})
    >>> make(1)
    Point(x=1, y=2)
    """

    def __init__(self, cls: type[T], fields: Iterable[str],
                 consts: Mapping[str, Any] | None = None) -> None:  # fmt: skip
        fields = tuple(fields)
        consts = dict(consts or {})
        if not isinstance(cls, type):
            raise TypeError("SlotBuilder needs a class")
        if len(fields) + len(consts) > _MAX_FIELDS:
            raise ValueError(f"at most {_MAX_FIELDS} fields")
        if len(set(fields) | set(consts)) != len(fields) + len(consts):
            raise TypeError("a field is named twice")
        if cls.__new__ is not object.__new__ or cls.__itemsize__:
            raise TypeError(f"{cls.__name__} is not allocated by object.__new__")
        self._cls = cls
        self._sets = [_member(cls, name).__set__ for name in fields]
        self._consts = [(_member(cls, name).__set__, value) for name, value in consts.items()]

    def __call__(self, *values: Any) -> T:
        if len(values) != len(self._sets):
            raise TypeError(f"{self._cls.__name__} builder takes {len(self._sets)} values, "
                            f"got {len(values)}")  # fmt: skip
        obj = object.__new__(self._cls)
        for put, value in zip(self._sets, values, strict=True):
            put(obj, value)
        for put, value in self._consts:
            put(obj, value)
        return obj


def _member(cls: type, name: str) -> Any:
    descr = getattr(cls, name, None)
    if type(descr) is not MemberDescriptorType or not issubclass(cls, descr.__objclass__):
        raise TypeError(f"{name!r} is not a __slots__ field of {cls.__name__}")
    return descr
