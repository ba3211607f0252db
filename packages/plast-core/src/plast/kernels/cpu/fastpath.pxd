# The sum kernel of fastpath.pyx for other Cython modules (graph/_scheduler.pyx calls `run` with no Python call).

cdef class SumKernel:
    cdef readonly object fallback
    cdef int run(self, object node, object inputs, object outputs) except -1
