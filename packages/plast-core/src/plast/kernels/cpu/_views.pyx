"""numpy views of arena memory for the kernels that run numpy (kernels/cpu/kernels.py ``np_view``), built with
numpy's C API: ``np.frombuffer`` + ``as_strided`` cost microseconds per call, and small steps make dozens."""

cimport numpy as cnp
from cpython.ref cimport Py_INCREF

from ...graph._graph cimport TensorBase
from ...memory.arena cimport Storage

import numpy as np

cnp.import_array()

cdef extern from "numpy/arrayobject.h":
    object PyArray_NewFromDescr(
        type subtype, cnp.dtype descr, int nd, cnp.npy_intp *dims, cnp.npy_intp *strides, void *data,
        int flags, object obj
    )


def np_view(TensorBase t):
    """A numpy view of a realized tensor's memory, with its strides; the array keeps the storage alive. Cached on
    the tensor while its storage and layout stay the same (jit plans call the same kernels on the same tensors
    every step)."""
    st = t._storage
    c = t._npcache
    if c is not None and c[0] is st and c[1] == t._offset and c[2] == t._strides:
        return c[3]
    cdef cnp.dtype descr = t.dtype.np
    cdef Py_ssize_t isz = descr.itemsize
    shape = t._shape
    strides = t._strides
    cdef int nd = len(shape), i
    if nd > 32:
        raise ValueError(f"np_view: {nd} dims (numpy takes at most 32)")
    cdef cnp.npy_intp dims[32]
    cdef cnp.npy_intp bstrides[32]
    cdef Py_ssize_t n = 1
    for i in range(nd):
        dims[i] = shape[i]
        bstrides[i] = <Py_ssize_t>strides[i] * isz
        n *= dims[i]
    if n == 0:
        return np.empty(shape, dtype=descr)
    cdef size_t addr
    if type(st) is Storage:
        addr = st.address  # checks staleness
    else:
        raise TypeError(f"np_view: a {t.device} tensor has no host memory; copy it to the CPU first")
    addr += t._offset * isz
    Py_INCREF(descr)  # PyArray_NewFromDescr steals a reference to the descriptor
    arr = PyArray_NewFromDescr(
        cnp.ndarray, descr, nd, dims, bstrides, <void *>addr, cnp.NPY_ARRAY_WRITEABLE, <object>NULL
    )
    Py_INCREF(st)  # PyArray_SetBaseObject steals a reference to the base
    cnp.PyArray_SetBaseObject(arr, st)
    cnp.PyArray_UpdateFlags(arr, cnp.NPY_ARRAY_UPDATE_ALL)
    t._npcache = (st, t._offset, strides, arr)
    return arr
