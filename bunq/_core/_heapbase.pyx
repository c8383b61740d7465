# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# The engine shared by IndexedHeap (heap.pyx) and MinHeap (minheap.pyx): a
# 4-ary heap of C structs (`HeapSlot`, see _heapbase.pxd) in one PyMem block,
# plus per-key tables indexed by a small integer "key index":
#
#   _slots[0.._n)   HeapSlot(key=(major, minor), stamp, key_index), heap-ordered
#   _keys[ki]       the key object (None when ki is free)
#   _kstamp[ki]     stamp of the one live slot of ki; 0 when ki is free
#   _kvalue[ki]     the value pushed with that slot (priority or run_at)
#   _index          dict: live key -> ki
#
# Order: a slot pops first when (major, minor, stamp) is smallest. Each
# subclass folds its own order into the two signed 64-bit fields of HeapKey,
# so there is one comparison for both heaps (heap.pyx and minheap.pyx say
# how); stamps only break ties that an explicit seq can create. The key is
# exact (it decodes back to the pushed priority or run_at), so a pop reads
# what it returns from the slot it already has in cache; _kvalue is read only
# by priority_of / run_at_of and by MinHeap for the sign of a zero run_at.
#
# Why 4-ary: a pop does ~log4(n) levels instead of log2(n), each comparing four
# adjacent 32-byte slots (two cache lines), so it touches fewer lines than a
# binary heap and does half the dependent loads; pushes get cheaper too.
#
# Why stamps (generations): discard(key) is O(1). It only forgets the key
# (dict delete, stamp 0, ki back on the free list) and leaves the slot in the
# array; that slot is now *stale* because its stamp no longer equals
# _kstamp[its ki]. Stamps are unique and never reused, so a stale slot
# can never match again, even after ki is reused by a re-pushed key. Stale
# slots are counted exactly in _stale (+1 per discard, -1 when one is popped
# off the top), and pops/peeks drop stale slots lazily when they reach the root.
#
# Compaction: whenever _stale > compact_ratio * _n after a discard or a pop,
# the array is rebuilt from its live slots and re-heapified bottom-up, O(n).
# That keeps the array within 1/(1 - ratio) of the live count.
#
# Sharing costs no speed: push and pop each make one call into this module
# (through the vtable, as the base is not final), and every call inside it is
# direct because the .pxd declares the methods `inline`. bench/core.py and
# instruction counts (valgrind) show both heaps on par with their former
# stand-alone versions.
"""The 4-ary indexed heap engine under ``IndexedHeap`` and ``MinHeap``."""

cimport cython
from cpython.dict cimport PyDict_SetDefault
from cpython.list cimport PyList_GET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.number cimport PyNumber_Index

from types import GenericAlias

