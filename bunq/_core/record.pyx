# cython: auto_pickle=False, autotestdict=False
# Representation
# --------------
# One C struct per job: PyObject_HEAD and 29 object pointers, in the order of
# the pure twin's __slots__. Every field is a Python object (no C ints): the
# engine reads and writes them from Python, where a C int would be boxed anew
# on every read, and some (started_at, expire_at, ...) are None at times.
#
# Why no_gc: the type has no tp_traverse/tp_clear and its instances are never
# tracked by the cyclic GC, so a gen-2 collection no longer walks every held
# job (with 100k jobs held, the collections triggered by admission cost about
# a third of a single add). That is safe only if a record can never be part of
# a reference cycle, as the GC could then neither see nor break it (the cycle
# would leak; memory stays valid). A record reaches only: str (id, queue,
# name, owner, token, error), bytes (data), ints and None, bools, the caller's
# frozen job options (str/int/bool/tuple-of-str fields and a frozen backoff),
# job-state and failure-reason enum members, and a list of frozen attempts
# (ints, str, None, an enum member). None of those refers to a record: only
# the engine's own tables (shard dicts, heaps, the finished index) do, and no
# record reaches them. The enum members reach their classes and so module
# globals, which are never collected while the interpreter runs.
"""The engine's per-job record, compiled and untracked by the cyclic GC."""

cimport cython

# The fields are declared in record.pxd.


@cython.no_gc
@cython.final
cdef class Record:
    """One job as the engine keeps it (mutable; guarded by its shard's lock).

    ``seq`` is the admission number (time-ordered, as in the SQL backends);
    ``eseq`` is the number given when the job last entered a ready lane, which
    is what orders ready jobs of equal priority. ``history`` is ``None`` until
    the first finished attempt. ``saved`` says whether the write-behind store
    already holds the row (so later changes can be written as updates).
    ``opts`` is read for ``priority``, ``lifo``, ``group`` and ``ttl``;
    ``state`` is the engine's initial state (``_core`` knows no job states).

    >>> from types import SimpleNamespace
    >>> opts = SimpleNamespace(priority=2, lifo=True, group=None, ttl=50)
    >>> r = Record("j1", "q", "n", b"", opts, "waiting", 7, 100, 120)
    >>> r.order_key(), r.signed_seq(), r.expire_at
    ((-2, -120, -7), -7, 150)
    """

    def __init__(self, id, queue, name, data, opts, state, seq, now, run_at):
        self.id = id
        self.queue = queue
        self.name = name
        self.data = data
        self.opts = opts
        self.state = state
        self.priority = opts.priority
        self.lifo = opts.lifo
        self.group = opts.group
        self.seq = seq
        self.eseq = 0
        self.run_at = run_at
        self.created_at = now
        self.started_at = None
        self.finished_at = None
        self.attempts = 0
        self.stalls = 0
        self.token = None
        self.owner = ""
        self.lease_until = 0
        ttl = opts.ttl
        self.expire_at = None if ttl is None else now + ttl
        self.pending = 0
        self.progress = 0
        self.error = None
        self.reason = None
        self.dlq_at = None
        self.dlq_retries = 0
        self.history = None
        self.saved = False

    def __repr__(self):
        return f"Rec({self.id!r}, {self.queue!r}, {self.state.value}, attempts={self.attempts})"

    def add_attempt(self, attempt):
        """Append a finished attempt to the history (ordered by time, then number)."""
        if self.history is None:
            self.history = [attempt]
        else:
            self.history.append(attempt)

    def order_key(self):
        """Sort key of the SQL ready order: priority DESC, ord_at, seq (LIFO negated)."""
        if self.lifo:
            return (-self.priority, -self.run_at, -self.seq)
        return (-self.priority, self.run_at, self.seq)

    def signed_seq(self):
        """Admission number as the SQL backends store it (negative for LIFO jobs)."""
        return -self.seq if self.lifo else self.seq
