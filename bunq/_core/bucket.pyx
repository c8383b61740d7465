# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# TokenBucket keeps four doubles: capacity, refill rate, the token level and
# the time of that level. Refill is computed lazily on each call as
# min(capacity, tokens + (now - last) * rate); a `now` earlier than `last`
# refills nothing and leaves `last` alone, so a clock stepping backwards
# never mints tokens. No clock is read here: callers pass `now`.
#
# SlidingWindow is exact, not the two-bucket approximation: a ring buffer of
# at most `limit` admission timestamps (one per admitted unit), oldest at
# _head. A timestamp t is inside the window at `now` iff now - window < t;
# timestamps are non-decreasing (time is clamped like the bucket's), so
# expiry only ever pops from the oldest end. The ring starts small and
# doubles as needed, so memory is at most `limit` doubles (never more than
# the units currently inside the window, rounded up to a power of two).
#
# Both classes do their arithmetic in C doubles in the same order as the
# pure twin, so results are bit-identical on platforms where the compiler
# does not contract a*b+c into a fused multiply-add (x86-64 without -march).
"""Token bucket and exact sliding-window rate limiters; time is passed in."""

cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.number cimport PyNumber_Index
from libc.math cimport INFINITY, isfinite


cdef inline int _check_time(double now) except -1:
    if now != now:
        raise ValueError("now must not be NaN")
    return 0


@cython.final
cdef class TokenBucket:
    """Token bucket that starts full and refills continuously.

    :param capacity: maximum tokens, finite and > 0.
    :param refill_per_sec: tokens added per second, finite and >= 0.
    :param now: the caller's clock reading at creation.
    Out-of-range arguments and NaN times raise ``ValueError``.

    A ``now`` earlier than the latest one seen is treated as that latest one.

    Complexity: every method O(1).

    >>> b = TokenBucket(2, 1.0, now=0.0)
    >>> b.try_acquire(0.0, 2), b.try_acquire(0.0), b.time_until(0.0)
    (True, False, 1.0)
    """

    def __init__(self, double capacity, double refill_per_sec, double now):
        if not (isfinite(capacity) and capacity > 0.0):
            raise ValueError(f"capacity must be finite and > 0, got {capacity!r}")
        if not (isfinite(refill_per_sec) and refill_per_sec >= 0.0):
            raise ValueError(f"refill_per_sec must be finite and >= 0, got {refill_per_sec!r}")
        if not isfinite(now):
            raise ValueError(f"now must be finite, got {now!r}")
        self._capacity = capacity
        self._rate = refill_per_sec
        self._tokens = capacity
        self._last = now

    cdef inline int _refill(self, double now, double n) except -1:
        # Validate (now, n) for a request of n tokens, then bring the level
        # up to now.
        cdef double level
        _check_time(now)
        if not n >= 0.0:
            raise ValueError(f"n must be >= 0, got {n!r}")
        if now > self._last:
            level = self._tokens + (now - self._last) * self._rate
            self._tokens = level if level < self._capacity else self._capacity
            self._last = now

    def try_acquire(self, double now, double n=1):
        """Take ``n`` tokens if available; return whether it did.

        ``n`` must be >= 0 (else ``ValueError``); ``n = 0`` always succeeds.

        Complexity: O(1).
        """
        self._refill(now, n)
        if self._tokens >= n:
            self._tokens -= n
            return True
        return False

    def tokens(self, double now):
        """Return the tokens available at ``now``.

        Complexity: O(1).
        """
        self._refill(now, 0.0)
        return self._tokens

    def _check(self):
        """Verify every invariant; raise ``AssertionError`` on a violation.

        Complexity: O(1).
        """
        if not 0.0 <= self._tokens <= self._capacity:
            raise AssertionError(f"tokens {self._tokens} outside [0, {self._capacity}]")
        if not isfinite(self._last):
            raise AssertionError("last time is not finite")

    def time_until(self, double now, double n=1):
        """Return seconds from ``now`` until ``n`` tokens are available.

        ``0.0`` if they are available now; ``inf`` if ``n > capacity`` or the
        bucket never refills; otherwise ``(n - tokens) / refill_per_sec``.

        Complexity: O(1).
        """
        self._refill(now, n)
        if self._tokens >= n:
            return 0.0
        if n > self._capacity or self._rate == 0.0:
            return INFINITY
        return (n - self._tokens) / self._rate


