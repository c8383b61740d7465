# The C contract of bunq._core.heap. The slot layout, key tables and heap
# mechanics live in _heapbase.pxd; a compiled caller (a future shard) can
# `cimport` either module and skip Python calls.

from bunq._core._heapbase cimport HeapBase, HeapValue


cdef class IndexedHeap(HeapBase):
    cdef long long _major_of(self, HeapValue value) noexcept
