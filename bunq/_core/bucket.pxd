# The C contract of bunq._core.bucket: typed state of the two limiters.

cdef class TokenBucket:
    cdef double _capacity
    cdef double _rate             # tokens per second
    cdef double _tokens           # as of _last
    cdef double _last             # latest `now` seen; time never moves back

    cdef inline int _refill(self, double now, double n) except -1


cdef class SlidingWindow:
    cdef Py_ssize_t _limit
    cdef double _window
    cdef double* _ring            # admitted timestamps, oldest at _head
    cdef Py_ssize_t _cap          # ring slots allocated, grows up to _limit
    cdef Py_ssize_t _head
    cdef Py_ssize_t _count        # timestamps stored, <= _limit
    cdef double _last             # latest `now` seen

    cdef double _advance(self, double now) noexcept
    cdef int _reserve(self, Py_ssize_t k) except -1
