# The elementwise-chain program runner of _fused.pyx for other Cython modules (engine/_replay.pyx).

from plast.backends.cpu._tensors cimport TensorBase

cdef int chain_run(bytes program, TensorBase out, object inputs) except -1
