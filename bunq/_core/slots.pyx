# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# A SlotBuilder keeps, per field it fills, the byte offset of that __slots__
# member in the instance (read from the class's member descriptor at
# construction), and the constant values with their offsets. A call allocates
# the instance with PyType_GenericAlloc (what object.__new__ does for a slotted
# class: zeroed, type referenced, tracked by the cyclic GC when the class is)
# and stores each value at its offset, a new reference each, as the member
# descriptor's __set__ would. Nothing Python runs between the allocation and
# the last store, so no collection sees a half-filled instance (and a NULL slot
# is what an unset __slots__ field is anyway).
#
# Why: the hot paths build a frozen slotted dataclass per job (the Job an add
# returns, the NewJob it admits). Its __init__ sets each field through
# object.__setattr__; the Python builders it replaced set a writable twin's
# slots one bytecode each and then switched the twin's __class__ (a type
# compatibility check per object). This is one C call per object.
"""Instances of a slotted class filled field by field in C, bypassing ``__init__``
and ``__setattr__`` (a frozen dataclass's fast constructor)."""

from types import GenericAlias, MemberDescriptorType

cimport cython
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF

from bunq._core._members cimport (
    PyMemberDescrObject,
    PyType_GenericAlloc,
    T_OBJECT_EX,
)

cdef enum:
    MAX_FIELDS = 64


@cython.final
cdef class SlotBuilder:
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

    cdef type cls
    cdef Py_ssize_t n, nconst
    cdef Py_ssize_t offsets[MAX_FIELDS]
    cdef Py_ssize_t const_offsets[MAX_FIELDS]
    cdef tuple consts

    __class_getitem__ = classmethod(GenericAlias)

    def __init__(self, type cls not None, fields, consts=None):
        cdef Py_ssize_t i
        fields = tuple(fields)
        consts = dict(consts or {})
        if len(fields) + len(consts) > MAX_FIELDS:
            raise ValueError(f"at most {MAX_FIELDS} fields")
        if len(set(fields) | set(consts)) != len(fields) + len(consts):
            raise TypeError("a field is named twice")
        if cls.__new__ is not object.__new__ or cls.__itemsize__:
            raise TypeError(f"{cls.__name__} is not allocated by object.__new__")
        for i, name in enumerate(fields):
            self.offsets[i] = _offset(cls, name)
        for i, name in enumerate(consts):
            self.const_offsets[i] = _offset(cls, name)
        self.cls = cls
        self.n = len(fields)
        self.nconst = len(consts)
        self.consts = tuple(consts.values())

    def __call__(self, *values):
        cdef Py_ssize_t i
        cdef PyObject* obj
        cdef PyObject* v
        if self.cls is None:
            raise TypeError("SlotBuilder used before __init__")
        if len(values) != self.n:
            raise TypeError(f"{self.cls.__name__} builder takes {self.n} values, "
                            f"got {len(values)}")
        obj = PyType_GenericAlloc(<PyTypeObject*>self.cls, 0)
        for i in range(self.n):
            v = <PyObject*>values[i]
            Py_INCREF(<object>v)
            (<PyObject**>((<char*>obj) + self.offsets[i]))[0] = v
        for i in range(self.nconst):
            v = <PyObject*>self.consts[i]
            Py_INCREF(<object>v)
            (<PyObject**>((<char*>obj) + self.const_offsets[i]))[0] = v
        out = <object>obj  # a new reference: drop the one PyType_GenericAlloc gave
        Py_DECREF(out)
        return out


cdef Py_ssize_t _offset(type cls, name) except -1:
    descr = getattr(cls, name, None)
    if (type(descr) is not MemberDescriptorType or not issubclass(cls, descr.__objclass__)
            or (<PyMemberDescrObject*>descr).d_member.type != T_OBJECT_EX):
        raise TypeError(f"{name!r} is not a __slots__ field of {cls.__name__}")
    return (<PyMemberDescrObject*>descr).d_member.offset
