# Tensor-level kernels of _kernels.pyx for other Cython modules (_jit/_replay.pyx runs them from jit plans
# without a Python call). Each returns -1 with an exception set on error.

from plast.kernels.cpu._tensors cimport TensorBase

cdef int binary_run(int op, TensorBase a, TensorBase b, TensorBase out) except -1
cdef int copy_run(TensorBase x, TensorBase out) except -1
