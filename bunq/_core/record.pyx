# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# One C struct per job: PyObject_HEAD and an array of 29 object pointers, one
# per field, in the order of FIELDS (the pure twin's __slots__). Every field is
# a Python object (no C ints): the engine reads and writes them from Python,
# where a C int would be boxed anew on every read, and some (started_at,
# expire_at, ...) are None at times.
#
# Python sees the fields through the same member descriptors (T_OBJECT_EX)
# that __slots__ creates, installed in the type's dict at import by _install:
# CPython 3.11+ specialises attribute loads and stores on those to a direct
# load at a fixed offset (LOAD_ATTR_SLOT), where Cython's `cdef public`
# properties cost a descriptor call each (about 2.5x the time per access, and
# the engine touches a record a few dozen times per job). As with __slots__, a
# deleted field is NULL and reads as AttributeError: the C code here reads
# fields only through _get, which checks.
#
# Why no_gc: the type has no tp_traverse/tp_clear and its instances are never
# tracked by the cyclic GC, so collections no longer visit every held job (the
# engine keeps one record per job, 29 references each). That is safe only if
# a record can never be part of a reference cycle, as the GC could then
# neither see nor break it (the cycle would leak; memory stays valid). A
# record reaches only: str (id, queue, name, owner, token, error), bytes
# (data), ints and None, bools, the caller's frozen job options (str, int,
# bool and tuple-of-str fields and a frozen backoff), job-state and
# failure-reason enum members, and a list of frozen attempts (ints, str, None,
# an enum member). None of those refers to a record: only the engine's own
# tables (shard dicts, heaps, the finished index) do, and no record reaches
# them. The enum members reach their classes and so module globals, which are
# not collected while the interpreter runs.
"""The engine's per-job record, compiled and untracked by the cyclic GC."""

from types import GenericAlias

cimport cython
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_XDECREF, Py_XINCREF

from bunq._core._members cimport (
    PyDescr_NewMember,
    PyMemberDef,
    PyType_Modified,
    T_OBJECT_EX,
)


FIELDS = (
    "id", "queue", "name", "data", "opts", "state", "priority", "lifo", "group", "seq",
    "eseq", "run_at", "created_at", "started_at", "finished_at", "attempts", "stalls",
    "token", "owner", "lease_until", "expire_at", "pending", "progress", "error",
    "reason", "dlq_at", "dlq_retries", "history", "saved",
)

# Indexes into Record._f, in FIELDS order (checked against FIELDS by _install).
cdef enum:
    _ID = 0
    _QUEUE = 1
    _NAME = 2
    _DATA = 3
    _OPTS = 4
    _STATE = 5
    _PRIORITY = 6
    _LIFO = 7
    _GROUP = 8
    _SEQ = 9
    _ESEQ = 10
    _RUN_AT = 11
    _CREATED_AT = 12
    _STARTED_AT = 13
    _FINISHED_AT = 14
    _ATTEMPTS = 15
    _STALLS = 16
    _TOKEN = 17
    _OWNER = 18
    _LEASE_UNTIL = 19
    _EXPIRE_AT = 20
    _PENDING = 21
    _PROGRESS = 22
    _ERROR = 23
    _REASON = 24
    _DLQ_AT = 25
    _DLQ_RETRIES = 26
    _HISTORY = 27
    _SAVED = 28
    _NFIELDS = 29


cdef inline void _set(Record self, int i, object value) noexcept:
    cdef PyObject* old = self._f[i]
    Py_XINCREF(<PyObject*>value)
    self._f[i] = <PyObject*>value
    Py_XDECREF(old)


cdef inline object _get(Record self, int i):
    cdef PyObject* p = self._f[i]
    if p == NULL:
        raise AttributeError(f"'Record' object has no attribute '{FIELDS[i]}'")
    return <object>p


# The options fields a record copies (priority, lifo, group, ttl), kept for the last
# options object seen: a bulk admits its jobs with one options object, and four
# uncached attribute reads per record were a third of its construction. One tuple,
# replaced whole, so records built on two threads at once never pair one object with
# another's fields; holding the object keeps its id from being reused. Sound because
# job options are frozen (see above).
cdef tuple _last_opts = (object(), None, None, None, None)


