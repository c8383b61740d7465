# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# MinHeap is HeapBase (_heapbase.pyx, read its block first): a 4-ary heap of
# 32-byte slots ordered by HeapKey (major, minor, then push stamp)
# ascending, with O(1) lazy discard by stamps and compaction past
# compact_ratio. This module only maps the timer order onto that key:
#
#   major = run_at as an int64 that orders exactly like the double (see
#           _ordered below). The map is one-to-one except that -0.0 and 0.0,
#           which are equal, share 0; so pop, peek and pop_due decode run_at
#           from the slot they already hold and read _kvalue (the pushed
#           double) only to give a zero its sign back.
#   minor = seq.
#
# run_at must not be NaN (it has no place in the order), so push rejects it.
"""Indexed 4-ary min-heap of keys by ``(run_at, seq)`` for timers."""

cimport cython
from cpython.number cimport PyNumber_Index

from bunq._core._heapbase cimport HeapBase, HeapSlot, HeapValue


cdef inline long long _ordered(double t) noexcept nogil:
    # Map a non-NaN double to an int64 with the same order. The IEEE bits of
    # a non-negative double already order as integers; for a negative one,
    # flipping the 63 magnitude bits reverses their order and keeps them below
    # every non-negative. -0.0 == 0.0, so it is mapped as 0.0.
    cdef HeapValue bits
    bits.f = t
    if t == 0.0:
        bits.i = 0
    if bits.i < 0:
        return bits.i ^ 0x7FFFFFFFFFFFFFFFLL
    return bits.i


cdef inline double _run_at(MinHeap h, const HeapSlot* slot) noexcept:
    # The run_at of a live or just-popped slot: _ordered undone, except that
    # a zero reads its sign from _kvalue (which keeps a popped key's value
    # until a push reuses its key index).
    cdef HeapValue bits
    cdef long long major = slot.key.major
    if major == 0:
        return h._kvalue[slot.key_index].f
    bits.i = major ^ 0x7FFFFFFFFFFFFFFFLL if major < 0 else major
    return bits.f


@cython.final
cdef class MinHeap(HeapBase):
    """Min-queue of unique hashable keys by ``(run_at, seq)``, O(1) discard.

    Pop order: ``run_at`` ascending, then ``seq`` ascending (admission order
    by default), then push order. ``len`` counts live keys only.

    :param compact_ratio: rebuild the array once discarded slots exceed this
        fraction of it; ``0 <= compact_ratio <= 1``, else ``ValueError``.

    Complexity: push/pop O(log n), peek amortised O(1), discard O(1)
    amortised, pop_due O(k log n) for k popped keys.

    >>> t = MinHeap()
    >>> t.push("b", 20.0); t.push("a", 10.0); t.push("c", 30.0)
    >>> t.pop_due(25.0)
    [('a', 10.0), ('b', 20.0)]
    """

    # Restated so that embedsignature puts the signature in the class docstring.
    def __init__(self, double compact_ratio=0.2):
        HeapBase.__init__(self, compact_ratio)

    def push(self, key, double run_at, seq=None):
        """Add ``key`` due at ``run_at``; raise ``ValueError`` if present.

        :param run_at: due time in the caller's clock; NaN is a ``ValueError``.
        :param seq: tie-break among equal ``run_at``; defaults to an internal
            admission counter. An explicit seq (``0 <= seq < 2**63 - 1``, else
            ``ValueError``) raises the counter to ``seq + 1``.

        Complexity: O(log n).
        """
        cdef HeapValue value
        if run_at != run_at:
            raise ValueError("run_at must not be NaN")
        value.f = run_at
        self._push(key, _ordered(run_at), seq, False, value)

    def pop(self):
        """Remove and return the earliest ``(key, run_at)``; ``IndexError`` if empty.

        Complexity: O(log n) amortised.
        """
        cdef HeapSlot root
        key = self._pop(&root)
        return (key, _run_at(self, &root))

    def peek(self):
        """Return the earliest ``(key, run_at)``; ``IndexError`` if empty.

        Complexity: O(1) amortised.
        """
        if not self._has_root():
            raise IndexError("peek into an empty MinHeap")
        return (self._keys[self._slots[0].key_index], _run_at(self, &self._slots[0]))

    def pop_due(self, double now, limit=None):
        """Pop every entry with ``run_at <= now``, earliest first.

        :param limit: pop at most this many (``None``: no limit); a negative
            limit is a ``ValueError``.
        :returns: list of ``(key, run_at)`` in pop order.

        Complexity: O(k log n) for k popped entries.
        """
        cdef Py_ssize_t lim = -1
        cdef double run_at
        out = []
        if limit is not None:
            lim_obj = PyNumber_Index(limit)
            if lim_obj < 0:
                raise ValueError(f"limit must be >= 0, got {lim_obj!r}")
            lim = min(lim_obj, self._n)
        while lim != 0 and self._has_root():
            run_at = _run_at(self, &self._slots[0])
            if not run_at <= now:
                break
            out.append((self._take_root(), run_at))
            lim -= 1
        self._maybe_compact()
        return out

    def run_at_of(self, key):
        """Return the ``run_at`` of ``key``; raise ``KeyError`` if absent.

        Complexity: O(1).
        """
        return self._kvalue[self._live_index(key)].f

    cdef long long _major_of(self, HeapValue value) noexcept:
        return _ordered(value.f)
