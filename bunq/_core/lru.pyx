# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# uvloop's lru.pyx wraps an OrderedDict; that costs a Python method call
# (move_to_end) per hit, which is most of what a compiled cache can save. Here
# each entry lives in a numbered *slot*:
#
#   _index        dict: key -> slot number (a cached int object per slot)
#   _keys[i]      key of slot i     } Python lists, so every reference stays
#   _values[i]    value of slot i   } visible to the cycle collector
#   _chain        C arrays prev[]/next[] linking the live slots from oldest
#                 (head) to newest (tail); free slots are threaded through
#                 next[] as a free list
#
# A hit is one dict lookup plus four C stores to move the slot to the tail.
# A put is one dict.setdefault() (plus a delete when it evicts): when the
# cache is full the candidate slot is the LRU one, recycled in place. So
# there are at most maxsize slots and no per-entry allocation once warm.
#
# BoundedSet uses the same chain in FIFO order (no move on re-add) and
# evicts a batch of the oldest keys when it overflows, like bunqueue's
# completed-jobs set: a batch amortises the eviction walk and keeps the set
# from evicting on every add once full.
#
# Both subclass _SlotKeys, which holds the chain, _index and _keys and the
# methods that only read them (clear, len, in, evictions, _check). The hot
# methods stay in the final subclasses and use the chain_* functions and
# the attributes directly, so the base costs them nothing.
"""LRU cache and FIFO-bounded set over a slot chain."""

cimport cython
from cpython.dict cimport PyDict_GetItemWithError, PyDict_SetDefault
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.number cimport PyNumber_Index
from cpython.ref cimport PyObject

cdef extern from "Python.h":
    Py_ssize_t _dict_size "PyDict_GET_SIZE"(object d) noexcept

import sys
from types import GenericAlias


# -- the slot chain -------------------------------------------------------

cdef void chain_reset(Chain* c) noexcept:
    c.head = -1
    c.tail = -1
    c.free_head = -1
    c.used = 0


cdef void chain_free(Chain* c) noexcept:
    PyMem_Free(c.prev)
    PyMem_Free(c.next)
    c.prev = NULL
    c.next = NULL
    c.cap = 0


cdef Py_ssize_t chain_alloc(Chain* c) except -1:
    # Return a free slot number; a fresh one equals the old c.used.
    cdef Py_ssize_t i, cap
    cdef Py_ssize_t* p
    if c.free_head != -1:
        i = c.free_head
        c.free_head = c.next[i]
        return i
    if c.used == c.cap:
        cap = c.cap * 2 if c.cap else 8
        p = <Py_ssize_t*>PyMem_Realloc(c.prev, cap * sizeof(Py_ssize_t))
        if p == NULL:
            raise MemoryError()
        c.prev = p
        p = <Py_ssize_t*>PyMem_Realloc(c.next, cap * sizeof(Py_ssize_t))
        if p == NULL:
            raise MemoryError()
        c.next = p
        c.cap = cap
    i = c.used
    c.used += 1
    return i


cdef inline void chain_append(Chain* c, Py_ssize_t i) noexcept:
    c.prev[i] = c.tail
    c.next[i] = -1
    if c.tail != -1:
        c.next[c.tail] = i
    else:
        c.head = i
    c.tail = i


cdef inline void chain_unlink(Chain* c, Py_ssize_t i) noexcept:
    cdef Py_ssize_t p = c.prev[i], n = c.next[i]
    if p != -1:
        c.next[p] = n
    else:
        c.head = n
    if n != -1:
        c.prev[n] = p
    else:
        c.tail = p


cdef inline void chain_release(Chain* c, Py_ssize_t i) noexcept:
    c.prev[i] = -2                       # marks "free" for _check
    c.next[i] = c.free_head
    c.free_head = i


cdef Py_ssize_t _check_chain(Chain* c, list keys, dict index) except -1:
    # Walk both lists; return the number of live slots.
    cdef Py_ssize_t i = c.head, p = -1, live = 0, free = 0
    while i != -1:
        if c.prev[i] != p:
            raise AssertionError(f"prev link of slot {i} is {c.prev[i]}, expected {p}")
        if index.get(keys[i]) != i:
            raise AssertionError(f"slot {i} disagrees with the index")
        live += 1
        p = i
        i = c.next[i]
    if c.tail != p:
        raise AssertionError("tail is not the last slot")
    i = c.free_head
    while i != -1:
        if c.prev[i] != -2 or keys[i] is not None:
            raise AssertionError(f"free slot {i} still in use")
        free += 1
        i = c.next[i]
    if live != len(index) or live + free != c.used or c.used != len(keys):
        raise AssertionError(f"slot counts: live {live}, free {free}, used {c.used}")
    return live


