# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# IndexedHeap is HeapBase (_heapbase.pyx, read its block first): a 4-ary heap
# of 32-byte slots ordered by HeapKey (major, minor, then push stamp)
# ascending, with O(1) lazy discard by stamps and compaction past
# compact_ratio. This module only maps the priority order onto that key:
#
#   major = ~priority (= -1 - priority), so higher priority pops first; the
#           complement maps int64 onto int64, where -priority would overflow
#           at -2**63.
#   minor = seq for FIFO entries and -1 - seq for LIFO ones, so LIFO entries
#           (all negative) come before FIFO ones at equal priority, LIFO
#           newest first, FIFO oldest first. seq < 2**63 - 1 keeps -1 - seq
#           in range.
#
# The value kept per key is the priority itself, for priority_of.
"""Indexed 4-ary max-priority heap with O(1) lazy discard."""

cimport cython
from cpython.number cimport PyNumber_Index

from bunq._core._heapbase cimport HeapBase, HeapSlot, HeapValue


@cython.final
cdef class IndexedHeap(HeapBase):
    """Max-priority queue of unique hashable keys with O(1) discard.

    Pop order: higher ``priority`` first; at equal priority LIFO entries come
    before FIFO entries; LIFO entries pop newest first (seq descending), FIFO
    entries oldest first (seq ascending); entries equal in all of these (only
    possible with an explicit ``seq``) pop in push order. ``len`` counts live
    keys only, never discarded slots awaiting compaction.

    :param compact_ratio: rebuild the array once discarded slots exceed this
        fraction of it; ``0 <= compact_ratio <= 1``, else ``ValueError``.

    Complexity: push/pop O(log n), peek amortised O(1), discard O(1)
    amortised (plus an O(n) compaction at most every ratio*n discards).

    >>> h = IndexedHeap()
    >>> h.push("a", 1); h.push("b", 5); h.push("c", 5, lifo=True)
    >>> [h.pop() for _ in range(len(h))]
    ['c', 'b', 'a']
    """

    # Restated so that embedsignature puts the signature in the class docstring.
    def __init__(self, double compact_ratio=0.2):
        HeapBase.__init__(self, compact_ratio)

    def push(self, key, priority, bint lifo=False, seq=None):
        """Add ``key`` with ``priority``; raise ``ValueError`` if it is live.

        :param priority: an integer (``operator.index``) that fits int64,
            else ``TypeError`` / ``OverflowError``.
        :param lifo: pop before FIFO entries of equal priority, newest first.
        :param seq: admission number; defaults to an internal counter that
            increments per push. An explicit seq (``0 <= seq < 2**63 - 1``,
            else ``ValueError``) raises the counter to ``seq + 1`` so that
            recovery can restore admission order.

        Complexity: O(log n).
        """
        cdef HeapValue value
        value.i = PyNumber_Index(priority)
        self._push(key, ~value.i, seq, lifo, value)

    def pop(self):
        """Remove and return the first key; raise ``IndexError`` if empty.

        Complexity: O(log n) amortised.
        """
        cdef HeapSlot root
        return self._pop(&root)

    def peek(self):
        """Return the first key without removing it; ``IndexError`` if empty.

        Complexity: O(1) amortised.
        """
        if not self._has_root():
            raise IndexError("peek into an empty IndexedHeap")
        return self._keys[self._slots[0].key_index]

    def priority_of(self, key):
        """Return the priority of live ``key``; raise ``KeyError`` if absent.

        Complexity: O(1).
        """
        return self._kvalue[self._live_index(key)].i

    cdef long long _major_of(self, HeapValue value) noexcept:
        return ~value.i
