# CPython's member-descriptor API, shared by the compiled record (which makes its fields'
# descriptors) and SlotBuilder (which reads slot offsets off a class's descriptors).
from cpython.object cimport PyObject, PyTypeObject


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags
        const char* doc
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    object PyDescr_NewMember(PyTypeObject* tp, PyMemberDef* member)
    void PyType_Modified(PyTypeObject* tp)
    PyObject* PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t n) except NULL


cdef extern from "structmember.h":
    int T_OBJECT_EX  # Py_T_OBJECT_EX from 3.12 on; this name is kept there
