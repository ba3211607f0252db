# The tensor-level GEMM entry of _matmul.pyx for other Cython modules (engine/_replay.pyx).

from plast.backends.cpu._tensors cimport TensorBase

cdef int matmul_run(TensorBase out, TensorBase a, TensorBase b, TensorBase bias, int act, double alpha,
                    double beta) except -1