cdef Py_ssize_t _checked_maxsize(object maxsize) except -1:
    m = PyNumber_Index(maxsize)
    if m < 1:
        raise ValueError(f"maxsize must be >= 1, got {m!r}")
    return min(m, sys.maxsize)


# -- what both share ------------------------------------------------------

cdef class _SlotKeys:
    """Keys in a slot chain, oldest first; the base of LRUCache and BoundedSet."""

    __class_getitem__ = classmethod(GenericAlias)

    def __cinit__(self):
        self._index = {}
        self._keys = []
        self._slotobj = []
        chain_reset(&self._chain)

    def __dealloc__(self):
        chain_free(&self._chain)

    def clear(self):
        """Remove every key (not counted as evictions).

        Complexity: O(n).
        """
        self._index.clear()
        del self._keys[:]
        del self._slotobj[:]
        chain_reset(&self._chain)

    @property
    def evictions(self):
        """Number of keys evicted for capacity so far."""
        return self._evictions

    def __len__(self):
        return len(self._index)

    def __contains__(self, key):
        return key in self._index

    def _check(self):
        """Verify every invariant; raise ``AssertionError`` on a violation.

        Complexity: O(n).
        """
        live = _check_chain(&self._chain, self._keys, self._index)
        if live > self._maxsize:
            raise AssertionError(f"{live} keys exceed maxsize {self._maxsize}")


# Functions rather than _SlotKeys methods: Cython calls a method of the
# non-final base through its vtable, even from its subclasses.

cdef inline void _free_slot(_SlotKeys s, Py_ssize_t i) noexcept:
    # Unlink slot i onto the free list; its key has left _index already.
    chain_unlink(&s._chain, i)
    chain_release(&s._chain, i)
    s._keys[i] = None


cdef inline Py_ssize_t _pop_slot(_SlotKeys s, object key) except -2:
    # Remove key; return the slot it had (now free), or -1 if it was absent.
    obj = s._index.pop(key, None)
    if obj is None:
        return -1
    _free_slot(s, obj)
    return obj


# -- LRUCache -------------------------------------------------------------

@cython.final
cdef class LRUCache(_SlotKeys):
    """Mapping of at most ``maxsize`` entries that evicts the least recently used.

    ``get`` and ``put`` mark a key most recently used; ``peek``, ``pop`` and
    ``in`` do not. ``len`` counts entries; ``evictions`` counts entries
    evicted for capacity so far (``pop`` and ``clear`` do not count, and
    ``clear`` does not reset it). ``maxsize < 1`` is a ``ValueError``.

    Complexity: get/put/pop/peek O(1); keys/clear O(n).

    >>> c = LRUCache(2)
    >>> c.put("a", 1); c.put("b", 2); _ = c.get("a"); c.put("c", 3)
    >>> c.keys(), c.evictions
    (['a', 'c'], 1)
    """

    def __cinit__(self):
        self._values = []

    def __init__(self, maxsize):
        self._maxsize = _checked_maxsize(maxsize)
        self._evictions = 0
        self.clear()

    cdef Py_ssize_t _alloc_slot(self) except -1:
        # A free slot number whose key/value entries exist (None) in the lists.
        cdef Py_ssize_t i = chain_alloc(&self._chain)
        if i == len(self._keys):
            self._keys.append(None)
            self._values.append(None)
            self._slotobj.append(i)
        return i

    @cython.boundscheck(False)  # bench/core.py "LRU get/put 80/20"
    @cython.wraparound(False)
    def get(self, key, default=None):
        """Return the value of ``key`` and mark it most recently used.

        Return ``default`` (and change nothing) when ``key`` is absent.

        Complexity: O(1).
        """
        cdef Py_ssize_t i
        cdef PyObject* found = PyDict_GetItemWithError(self._index, key)
        if found == NULL:
            return default
        i = <Py_ssize_t><object>found
        if i != self._chain.tail:
            chain_unlink(&self._chain, i)
            chain_append(&self._chain, i)
        return self._values[i]

    @cython.boundscheck(False)  # bench/core.py "LRU get/put 80/20"
    @cython.wraparound(False)
    def put(self, key, value):
        """Set ``key`` to ``value`` and mark it most recently used.

        Evict the least recently used entry if the cache grows past maxsize.

        Complexity: O(1).
        """
        # One dict operation decides "update" vs "insert": setdefault() with
        # a candidate slot, which is the LRU slot itself when the cache is
        # full (insert-then-evict and evict-then-insert leave the same state).
        cdef Py_ssize_t i, before = _dict_size(self._index)
        cdef bint full = before >= self._maxsize
        if full:
            i = self._chain.head
        else:
            i = self._alloc_slot()
        slot = self._slotobj[i]
        try:
            found = <object>PyDict_SetDefault(self._index, key, slot)
        except BaseException:  # unhashable key, or its __eq__ raised
            if not full:
                chain_release(&self._chain, i)
            raise
        if _dict_size(self._index) == before:  # key was present: update it
            if not full:
                chain_release(&self._chain, i)
            i = found
            self._values[i] = value
            if i != self._chain.tail:
                chain_unlink(&self._chain, i)
                chain_append(&self._chain, i)
            return
        if full:  # recycle the LRU slot
            del self._index[self._keys[i]]
            chain_unlink(&self._chain, i)
            self._evictions += 1
        self._keys[i] = key
        self._values[i] = value
        chain_append(&self._chain, i)

    def pop(self, key, default=None):
        """Remove ``key`` and return its value, or ``default`` if absent.

        Complexity: O(1).
        """
        cdef Py_ssize_t i = _pop_slot(self, key)
        if i == -1:
            return default
        value = self._values[i]
        self._values[i] = None
        return value

    def peek(self, key, default=None):
        """Return the value of ``key`` (or ``default``) without marking it used.

        Complexity: O(1).
        """
        obj = self._index.get(key)
        if obj is None:
            return default
        return self._values[<Py_ssize_t>obj]

    def keys(self):
        """Return the keys from least to most recently used.

        Complexity: O(n).
        """
        cdef Py_ssize_t i = self._chain.head
        out = []
        while i != -1:
            out.append(self._keys[i])
            i = self._chain.next[i]
        return out

    def clear(self):
        """Remove every entry (not counted as evictions).

        Complexity: O(n).
        """
        _SlotKeys.clear(self)
        del self._values[:]

    def _check(self):
        """Verify every invariant; raise ``AssertionError`` on a violation.

        Complexity: O(n).
        """
        cdef Py_ssize_t i
        _SlotKeys._check(self)
        i = self._chain.free_head
        while i != -1:
            if self._values[i] is not None:
                raise AssertionError(f"free slot {i} still holds a value")
            i = self._chain.next[i]


