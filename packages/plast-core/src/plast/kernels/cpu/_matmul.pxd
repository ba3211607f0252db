# The tensor-level GEMM entry of _matmul.pyx and its op-table kernels, for other Cython modules (_jit/_replay.pyx,
# graph/_scheduler.pyx: they call `run` with no Python call).

from plast.kernels.cpu._tensors cimport TensorBase

cdef int matmul_run(TensorBase out, TensorBase a, TensorBase b, TensorBase bias, int act, double alpha,
                    double beta) except -1


cdef class MatmulKernel:
    cdef readonly object fallback
    cdef int run(self, object node, object inputs, object outputs) except -1


cdef class AddmmKernel:
    cdef readonly object fallback
    cdef int run(self, object node, object inputs, object outputs) except -1


cdef class AddmmActKernel:
    cdef readonly object fallback
    cdef int run(self, object root, object inputs, object outputs, object args) except -1