@cython.final
cdef class SlidingWindow:
    """Exact sliding-window limiter: at most ``limit`` units per ``window`` seconds.

    A unit admitted at time t counts at ``now`` iff ``now - window < t <= now``.
    ``try_acquire(now, n)`` admits iff that count plus ``n`` is <= ``limit``.
    A ``now`` earlier than the latest one seen is treated as that latest one.

    :param limit: units per window, >= 1.
    :param window: window length in seconds, finite and > 0.
    Out-of-range arguments, negative ``n`` and NaN times raise ``ValueError``.

    Complexity: amortised O(1) per admitted unit; memory ``limit`` floats.

    >>> w = SlidingWindow(2, 10.0)
    >>> w.try_acquire(0.0), w.try_acquire(1.0), w.try_acquire(2.0), w.time_until(2.0)
    (True, True, False, 8.0)
    """

    def __init__(self, limit, double window):
        lim = PyNumber_Index(limit)
        if lim < 1:
            raise ValueError(f"limit must be >= 1, got {lim!r}")
        if not (isfinite(window) and window > 0.0):
            raise ValueError(f"window must be finite and > 0, got {window!r}")
        self._limit = lim
        self._window = window
        PyMem_Free(self._ring)
        self._ring = NULL
        self._cap = 0
        self._head = 0
        self._count = 0
        self._last = -INFINITY

    def __dealloc__(self):
        PyMem_Free(self._ring)

    cdef int _reserve(self, Py_ssize_t k) except -1:
        # Make room for k more timestamps (count + k <= limit), unwrapping
        # the ring into a larger block when it has to grow.
        cdef Py_ssize_t cap, i
        cdef double* ring
        if self._count + k <= self._cap:
            return 0
        cap = self._cap * 2 if self._cap else 8
        if cap < self._count + k:
            cap = self._count + k
        if cap > self._limit:
            cap = self._limit
        ring = <double*>PyMem_Malloc(cap * sizeof(double))
        if ring == NULL:
            raise MemoryError()
        for i in range(self._count):
            ring[i] = self._ring[(self._head + i) % self._cap]
        PyMem_Free(self._ring)
        self._ring = ring
        self._cap = cap
        self._head = 0
        return 0

    cdef double _advance(self, double now) noexcept:
        # Clamp now to the latest seen, expire old timestamps, return it.
        if now < self._last:
            now = self._last
        self._last = now
        while self._count and self._ring[self._head] <= now - self._window:
            self._head += 1
            if self._head == self._cap:
                self._head = 0
            self._count -= 1
        return now

    def try_acquire(self, double now, n=1):
        """Admit ``n`` units at ``now`` if the window has room; return whether.

        ``n = 0`` always succeeds; ``n > limit`` never does.

        Complexity: O(n) plus amortised expiry.
        """
        cdef Py_ssize_t k, j, tail
        _check_time(now)
        n = PyNumber_Index(n)
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n!r}")
        now = self._advance(now)
        if n > self._limit - self._count:
            return False
        k = n
        self._reserve(k)
        tail = self._head + self._count
        for j in range(k):
            self._ring[(tail + j) % self._cap] = now
        self._count += k
        return True

    def count(self, double now):
        """Return the units counted in the window ``(now - window, now]``.

        Complexity: amortised O(1).
        """
        _check_time(now)
        self._advance(now)
        return self._count

    def time_until(self, double now, n=1):
        """Return seconds from ``now`` until ``n`` units would be admitted.

        ``0.0`` if admitted now, ``inf`` if ``n > limit``; otherwise the time
        at which enough of the oldest units leave the window.

        Complexity: amortised O(1).
        """
        cdef Py_ssize_t need
        _check_time(now)
        n = PyNumber_Index(n)
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n!r}")
        now = self._advance(now)
        if n > self._limit:
            return INFINITY
        if n <= self._limit - self._count:
            return 0.0
        need = self._count + <Py_ssize_t>n - self._limit   # units that must expire
        return self._ring[(self._head + need - 1) % self._cap] + self._window - now

    def _check(self):
        """Verify every invariant; raise ``AssertionError`` on a violation.

        Complexity: O(limit).
        """
        cdef Py_ssize_t i
        cdef double t, prev = -INFINITY
        if not 0 <= self._count <= self._cap <= self._limit:
            raise AssertionError(f"count {self._count}, cap {self._cap}, limit {self._limit}")
        for i in range(self._count):
            t = self._ring[(self._head + i) % self._cap]
            if t < prev or t > self._last or t <= self._last - self._window:
                raise AssertionError(f"timestamp {t} out of order or outside the window")
            prev = t
