# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# No state: routing is a pure function of the queue name. FNV-1a 32 is used
# because it is tiny, has published test vectors, and is trivially identical
# in C and Python (bunqueue uses the same hash for shard selection). The
# routing contract is wire-visible: the SDK and the server must route a name
# to the same shard whichever implementation each loaded, so the golden
# table in tests/unit/core/test_routing.py is frozen.
#
# Shard counts are powers of two in [1, 64], so `hash & (shards - 1)` is the
# modulus; the low bits of FNV-1a are well mixed by the final multiply.
"""FNV-1a 32-bit hashing and power-of-two shard routing."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.number cimport PyNumber_Index
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport uint32_t

cdef uint32_t _OFFSET = 2166136261u
cdef uint32_t _PRIME = 16777619u
cdef int _MAX_SHARDS = 64


cdef uint32_t fnv1a_32_buf(const unsigned char* data, Py_ssize_t n) noexcept nogil:
    cdef uint32_t h = _OFFSET
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ data[i]) * _PRIME
    return h


cdef inline uint32_t _hash_obj(object data) except? 0:
    cdef const char* p
    cdef Py_ssize_t n
    if isinstance(data, str):
        # UTF-8 form cached on the str object; strict: lone surrogates raise.
        p = PyUnicode_AsUTF8AndSize(data, &n)
    elif isinstance(data, bytes):
        p = PyBytes_AS_STRING(data)
        n = PyBytes_GET_SIZE(data)
    else:
        raise TypeError(f"expected str or bytes, got {type(data).__name__}")
    return fnv1a_32_buf(<const unsigned char*>p, n)


def fnv1a_32(data):
    """Return the 32-bit FNV-1a hash of ``data`` (a str is UTF-8 encoded).

    Offset basis 2166136261, prime 16777619, arithmetic modulo 2**32.
    ``TypeError`` for anything but ``str``/``bytes``.

    Complexity: O(len(data)).

    >>> hex(fnv1a_32("a"))
    '0xe40c292c'
    """
    return _hash_obj(data)


def shard_count(cpus):
    """Return the smallest power of two >= ``cpus``, clamped to [1, 64].

    ``ValueError`` if ``cpus < 1``.

    Complexity: O(1).

    >>> [shard_count(c) for c in (1, 3, 8, 100)]
    [1, 4, 8, 64]
    """
    cdef object c = PyNumber_Index(cpus)
    cdef int n = 1
    if c < 1:
        raise ValueError(f"cpus must be >= 1, got {c!r}")
    while n < c and n < _MAX_SHARDS:
        n <<= 1
    return n


def shard_for(name, shards):
    """Return the shard of ``name``: ``fnv1a_32(name) & (shards - 1)``.

    ``ValueError`` unless ``shards`` is a power of two in [1, 64].

    Complexity: O(len(name)).

    >>> shard_for("emails", 8) == fnv1a_32("emails") % 8
    True
    """
    cdef long s
    # Fast path for an exact int in range; anything else goes through index().
    if type(shards) is int and 1 <= shards <= _MAX_SHARDS:
        s = shards
    else:
        s_obj = PyNumber_Index(shards)
        if not 1 <= s_obj <= _MAX_SHARDS:
            raise ValueError(f"shards must be a power of two in [1, 64], got {s_obj!r}")
        s = s_obj
    if s & (s - 1):
        raise ValueError(f"shards must be a power of two in [1, 64], got {s!r}")
    return _hash_obj(name) & <uint32_t>(s - 1)
