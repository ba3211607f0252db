# The dtype object, compiled: kernels and the recorder read a tensor's element size, kernel code and kind as C
# fields (`(<DType>t.dtype).itemsize`, cimported as `from plast._core._dtype cimport dtype as DType`) instead of Python attribute lookups, several dozen times per eager step.

cdef class dtype:
    cdef readonly str name
    cdef readonly object np
    cdef readonly Py_ssize_t itemsize
    cdef readonly bint is_floating_point
    cdef readonly bint is_signed
    cdef readonly int _rank
    cdef readonly int code          # small int used by the C kernels and in plan fingerprints
