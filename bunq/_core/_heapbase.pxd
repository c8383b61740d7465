# The C contract of bunq._core._heapbase: the 4-ary indexed heap engine that
# IndexedHeap (heap.pxd) and MinHeap (minheap.pxd) subclass. A subclass only
# maps its arguments to a HeapKey and a HeapValue; everything else is here.


cdef struct HeapKey:
    # Pop order is (major, minor) ascending, as signed 64-bit integers.
    long long major               # IndexedHeap: ~priority; MinHeap: run_at as an ordered int
    long long minor               # seq, or -1 - seq to pop newest first (IndexedHeap's LIFO)


cdef struct HeapSlot:
    HeapKey key
    unsigned long long stamp      # push stamp = generation; last tie-break
    Py_ssize_t key_index          # index into _keys / _kstamp / _kvalue


cdef union HeapValue:
    # What the caller pushed, for priority_of / run_at_of.
    long long i                   # IndexedHeap: priority
    double f                      # MinHeap: run_at (the exact double, -0.0 included)


cdef class HeapBase:
    cdef HeapSlot* _slots         # 4-ary heap array, live and stale slots
    cdef Py_ssize_t _n            # slots in use
    cdef Py_ssize_t _cap          # slots allocated
    cdef Py_ssize_t _stale        # slots whose stamp no longer matches its key
    cdef unsigned long long* _kstamp  # key index -> stamp of its live slot, 0 if free
    cdef HeapValue* _kvalue       # key index -> value pushed with its live slot
    cdef Py_ssize_t* _free        # stack of free key indexes
    cdef Py_ssize_t _nfree
    cdef Py_ssize_t _kcap         # key-index arrays allocated (>= len(_keys))
    cdef list _keys               # key index -> key object, None if free
    cdef list _kiobj              # key index -> cached int object of that index
    cdef dict _index              # live key -> key index (as int)
    cdef unsigned long long _stamp    # last stamp handed out
    cdef long long _next_seq      # admission counter
    cdef double _ratio            # compaction threshold (stale / slots)

    # Every method but _major_of is `inline`: Cython then calls it directly
    # inside _heapbase.pyx (it would go through the vtable otherwise, as this
    # class is not final, and the C compiler could not inline the sifts).
    # The subclasses, compiled separately, call through the vtable.

    # Used by the subclasses.
    cdef inline int _push(self, object key, long long major, object seq, bint newest_first,
                          HeapValue value) except -1
    cdef inline object _pop(self, HeapSlot* root)
    cdef inline bint _has_root(self) noexcept nogil
    cdef inline object _take_root(self)
    cdef inline Py_ssize_t _live_index(self, object key) except -1
    cdef inline void _maybe_compact(self) noexcept nogil
    # Overridden by each subclass: the HeapKey.major that value must have.
    cdef long long _major_of(self, HeapValue value) noexcept

    # Internal mechanics.
    cdef inline int _reserve_slot(self) except -1
    cdef inline Py_ssize_t _alloc_key(self) except -1
    cdef inline void _release_key(self, Py_ssize_t ki) noexcept
    cdef inline void _sift_up(self, Py_ssize_t i) noexcept nogil
    cdef inline void _sift_down(self, Py_ssize_t i) noexcept nogil
    cdef inline void _remove_root(self) noexcept nogil
    cdef inline void _compact(self) noexcept nogil
