# The C contract of bunq._core.lru: the slot chain and typed attributes.

cdef struct Chain:
    # A doubly linked list of slot numbers threaded through two C arrays;
    # next[] also threads the free slots (next[i] is the next free slot).
    Py_ssize_t* prev              # prev[i]: older neighbour, -1 at the head
    Py_ssize_t* next              # next[i]: newer neighbour, -1 at the tail
    Py_ssize_t head               # oldest slot, -1 when empty
    Py_ssize_t tail               # newest slot, -1 when empty
    Py_ssize_t free_head          # first free slot, -1 when none
    Py_ssize_t used               # slots ever handed out (== len of the lists)
    Py_ssize_t cap                # slots allocated in prev/next


cdef class _SlotKeys:
    # What LRUCache and BoundedSet share: the chain, the key index and list.
    cdef Chain _chain
    cdef dict _index              # key -> slot number (cached int object)
    cdef list _keys               # slot -> key, None when free
    cdef list _slotobj            # slot -> cached int object of that slot
    cdef Py_ssize_t _maxsize
    cdef Py_ssize_t _evictions


cdef class LRUCache(_SlotKeys):
    cdef list _values             # slot -> value, None when free

    cdef Py_ssize_t _alloc_slot(self) except -1


cdef class BoundedSet(_SlotKeys):
    cdef Py_ssize_t _batch        # keys evicted per overflow

    cdef int _evict_oldest(self) except -1
