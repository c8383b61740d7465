# The C contract of bunq._core.record: one object pointer per field, in the
# order of record.FIELDS (NULL once a field is deleted, as with __slots__).

from cpython.object cimport PyObject


cdef class Record:
    cdef PyObject* _f[29]