cdef long long _MAX_SEQ = 9223372036854775806  # 2**63 - 2, so -1 - seq fits too

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define bunq_prefetch(p) __builtin_prefetch(p)
    #else
    #define bunq_prefetch(p) ((void)0)
    #endif
    """
    void bunq_prefetch(const void* p) noexcept nogil


cdef inline bint _before(const HeapSlot* a, const HeapSlot* b) noexcept nogil:
    # True when a must pop before b. Written with & and | rather than `and`/
    # `or` so the compiler emits flag arithmetic instead of branches: with few
    # priority levels most comparisons tie on major, and those branches
    # mispredict (bench/core.py "IndexedHeap push+pop").
    return (a.key.major < b.key.major) | ((a.key.major == b.key.major) & (
        (a.key.minor < b.key.minor) | ((a.key.minor == b.key.minor) & (a.stamp < b.stamp))))


cdef class HeapBase:
    """Storage, sifting, lazy discard and compaction for the indexed heaps.

    Not usable on its own: ``IndexedHeap`` and ``MinHeap`` subclass it and
    add ``push``, ``pop``, ``peek`` and their value accessor.

    :param compact_ratio: rebuild the array once discarded slots exceed this
        fraction of it; ``0 <= compact_ratio <= 1``, else ``ValueError``.
    """

    __class_getitem__ = classmethod(GenericAlias)

    def __cinit__(self):
        if type(self) is HeapBase:
            raise TypeError("HeapBase is abstract; use IndexedHeap or MinHeap")
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
        PyMem_Free(self._kvalue)
        PyMem_Free(self._free)

    # -- for the subclasses ----------------------------------------------

    # boundscheck/wraparound off: the list stores below index with a ki this
    # class allocated; measured by bench/core.py "IndexedHeap push+pop".
    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _push(self, object key, long long major, object seq, bint newest_first,
                   HeapValue value) except -1:
        # push(): add key (ValueError if live) under HeapKey(major, minor),
        # minor being seq, or -1 - seq if newest_first. seq None takes the
        # admission counter; an explicit one must be in range(0, 2**63 - 1)
        # and raises the counter past it. A failure leaves no trace.
        cdef long long s
        cdef Py_ssize_t ki
        cdef HeapSlot* slot
        if seq is None:
            if self._next_seq > _MAX_SEQ:
                raise OverflowError("admission counter exhausted")
            s = self._next_seq
        else:
            seq = PyNumber_Index(seq)
            if seq < 0 or seq > _MAX_SEQ:
                raise ValueError(f"seq must be in range(0, 2**63 - 1), got {seq!r}")
            s = seq
        self._reserve_slot()
        ki = self._alloc_key()
        kio = self._kiobj[ki]
        # One hash lookup both checks for a live key and inserts this one.
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
        self._kvalue[ki] = value
        self._keys[ki] = key
        slot = &self._slots[self._n]
        slot.key.major = major
        slot.key.minor = -1 - s if newest_first else s
        slot.stamp = self._stamp
        slot.key_index = ki
        self._n += 1
        self._sift_up(self._n - 1)
        return 0

    cdef object _pop(self, HeapSlot* root):
        # pop(): remove the first live slot, copy it to *root and return its
        # key; IndexError naming the subclass if there is none.
        if not self._has_root():
            raise IndexError(f"pop from an empty {type(self).__name__}")
        root[0] = self._slots[0]
        key = self._take_root()
        self._maybe_compact()
        return key

    cdef bint _has_root(self) noexcept nogil:
        # Drop stale slots off the top; return whether a live root remains.
        # _stale == 0 skips the _kstamp load (a cache miss on big heaps).
        while self._stale and self._kstamp[self._slots[0].key_index] != self._slots[0].stamp:
            self._remove_root()
            self._stale -= 1
        return self._n > 0

    @cython.boundscheck(False)  # bench/core.py "IndexedHeap push+pop"
    @cython.wraparound(False)
    cdef object _take_root(self):
        # Pop the live root (the caller checked _has_root) and return its key.
        # Does not compact.
        cdef Py_ssize_t ki = self._slots[0].key_index
        # The key object was last touched at push time and is usually out of
        # cache; start loading it now so the miss overlaps the sift-down.
        bunq_prefetch(PyList_GET_ITEM(self._keys, ki))
        self._remove_root()
        key = self._keys[ki]
        self._keys[ki] = None
        del self._index[key]
        self._release_key(ki)
        return key

    cdef Py_ssize_t _live_index(self, object key) except -1:
        # The key index of live key; KeyError if absent.
        obj = self._index.get(key)
        if obj is None:
            raise KeyError(key)
        return obj

    cdef void _maybe_compact(self) noexcept nogil:
        if self._stale > self._ratio * self._n:
            self._compact()

    cdef long long _major_of(self, HeapValue value) noexcept:
        return 0  # overridden; only _check calls it

    # -- storage ---------------------------------------------------------

    cdef int _reserve_slot(self) except -1:
        cdef Py_ssize_t cap
        cdef HeapSlot* p
        if self._n < self._cap:
            return 0
        cap = self._cap * 2 if self._cap else 16
        p = <HeapSlot*>PyMem_Realloc(self._slots, cap * sizeof(HeapSlot))
        if p == NULL:
            raise MemoryError()
        self._slots = p
        self._cap = cap
        return 0

    cdef Py_ssize_t _alloc_key(self) except -1:
        cdef Py_ssize_t ki, cap
        cdef unsigned long long* st
        cdef HeapValue* va
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
            va = <HeapValue*>PyMem_Realloc(self._kvalue, cap * sizeof(HeapValue))
            if va == NULL:
                raise MemoryError()
            self._kvalue = va
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
        cdef HeapSlot* s = self._slots
        cdef HeapSlot item = s[i]
        cdef Py_ssize_t parent
        while i > 0:
            parent = (i - 1) >> 2
            if not _before(&item, &s[parent]):
                break
            s[i] = s[parent]
            i = parent
        s[i] = item

    cdef void _sift_down(self, Py_ssize_t i) noexcept nogil:
        cdef HeapSlot* s = self._slots
        cdef HeapSlot item = s[i]
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

    cdef void _compact(self) noexcept nogil:
        cdef HeapSlot* s = self._slots
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

    # -- public API shared by both heaps ---------------------------------

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
        cdef HeapSlot* s = self._slots
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
            if (self._index.get(key) != ki
                    or self._major_of(self._kvalue[ki]) != s[i].key.major):
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
