# Run-time state shared by every CPU kernel module: the SIMD path in use and the thread count.
# Kernel modules cimport these so that one call of plast.set_num_threads / _set_simd reaches all of them.

cdef int simd_level() noexcept nogil
cdef int num_threads() noexcept nogil
cdef int threads_for(Py_ssize_t work, Py_ssize_t grain) noexcept nogil
