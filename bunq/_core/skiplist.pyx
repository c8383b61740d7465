# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# A Pugh skip list of malloc'd C nodes, Redis-style (zskiplist): each node has
# `height` forward links, and each link stores its *span*, the number of
# level-0 steps it jumps. The head is a sentinel of rank 0; node ranks are
# 1..len; a link to NULL has span len - rank(node). Summing spans along a
# search path gives a node's rank in O(log n), which a plain skip list (or a
# heap) cannot do.
#
# Order is (score, seq) where seq is a per-insert counter, so equal scores
# keep insertion order and keys are never compared: any hashable works, and
# the order is the same as the pure twin's sorted (score, seq, key) list.
#
# Heights come from a deterministic xorshift32 stream seeded in __init__
# with P(promote) = 1/4, capped at max_level (<= 32, the size of the
# on-stack `update` arrays). Determinism makes failures reproducible; the
# heights are invisible through the API.
#
# `_tail[i]` is the last node on level i. The engine inserts in time order,
# almost always after the last key: such an insert starts from the tails (a
# NULL link's span gives the tail's rank) instead of walking every level.
#
# `_index` maps key -> the node's address (a Python int: one small object per
# key, not a tuple of two). It also owns the key objects: node.key
# is a borrowed pointer, valid exactly while the key is in `_index`, which
# keeps keys visible to the cycle collector. A node is unlinked and freed
# before its key leaves the dict.
"""Skip list of unique keys ordered by ``(score, insertion)`` with O(log n) rank."""

cimport cython
from cpython.number cimport PyNumber_Index
from libc.stdlib cimport free, malloc

from types import GenericAlias

cdef enum:
    MAX_HEIGHT = 32


cdef inline bint _less(const SkipNode* x, double score, unsigned long long seq) noexcept nogil:
    # True when node x orders before (score, seq).
    return x.score < score or (x.score == score and x.seq < seq)


cdef SkipNode* _new_node(int height) noexcept nogil:
    cdef SkipNode* x = <SkipNode*>malloc(sizeof(SkipNode) + height * sizeof(SkipLink))
    if x == NULL:
        return NULL
    x.height = height
    x.key = NULL
    x.links = <SkipLink*>(x + 1)
    return x


