# The C contract of bunq._core.record: the record's fields, readable from C.

cdef class Record:
    cdef public object id, queue, name, data, opts, state, priority, lifo, group, seq
    cdef public object eseq, run_at, created_at, started_at, finished_at, attempts, stalls
    cdef public object token, owner, lease_until, expire_at, pending, progress, error
    cdef public object reason, dlq_at, dlq_retries, history, saved
