# The C contract of bunq._core.minheap. The slot layout, key tables and heap
# mechanics live in _heapbase.pxd.

from bunq._core._heapbase cimport HeapBase, HeapValue


cdef class MinHeap(HeapBase):
    cdef long long _major_of(self, HeapValue value) noexcept