@cython.final
cdef class SkipList:
    """Ordered index of unique hashable keys by ``(score, insertion order)``.

    Keys with equal scores stay in insertion order (a removed and re-inserted
    key goes last among its equals); keys themselves are never compared.
    ``len`` counts keys.

    :param max_level: maximum node height, ``1 <= max_level <= 32``.
    :param seed: xorshift32 seed for node heights, ``1 <= seed < 2**32``.
    Both raise ``ValueError`` when out of range.

    Complexity: insert/remove/rank/score lookup O(log n) expected,
    range_by_score and range_by_rank O(log n + k), pop_min O(max_level).

    >>> s = SkipList()
    >>> s.insert("b", 2.0); s.insert("a", 1.0); s.insert("c", 2.0)
    >>> list(s), s.rank("c"), s.range_by_score(1.5, 9.0)
    (['a', 'b', 'c'], 2, [('b', 2.0), ('c', 2.0)])
    """

    __class_getitem__ = classmethod(GenericAlias)

    def __cinit__(self):
        cdef int i
        self._head = _new_node(MAX_HEIGHT)
        if self._head == NULL:
            raise MemoryError()
        for i in range(MAX_HEIGHT):
            self._head.links[i].next = NULL
            self._head.links[i].span = 0
            self._tail[i] = self._head
        self._level = 1
        self._index = {}

    def __init__(self, max_level=16, seed=0x2545F491):
        max_level = PyNumber_Index(max_level)
        seed = PyNumber_Index(seed)
        if not 1 <= max_level <= MAX_HEIGHT:
            raise ValueError(f"max_level must be in [1, 32], got {max_level!r}")
        if not 1 <= seed < 2**32:
            raise ValueError(f"seed must be in range(1, 2**32), got {seed!r}")
        self.clear()
        self._max_level = max_level
        self._rng = seed
        self._seq = 0

    def __dealloc__(self):
        if self._head != NULL:
            self._free_nodes()
            free(self._head)

    # -- mechanics -------------------------------------------------------

    cdef int _random_height(self) noexcept nogil:
        cdef int h = 1
        cdef uint32_t x
        while h < self._max_level:
            x = self._rng
            x ^= x << 13
            x ^= x >> 17
            x ^= x << 5
            self._rng = x
            if x & 3:
                break
            h += 1
        return h

    cdef SkipNode* _find(self, double score, unsigned long long seq,
                         SkipNode** update) noexcept nogil:
        # Fill update[i] with the last node before (score, seq) on level i and
        # return the first node at or after it on level 0 (or NULL).
        cdef SkipNode* x = self._head
        cdef int i
        for i in range(self._level - 1, -1, -1):
            while x.links[i].next != NULL and _less(x.links[i].next, score, seq):
                x = x.links[i].next
            update[i] = x
        return x.links[0].next

    cdef void _unlink(self, SkipNode* x, SkipNode** update) noexcept nogil:
        # Remove x, whose predecessors per level are update[0.._level), and free it.
        cdef int i
        for i in range(self._level):
            if update[i].links[i].next == x:
                update[i].links[i].span += x.links[i].span - 1
                update[i].links[i].next = x.links[i].next
                if x.links[i].next == NULL:
                    self._tail[i] = update[i]
            else:
                update[i].links[i].span -= 1
        while self._level > 1 and self._head.links[self._level - 1].next == NULL:
            self._level -= 1
        self._len -= 1
        free(x)

    cdef void _free_nodes(self) noexcept nogil:
        cdef SkipNode* x = self._head.links[0].next
        cdef SkipNode* nxt
        while x != NULL:
            nxt = x.links[0].next
            free(x)
            x = nxt

    # -- public API ------------------------------------------------------

    def insert(self, key, double score):
        """Add ``key`` with ``score``; raise ``ValueError`` if present or NaN.

        Complexity: O(log n) expected.
        """
        cdef SkipNode* update[MAX_HEIGHT]
        cdef Py_ssize_t rank[MAX_HEIGHT]
        cdef SkipNode* x = self._head
        cdef SkipNode* node
        cdef int i, h
        cdef unsigned long long seq = self._seq
        if score != score:
            raise ValueError("score must not be NaN")
        if key in self._index:
            raise ValueError(f"key already in skip list: {key!r}")
        if self._len and self._tail[0].score <= score:  # after the last key: no walk
            for i in range(self._level):
                update[i] = self._tail[i]
                rank[i] = self._len - self._tail[i].links[i].span
        else:
            for i in range(self._level - 1, -1, -1):
                rank[i] = 0 if i == self._level - 1 else rank[i + 1]
                while x.links[i].next != NULL and _less(x.links[i].next, score, seq):
                    rank[i] += x.links[i].span
                    x = x.links[i].next
                update[i] = x
        h = self._random_height()
        node = _new_node(h)
        if node == NULL:
            raise MemoryError()
        self._index[key] = <size_t>node
        self._seq += 1
        if h > self._level:
            for i in range(self._level, h):
                rank[i] = 0
                update[i] = self._head
                self._head.links[i].next = NULL
                self._head.links[i].span = self._len
            self._level = h
        node.score = score
        node.seq = seq
        node.key = <PyObject*>key
        for i in range(h):
            node.links[i].next = update[i].links[i].next
            update[i].links[i].next = node
            node.links[i].span = update[i].links[i].span - (rank[0] - rank[i])
            update[i].links[i].span = rank[0] - rank[i] + 1
            if node.links[i].next == NULL:
                self._tail[i] = node
        for i in range(h, self._level):
            update[i].links[i].span += 1
        self._len += 1

    def remove(self, key):
        """Remove ``key``; return whether it was present.

        Complexity: O(log n) expected.
        """
        cdef SkipNode* update[MAX_HEIGHT]
        cdef SkipNode* x
        t = self._index.get(key)
        if t is None:
            return False
        x = <SkipNode*><size_t>t
        self._find(x.score, x.seq, update)  # fills the predecessors; returns x
        self._unlink(x, update)
        del self._index[key]
        return True

    def score_of(self, key):
        """Return the score of ``key``; raise ``KeyError`` if absent.

        Complexity: O(1).
        """
        t = self._index.get(key)
        if t is None:
            raise KeyError(key)
        return (<SkipNode*><size_t>t).score

    def rank(self, key):
        """Return the 0-based position of ``key``; raise ``KeyError`` if absent.

        Complexity: O(log n) expected.
        """
        cdef SkipNode* x = self._head
        cdef Py_ssize_t r = 0
        cdef double score
        cdef unsigned long long seq
        cdef int i
        t = self._index.get(key)
        if t is None:
            raise KeyError(key)
        score = (<SkipNode*><size_t>t).score
        seq = (<SkipNode*><size_t>t).seq
        for i in range(self._level - 1, -1, -1):
            while x.links[i].next != NULL and (
                x.links[i].next.seq == seq or _less(x.links[i].next, score, seq)
            ):
                r += x.links[i].span
                x = x.links[i].next
        return r - 1

    def range_by_score(self, double lo, double hi, limit=None):
        """Return ``(key, score)`` pairs with ``lo <= score <= hi``, ascending.

        :param limit: return at most this many (``None``: all); negative is a
            ``ValueError``, as is a NaN bound.

        Complexity: O(log n + k) for k returned pairs.
        """
        cdef SkipNode* x = self._head
        cdef Py_ssize_t lim = -1
        cdef int i
        if lo != lo or hi != hi:
            raise ValueError("bounds must not be NaN")
        if limit is not None:
            lim_obj = PyNumber_Index(limit)
            if lim_obj < 0:
                raise ValueError(f"limit must be >= 0, got {lim_obj!r}")
            lim = min(lim_obj, self._len)
        out = []
        for i in range(self._level - 1, -1, -1):
            while x.links[i].next != NULL and x.links[i].next.score < lo:
                x = x.links[i].next
        x = x.links[0].next
        while x != NULL and x.score <= hi and lim != 0:
            out.append((<object>x.key, x.score))
            x = x.links[0].next
            lim -= 1
        return out

    def range_by_rank(self, start, stop):
        """Return ``(key, score)`` pairs of 0-based ranks ``start <= rank < stop``, ascending.

        ``stop`` past the end is clamped; a negative bound is a ``ValueError``.

        Complexity: O(log n + k) for k returned pairs (spans locate ``start``).
        """
        cdef Py_ssize_t lo = PyNumber_Index(start)
        cdef Py_ssize_t hi = PyNumber_Index(stop)
        cdef Py_ssize_t traversed = 0
        cdef SkipNode* x = self._head
        cdef int i
        if lo < 0 or hi < 0:
            raise ValueError(f"ranks must be >= 0, got {start!r}, {stop!r}")
        if hi > self._len:
            hi = self._len
        out = []
        if lo >= hi:
            return out
        for i in range(self._level - 1, -1, -1):  # to the node of 1-based rank lo + 1
            while x.links[i].next != NULL and traversed + x.links[i].span <= lo + 1:
                traversed += x.links[i].span
                x = x.links[i].next
        while x != NULL and lo < hi:
            out.append((<object>x.key, x.score))
            x = x.links[0].next
            lo += 1
        return out

    def pop_min(self):
        """Remove and return the first ``(key, score)``; ``IndexError`` if empty.

        Complexity: O(max_level).
        """
        cdef SkipNode* update[MAX_HEIGHT]
        cdef SkipNode* x = self._head.links[0].next
        cdef double score
        cdef int i
        if x == NULL:
            raise IndexError("pop from an empty SkipList")
        key = <object>x.key
        score = x.score
        for i in range(self._level):
            update[i] = self._head
        self._unlink(x, update)
        del self._index[key]
        return (key, score)

    def peek_min(self):
        """Return the first ``(key, score)``; ``IndexError`` if empty.

        Complexity: O(1).
        """
        cdef SkipNode* x = self._head.links[0].next
        if x == NULL:
            raise IndexError("peek into an empty SkipList")
        return (<object>x.key, x.score)

    def clear(self):
        """Remove every key.

        Complexity: O(n).
        """
        cdef int i
        self._free_nodes()
        for i in range(MAX_HEIGHT):
            self._head.links[i].next = NULL
            self._head.links[i].span = 0
            self._tail[i] = self._head
        self._level = 1
        self._len = 0
        self._index.clear()

    def __len__(self):
        return self._len

    def __contains__(self, key):
        return key in self._index

    def __iter__(self):
        """Iterate over a snapshot of the keys in ascending order."""
        cdef SkipNode* x = self._head.links[0].next
        out = []
        while x != NULL:
            out.append(<object>x.key)
            x = x.links[0].next
        return iter(out)

    def _check(self):
        """Verify every invariant; raise ``AssertionError`` on a violation.

        Complexity: O(n * max_level).
        """
        cdef SkipNode* x = self._head.links[0].next
        cdef SkipNode* prev = NULL
        cdef Py_ssize_t r = 0
        cdef int i
        ranks = {0: 0}                       # node address -> rank; NULL -> len
        while x != NULL:
            r += 1
            if prev != NULL and not _less(prev, x.score, x.seq):
                raise AssertionError(f"order violated at rank {r}")
            if not 1 <= x.height <= self._max_level:
                raise AssertionError(f"node height {x.height} out of range")
            if self._index.get(<object>x.key) != <size_t>x:
                raise AssertionError(f"node at rank {r} disagrees with the index")
            ranks[<size_t>x] = r
            prev = x
            x = x.links[0].next
        if r != self._len or r != len(self._index):
            raise AssertionError(f"length {r} != {self._len} / {len(self._index)}")
        ranks[0] = r
        if not 1 <= self._level <= self._max_level:
            raise AssertionError(f"level {self._level} out of range")
        if self._level > 1 and self._head.links[self._level - 1].next == NULL:
            raise AssertionError("empty top level not trimmed")
        for i in range(self._level):
            x = self._head
            r = 0
            while True:
                nxt = ranks[<size_t>x.links[i].next] if x.links[i].next != NULL else self._len
                if x.links[i].span != nxt - r:
                    raise AssertionError(f"span wrong on level {i} at rank {r}")
                if x.links[i].next == NULL:
                    break
                x = x.links[i].next
                if x.height <= i:
                    raise AssertionError(f"node of height {x.height} linked on level {i}")
                r = nxt
            if self._tail[i] != x:
                raise AssertionError(f"tail of level {i} is not its last node")
