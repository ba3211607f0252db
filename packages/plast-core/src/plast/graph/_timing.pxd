# The profiler's counters (graph/_timing.pyx): the scheduler, the replay player and the in-place updates time
# their kernel calls here while plast.profiler.profile is active.

cdef int *timing_flag() noexcept
cdef unsigned long long now_ns() noexcept nogil
cdef int add_time(object key, unsigned long long t0) except -1
