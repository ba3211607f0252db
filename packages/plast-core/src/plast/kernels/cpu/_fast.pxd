# The vectorized kernels of _fast.pyx that other Cython modules call with no Python call in between.

cdef int reduce3d_c(int op, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, const char *x, Py_ssize_t so,
                    Py_ssize_t sn, Py_ssize_t si, char *out, int dtype) except -1
