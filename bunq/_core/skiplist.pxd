# The C contract of bunq._core.skiplist: node layout and typed attributes.

from cpython.ref cimport PyObject
from libc.stdint cimport uint32_t


cdef struct SkipNode


cdef struct SkipLink:
    SkipNode* next                # NULL past the last node
    Py_ssize_t span               # rank(next) - rank(this node); rank(NULL) = len


cdef struct SkipNode:
    double score
    unsigned long long seq        # insertion order; breaks score ties
    PyObject* key                 # borrowed: the _index dict owns the key
    int height                    # number of links, 1.._max_level
    SkipLink* links               # `height` links, allocated with the node


cdef class SkipList:
    cdef SkipNode* _head          # sentinel of rank 0 with MAX_HEIGHT links
    cdef int _max_level
    cdef int _level               # head links in use, >= 1
    cdef Py_ssize_t _len
    cdef uint32_t _rng            # xorshift32 state, never 0
    cdef unsigned long long _seq  # next insertion number
    cdef dict _index              # key -> node address (int)
    cdef SkipNode* _tail[32]      # last node on each level below _level (head if none)

    cdef int _random_height(self) noexcept nogil
    cdef SkipNode* _find(self, double score, unsigned long long seq,
                         SkipNode** update) noexcept nogil
    cdef void _unlink(self, SkipNode* x, SkipNode** update) noexcept nogil
    cdef void _free_nodes(self) noexcept nogil
