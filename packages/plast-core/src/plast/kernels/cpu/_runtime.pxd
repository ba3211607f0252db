# Run-time state shared by every CPU kernel module: the SIMD path in use and the thread count.
# Kernel modules cimport these so that one call of plast.set_num_threads / _set_simd reaches all of them.

cdef int simd_level() noexcept nogil
cdef int num_threads() noexcept nogil
cdef int threads_for(Py_ssize_t work, Py_ssize_t grain) noexcept nogil
cdef bint float_is64(int dtype, str what) except -1

# Work (elements, or multiply-adds for a GEMM) from which a kernel call releases the GIL. Below it the release
# and re-acquisition (~400 instructions, two mutex round trips) cost more than another Python thread could
# gain, and an eager step makes dozens of such tiny calls. OpenMP threads never need the GIL either way.
cdef enum:
    NOGIL_MIN_WORK = 16384
