# The elementwise-chain program runner of _fused.pyx and its group kernel, for other Cython modules
# (_jit/_replay.pyx, graph/_scheduler.pyx).

from plast.kernels.cpu._tensors cimport TensorBase

cdef int chain_run(bytes program, TensorBase out, object inputs) except -1


cdef class ChainKernel:
    cdef readonly object device_kernel
    cdef int run(self, object root, object inputs, object outputs, object args) except -1
