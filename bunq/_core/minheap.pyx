# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# The same layout as heap.pyx (read its block first): a 4-ary heap of C
# structs in one PyMem block plus per-key tables indexed by a "key index":
#
#   _slots[0.._n)   TimerSlot(run_at, seq, stamp, key_index), heap-ordered
#   _keys[ki]       the key object (None when ki is free)
#   _kstamp[ki]     stamp of the one live slot of ki; 0 when ki is free
#   _krun[ki]       run_at of that slot (for run_at_of)
#   _index          dict: live key -> ki
#
# 4-ary for the same cache reason as the priority heap: fewer levels per
# sift and four adjacent children per level.
#
# discard() is O(1): it forgets the key and leaves a stale slot, recognised
# because its stamp differs from _kstamp[ki] (stamps are never reused). Stale
# slots are counted in _stale and dropped lazily at the root; when
# _stale > compact_ratio * _n after a discard or a pop, the array is rebuilt
# from live slots and re-heapified bottom-up, O(n).
#
# Order: (run_at, seq, stamp) ascending. run_at must not be NaN (it would
# break the order), so push rejects it. Stamps only break ties that an
# explicit seq can create.
"""Indexed 4-ary min-heap of keys by ``(run_at, seq)`` for timers."""

cimport cython
from cpython.dict cimport PyDict_SetDefault
from cpython.list cimport PyList_GET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.number cimport PyNumber_Index

from types import GenericAlias

