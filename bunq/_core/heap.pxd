# The C contract of bunq._core.heap: slot layout and typed attributes, so a
# compiled caller (a future shard) can `cimport` the heap and skip Python calls.

cdef struct HeapSlot:
    long long priority            # higher pops first
    long long order               # FIFO: seq; LIFO: -1 - seq (smaller pops first)
    unsigned long long stamp      # push stamp = generation; last tie-break
    Py_ssize_t key_index          # index into _keys / _kstamp / _kprio


cdef class IndexedHeap:
    cdef HeapSlot* _slots         # 4-ary heap array, live and stale slots
    cdef Py_ssize_t _n            # slots in use
    cdef Py_ssize_t _cap          # slots allocated
    cdef Py_ssize_t _stale        # slots whose stamp no longer matches its key
    cdef unsigned long long* _kstamp  # key index -> stamp of its live slot, 0 if free
    cdef long long* _kprio        # key index -> priority of its live slot
    cdef Py_ssize_t* _free        # stack of free key indexes
    cdef Py_ssize_t _nfree
    cdef Py_ssize_t _kcap         # key-index arrays allocated (>= len(_keys))
    cdef list _keys               # key index -> key object, None if free
    cdef list _kiobj              # key index -> cached int object of that index
    cdef dict _index              # live key -> key index (as int)
    cdef unsigned long long _stamp    # last stamp handed out
    cdef long long _next_seq      # admission counter
    cdef double _ratio            # compaction threshold (stale / slots)

    cdef int _reserve_slot(self) except -1
    cdef Py_ssize_t _alloc_key(self) except -1
    cdef void _release_key(self, Py_ssize_t ki) noexcept
    cdef void _sift_up(self, Py_ssize_t i) noexcept nogil
    cdef void _sift_down(self, Py_ssize_t i) noexcept nogil
    cdef void _remove_root(self) noexcept nogil
    cdef void _drop_stale_top(self) noexcept nogil
    cdef void _maybe_compact(self) noexcept nogil
    cdef void _compact(self) noexcept nogil