# -- BoundedSet -----------------------------------------------------------

@cython.final
cdef class BoundedSet(_SlotKeys):
    """Set of at most ``maxsize`` keys that forgets the oldest in batches.

    Order is FIFO by first insertion: re-adding a present key does not
    refresh it. When an add makes ``len > maxsize``, the oldest
    ``max(1, int(maxsize * evict_fraction))`` keys are evicted at once.
    ``evictions`` counts evicted keys (not batches). ``maxsize < 1`` or
    ``evict_fraction`` outside [0, 1] is a ``ValueError``.

    Complexity: add/discard/contains O(1) amortised (an eviction batch of b
    keys costs O(b) and happens at most once per b adds).

    >>> s = BoundedSet(4, evict_fraction=0.5)
    >>> for k in "abcde": s.add(k)
    >>> sorted(k for k in "abcde" if k in s), s.evictions
    (['c', 'd', 'e'], 2)
    """

    def __init__(self, maxsize, double evict_fraction=0.1):
        self._maxsize = _checked_maxsize(maxsize)
        if not 0.0 <= evict_fraction <= 1.0:
            raise ValueError(f"evict_fraction must be in [0, 1], got {evict_fraction!r}")
        self._batch = max(1, int(self._maxsize * evict_fraction))
        self._evictions = 0
        self.clear()

    cdef int _evict_oldest(self) except -1:
        cdef Py_ssize_t i = self._chain.head
        del self._index[self._keys[i]]
        _free_slot(self, i)
        self._evictions += 1
        return 0

    @cython.boundscheck(False)  # bench/core.py "BoundedSet add"
    @cython.wraparound(False)
    def add(self, key):
        """Add ``key`` unless present (a present key keeps its age).

        Complexity: O(1) amortised.
        """
        cdef Py_ssize_t i, _n
        if key in self._index:
            return
        i = chain_alloc(&self._chain)
        if i == len(self._keys):
            self._keys.append(key)
            self._slotobj.append(i)
        else:
            self._keys[i] = key
        self._index[key] = self._slotobj[i]
        chain_append(&self._chain, i)
        if len(self._index) > self._maxsize:
            for _n in range(self._batch):
                self._evict_oldest()

    def discard(self, key):
        """Remove ``key``; return whether it was present.

        Complexity: O(1).
        """
        return _pop_slot(self, key) != -1