cdef long long _MAX_SEQ = 9223372036854775806  # 2**63 - 2, as in heap.pyx

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define bunq_prefetch(p) __builtin_prefetch(p)
    #else
    #define bunq_prefetch(p) ((void)0)
    #endif
    """
    void bunq_prefetch(const void* p) noexcept nogil


cdef inline bint _before(const TimerSlot* a, const TimerSlot* b) noexcept nogil:
    # True when a must pop before b; & and | instead of `and`/`or` so ties
    # cost flag arithmetic rather than mispredicted branches (see heap.pyx).
    return (a.run_at < b.run_at) | ((a.run_at == b.run_at) & (
        (a.seq < b.seq) | ((a.seq == b.seq) & (a.stamp < b.stamp))))


cdef long long _checked_seq(object seq) except? -1:
    cdef object s = PyNumber_Index(seq)
    if s < 0 or s > _MAX_SEQ:
        raise ValueError(f"seq must be in range(0, 2**63 - 1), got {s!r}")
    return s


@cython.final
cdef class MinHeap:
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

    __class_getitem__ = classmethod(GenericAlias)

    def __cinit__(self):
        self._keys = []
        self._kiobj = []
        self._index = {}

    def __init__(self, double compact_ratio=0.2):
        if not (0.0 <= compact_ratio <= 1.0):
            raise ValueError(f"compact_ratio must be in [0, 1], got {compact_ratio!r}")
        self._ratio = compact_ratio
        self._next_seq = 0
        self.clear()

    def __dealloc__(self):
        PyMem_Free(self._slots)
        PyMem_Free(self._kstamp)
        PyMem_Free(self._krun)
        PyMem_Free(self._free)

    # -- storage ---------------------------------------------------------

    cdef int _reserve_slot(self) except -1:
        cdef Py_ssize_t cap
        cdef TimerSlot* p
        if self._n < self._cap:
            return 0
        cap = self._cap * 2 if self._cap else 16
        p = <TimerSlot*>PyMem_Realloc(self._slots, cap * sizeof(TimerSlot))
        if p == NULL:
            raise MemoryError()
        self._slots = p
        self._cap = cap
        return 0

    cdef Py_ssize_t _alloc_key(self) except -1:
        cdef Py_ssize_t ki, cap
        cdef unsigned long long* st
        cdef double* ra
        cdef Py_ssize_t* fr
        if self._nfree:
            self._nfree -= 1
            return self._free[self._nfree]
        ki = len(self._keys)
        if ki == self._kcap:
            cap = self._kcap * 2 if self._kcap else 16
            st = <unsigned long long*>PyMem_Realloc(self._kstamp, cap * sizeof(unsigned long long))
            if st == NULL:
                raise MemoryError()
            self._kstamp = st
            ra = <double*>PyMem_Realloc(self._krun, cap * sizeof(double))
            if ra == NULL:
                raise MemoryError()
            self._krun = ra
            fr = <Py_ssize_t*>PyMem_Realloc(self._free, cap * sizeof(Py_ssize_t))
            if fr == NULL:
                raise MemoryError()
            self._free = fr
            self._kcap = cap
        self._keys.append(None)
        self._kiobj.append(ki)
        self._kstamp[ki] = 0
        return ki

    cdef void _release_key(self, Py_ssize_t ki) noexcept:
        self._kstamp[ki] = 0
        self._free[self._nfree] = ki
        self._nfree += 1

    # -- heap mechanics (hole-moving sifts: one copy per level, no swaps) --

    cdef void _sift_up(self, Py_ssize_t i) noexcept nogil:
        cdef TimerSlot* s = self._slots
        cdef TimerSlot item = s[i]
        cdef Py_ssize_t parent
        while i > 0:
            parent = (i - 1) >> 2
            if not _before(&item, &s[parent]):
                break
            s[i] = s[parent]
            i = parent
        s[i] = item

    cdef void _sift_down(self, Py_ssize_t i) noexcept nogil:
        cdef TimerSlot* s = self._slots
        cdef TimerSlot item = s[i]
        cdef Py_ssize_t n = self._n
        cdef Py_ssize_t c, j, end, best
        while True:
            c = 4 * i + 1
            if c >= n:
                break
            best = c
            end = c + 4 if c + 4 < n else n
            for j in range(c + 1, end):
                if _before(&s[j], &s[best]):
                    best = j
            if not _before(&s[best], &item):
                break
            s[i] = s[best]
            i = best
        s[i] = item

    cdef void _remove_root(self) noexcept nogil:
        self._n -= 1
        if self._n > 0:
            self._slots[0] = self._slots[self._n]
            self._sift_down(0)

    cdef void _drop_stale_top(self) noexcept nogil:
        # _stale == 0 skips the _kstamp load (a cache miss on big heaps).
        while self._stale and self._kstamp[self._slots[0].key_index] != self._slots[0].stamp:
            self._remove_root()
            self._stale -= 1

    cdef void _maybe_compact(self) noexcept nogil:
        if self._stale > self._ratio * self._n:
            self._compact()

    cdef void _compact(self) noexcept nogil:
        cdef TimerSlot* s = self._slots
        cdef Py_ssize_t i, j = 0
        for i in range(self._n):
            if self._kstamp[s[i].key_index] == s[i].stamp:
                s[j] = s[i]
                j += 1
        self._n = j
        self._stale = 0
        i = (j - 2) // 4
        while i >= 0:
            self._sift_down(i)
            i -= 1

    # boundscheck/wraparound off: indexes come from this class's own key
    # tables; measured by bench/core.py "MinHeap push+pop".
    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef object _take_root(self):
        # Pop the live root (the caller dropped stale slots and checked _n).
        cdef Py_ssize_t ki = self._slots[0].key_index
        cdef double run_at = self._slots[0].run_at
        # Start loading the (usually cold) key object; the miss overlaps the sift.
        bunq_prefetch(PyList_GET_ITEM(self._keys, ki))
        self._remove_root()
        key = self._keys[ki]
        self._keys[ki] = None
        del self._index[key]
        self._release_key(ki)
        return (key, run_at)

    # -- public API ------------------------------------------------------

    @cython.boundscheck(False)  # bench/core.py "MinHeap push+pop"
    @cython.wraparound(False)
    def push(self, key, double run_at, seq=None):
        """Add ``key`` due at ``run_at``; raise ``ValueError`` if present.

        :param run_at: due time in the caller's clock; NaN is a ``ValueError``.
        :param seq: tie-break among equal ``run_at``; defaults to an internal
            admission counter. An explicit seq (``0 <= seq < 2**63 - 1``, else
            ``ValueError``) raises the counter to ``seq + 1``.

        Complexity: O(log n).
        """
        cdef long long s
        cdef Py_ssize_t ki
        cdef TimerSlot* slot
        if run_at != run_at:
            raise ValueError("run_at must not be NaN")
        if seq is None:
            if self._next_seq > _MAX_SEQ:
                raise OverflowError("admission counter exhausted")
            s = self._next_seq
        else:
            s = _checked_seq(seq)
        self._reserve_slot()
        ki = self._alloc_key()
        kio = self._kiobj[ki]
        # One hash lookup both checks for a present key and inserts this one.
        try:
            found = <object>PyDict_SetDefault(self._index, key, kio)
        except BaseException:  # unhashable key, or its __eq__ raised
            self._release_key(ki)
            raise
        if found is not kio:
            self._release_key(ki)
            raise ValueError(f"key already in heap: {key!r}")
        if s >= self._next_seq:
            self._next_seq = s + 1
        self._stamp += 1
        self._kstamp[ki] = self._stamp
        self._krun[ki] = run_at
        self._keys[ki] = key
        slot = &self._slots[self._n]
        slot.run_at = run_at
        slot.seq = s
        slot.stamp = self._stamp
        slot.key_index = ki
        self._n += 1
        self._sift_up(self._n - 1)

    def pop(self):
        """Remove and return the earliest ``(key, run_at)``; ``IndexError`` if empty.

        Complexity: O(log n) amortised.
        """
        self._drop_stale_top()
        if self._n == 0:
            raise IndexError("pop from an empty MinHeap")
        item = self._take_root()
        self._maybe_compact()
        return item

    def peek(self):
        """Return the earliest ``(key, run_at)``; ``IndexError`` if empty.

        Complexity: O(1) amortised.
        """
        self._drop_stale_top()
        if self._n == 0:
            raise IndexError("peek into an empty MinHeap")
        return (self._keys[self._slots[0].key_index], self._slots[0].run_at)

    def pop_due(self, double now, limit=None):
        """Pop every entry with ``run_at <= now``, earliest first.

        :param limit: pop at most this many (``None``: no limit); a negative
            limit is a ``ValueError``.
        :returns: list of ``(key, run_at)`` in pop order.

        Complexity: O(k log n) for k popped entries.
        """
        cdef Py_ssize_t lim = -1
        out = []
        if limit is not None:
            lim_obj = PyNumber_Index(limit)
            if lim_obj < 0:
                raise ValueError(f"limit must be >= 0, got {lim_obj!r}")
            lim = min(lim_obj, self._n)
        while lim != 0:
            self._drop_stale_top()
            if self._n == 0 or not self._slots[0].run_at <= now:
                break
            out.append(self._take_root())
            lim -= 1
        self._maybe_compact()
        return out

    def discard(self, key):
        """Forget ``key``; return whether it was present.

        The slot stays in the array as a tombstone until it reaches the top
        or a compaction runs; re-pushing the key at once is allowed.

        Complexity: O(1) amortised.
        """
        cdef Py_ssize_t ki
        obj = self._index.pop(key, None)
        if obj is None:
            return False
        ki = obj
        self._keys[ki] = None
        self._release_key(ki)
        self._stale += 1
        self._maybe_compact()
        return True

    def run_at_of(self, key):
        """Return the ``run_at`` of ``key``; raise ``KeyError`` if absent.

        Complexity: O(1).
        """
        obj = self._index.get(key)
        if obj is None:
            raise KeyError(key)
        return self._krun[<Py_ssize_t>obj]

    def clear(self):
        """Remove every entry. The admission counter keeps counting.

        Complexity: O(n).
        """
        self._n = 0
        self._stale = 0
        self._nfree = 0
        self._index.clear()
        del self._keys[:]
        del self._kiobj[:]

    def __len__(self):
        return len(self._index)

    def __contains__(self, key):
        return key in self._index

    def _check(self):
        """Verify every invariant; raise ``AssertionError`` on a violation.

        Complexity: O(n).
        """
        cdef Py_ssize_t i, ki, nkeys = len(self._keys)
        cdef Py_ssize_t live = 0, stale = 0
        cdef TimerSlot* s = self._slots
        seen = set()
        for i in range(self._n):
            if i > 0 and _before(&s[i], &s[(i - 1) >> 2]):
                raise AssertionError(f"heap order violated at slot {i}")
            ki = s[i].key_index
            if not 0 <= ki < nkeys:
                raise AssertionError(f"slot {i} has key index {ki} out of range")
            if self._kstamp[ki] != s[i].stamp:
                stale += 1
                continue
            live += 1
            if ki in seen:
                raise AssertionError(f"key index {ki} has two live slots")
            seen.add(ki)
            key = self._keys[ki]
            if self._index.get(key) != ki or self._krun[ki] != s[i].run_at:
                raise AssertionError(f"slot {i} disagrees with the key tables")
        if stale != self._stale or live != len(self._index):
            raise AssertionError(f"counts: stale {stale}/{self._stale}, live {live}")
        if stale > self._ratio * self._n:
            raise AssertionError("compaction overdue")
        if self._nfree + live != nkeys:
            raise AssertionError("free list does not cover the unused key indexes")
        for i in range(self._nfree):
            ki = self._free[i]
            if self._kstamp[ki] != 0 or self._keys[ki] is not None:
                raise AssertionError(f"free key index {ki} still in use")