@cython.no_gc
@cython.final
cdef class Record:
    """One job as the engine keeps it (mutable; guarded by its shard's lock).

    ``seq`` is the admission number (time-ordered, as in the SQL backends);
    ``eseq`` is the number given when the job last entered a ready lane, which
    is what orders ready jobs of equal priority. ``history`` is ``None`` until
    the first finished attempt. ``saved`` says whether the write-behind store
    already holds the row (so later changes can be written as updates).
    ``opts`` is read for ``priority``, ``lifo``, ``group`` and ``ttl``;
    ``state`` is the engine's initial state (``_core`` knows no job states).

    >>> from types import SimpleNamespace
    >>> opts = SimpleNamespace(priority=2, lifo=True, group=None, ttl=50)
    >>> r = Record("j1", "q", "n", b"", opts, "waiting", 7, 100, 120)
    >>> r.order_key(), r.signed_seq(), r.expire_at
    ((-2, -120, -7), -7, 150)
    """

    __class_getitem__ = classmethod(GenericAlias)

    def __init__(self, id, queue, name, data, opts, state, seq, now, run_at):
        global _last_opts
        cdef tuple seen = _last_opts
        if seen[0] is not opts:
            seen = (opts, opts.priority, opts.lifo, opts.group, opts.ttl)
            _last_opts = seen
        ttl = seen[4]
        _set(self, _ID, id)
        _set(self, _QUEUE, queue)
        _set(self, _NAME, name)
        _set(self, _DATA, data)
        _set(self, _OPTS, opts)
        _set(self, _STATE, state)
        _set(self, _PRIORITY, seen[1])
        _set(self, _LIFO, seen[2])
        _set(self, _GROUP, seen[3])
        _set(self, _SEQ, seq)
        _set(self, _ESEQ, 0)
        _set(self, _RUN_AT, run_at)
        _set(self, _CREATED_AT, now)
        _set(self, _STARTED_AT, None)
        _set(self, _FINISHED_AT, None)
        _set(self, _ATTEMPTS, 0)
        _set(self, _STALLS, 0)
        _set(self, _TOKEN, None)
        _set(self, _OWNER, "")
        _set(self, _LEASE_UNTIL, 0)
        _set(self, _EXPIRE_AT, None if ttl is None else now + ttl)
        _set(self, _PENDING, 0)
        _set(self, _PROGRESS, 0)
        _set(self, _ERROR, None)
        _set(self, _REASON, None)
        _set(self, _DLQ_AT, None)
        _set(self, _DLQ_RETRIES, 0)
        _set(self, _HISTORY, None)
        _set(self, _SAVED, False)

    def __dealloc__(self):
        cdef int i
        for i in range(_NFIELDS):
            Py_XDECREF(self._f[i])
            self._f[i] = NULL

    def __repr__(self):
        return (f"Rec({_get(self, _ID)!r}, {_get(self, _QUEUE)!r}, "
                f"{_get(self, _STATE).value}, attempts={_get(self, _ATTEMPTS)})")

    def add_attempt(self, attempt):
        """Append a finished attempt to the history (ordered by time, then number)."""
        history = _get(self, _HISTORY)
        if history is None:
            _set(self, _HISTORY, [attempt])
        else:
            history.append(attempt)

    def order_key(self):
        """Sort key of the SQL ready order: priority DESC, ord_at, seq (LIFO negated)."""
        priority, run_at, seq = _get(self, _PRIORITY), _get(self, _RUN_AT), _get(self, _SEQ)
        if _get(self, _LIFO):
            return (-priority, -run_at, -seq)
        return (-priority, run_at, seq)

    def signed_seq(self):
        """Admission number as the SQL backends store it (negative for LIFO jobs)."""
        seq = _get(self, _SEQ)
        return -seq if _get(self, _LIFO) else seq


cdef PyMemberDef _members[_NFIELDS]  # static: the descriptors point into it
cdef list _names = [name.encode("ascii") for name in FIELDS]  # keeps member names alive


cdef _install():
    # Put one member descriptor per field in the type's dict (see the top).
    cdef Record probe = Record.__new__(Record)
    cdef PyTypeObject* tp = <PyTypeObject*>Record
    cdef dict namespace = <dict>tp.tp_dict
    cdef int i
    assert len(FIELDS) == _NFIELDS and FIELDS[_SAVED] == "saved" and FIELDS[_ID] == "id"
    cdef bytes name
    for i in range(_NFIELDS):
        name = _names[i]
        _members[i].name = name
        _members[i].type = T_OBJECT_EX
        _members[i].offset = <char*>&probe._f[i] - <char*><PyObject*>probe
        _members[i].flags = 0
        _members[i].doc = NULL
        namespace[FIELDS[i]] = PyDescr_NewMember(tp, &_members[i])
    PyType_Modified(tp)


_install()
