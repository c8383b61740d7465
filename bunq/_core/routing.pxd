# The C contract of bunq._core.routing: the hash loop, callable from C.

from libc.stdint cimport uint32_t

cdef uint32_t fnv1a_32_buf(const unsigned char* data, Py_ssize_t n) noexcept nogil
