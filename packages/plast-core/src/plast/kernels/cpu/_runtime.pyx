# cython: language_level=3
"""Run-time selection of the SIMD path and the OpenMP thread count for plast's CPU kernels.

The SIMD path is the best this CPU supports unless ``PLAST_SIMD=scalar|avx2|avx512|avx512_bf16|amx`` asks for
another (tests use it to check every path). The levels form one order; the two above avx512 add bfloat16 matrix
arithmetic (vdpbf16ps, then AMX tiles) and change only the 16-bit GEMM: every other kernel runs its AVX-512 code
there, so ``VECTOR_NAMES`` lists the paths those kernels tell apart. Threads default to the number of usable cores (affinity and cgroup quota aware) and
follow ``OMP_NUM_THREADS`` and ``plast.set_num_threads``.

After ``os.fork()`` (``multiprocessing``'s default start method on Linux) the child runs every kernel on one
thread: GNU libgomp's thread team is not fork-safe (the child inherits a pool whose threads do not exist, and the
next parallel region waits on them forever), so a pthread_atfork child handler sets the thread count to 1, and
``set_num_threads`` in such a child keeps it at 1 with a RuntimeWarning. A child started with ``spawn`` or
``forkserver`` is a fresh process and uses threads as usual.
"""

import os
import warnings

from plast._core.codes cimport PLAST_DT_F32, PLAST_DT_F64

cdef extern from "plast_simd.h":
    int PLAST_SIMD_SCALAR
    int PLAST_SIMD_AVX2
    int PLAST_SIMD_AVX512
    int PLAST_SIMD_AVX512_BF16
    int PLAST_SIMD_AMX
    int plast_cpu_simd_max() nogil

cdef extern from *:
    """
    #if PLAST_HAVE_OPENMP
    #include <omp.h>
    #endif
    """
    int PLAST_HAVE_OPENMP

SIMD_NAMES = ("scalar", "avx2", "avx512", "avx512_bf16", "amx")
VECTOR_NAMES = SIMD_NAMES[:3]  # what the float32/float64/integer kernels distinguish
assert SIMD_NAMES.index("amx") == PLAST_SIMD_AMX and SIMD_NAMES.index("avx512_bf16") == PLAST_SIMD_AVX512_BF16

cdef int _simd = PLAST_SIMD_SCALAR
cdef int _simd_max = PLAST_SIMD_SCALAR
cdef int _threads = 1
# Set in a forked child whose parent may have started an OpenMP team (it had more than one thread configured):
# such a child must never enter a parallel region, see the module docstring.
cdef int _forked_team = 0

cdef extern from "<pthread.h>" nogil:
    int pthread_atfork(void (*prepare)() noexcept nogil, void (*parent)() noexcept nogil,
                       void (*child)() noexcept nogil)


cdef void _atfork_child() noexcept nogil:
    # NOTE: runs in the child right after fork(), before any Python code; only plain stores are safe here.
    global _threads, _forked_team
    if _threads > 1 or _forked_team:
        _forked_team = 1
    _threads = 1


cdef int simd_level() noexcept nogil:
    return _simd


cdef int num_threads() noexcept nogil:
    return _threads


cdef int threads_for(Py_ssize_t work, Py_ssize_t grain) noexcept nogil:
    """Threads worth using for `work` units when one thread should get at least `grain` of them."""
    if _threads <= 1 or work < 2 * grain:
        return 1
    cdef Py_ssize_t t = work // grain
    return <int>t if t < _threads else _threads


cdef bint float_is64(int dtype, str what) except -1:
    """True for float64, False for float32 (the two dtypes the float kernels take); ValueError naming `what`
    for any other dtype code."""
    if dtype == PLAST_DT_F32:
        return False
    if dtype == PLAST_DT_F64:
        return True
    raise ValueError(
        f"{what}: dtype code must be {PLAST_DT_F32} (float32) or {PLAST_DT_F64} (float64), got {dtype}"
    )


def usable_cores():
    """Cores this process may run on: CPU affinity, capped by a cgroup v2/v1 CPU quota if one is set."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = None
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            q, period = f.read().split()[:2]
            if q != "max":
                quota = int(q) / int(period)
    except (OSError, ValueError):
        try:
            with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
                q = int(f.read())
            with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
                period = int(f.read())
            if q > 0 and period > 0:
                quota = q / period
        except (OSError, ValueError):
            pass
    if quota is not None:
        n = min(n, max(1, int(quota)))
    return max(1, n)


def have_openmp():
    return bool(PLAST_HAVE_OPENMP)


def simd_available():
    return SIMD_NAMES[: _simd_max + 1]


def vector_paths():
    """The SIMD paths this CPU supports that the float32/float64/integer kernels tell apart (scalar, avx2, avx512)."""
    return tuple(p for p in simd_available() if p in VECTOR_NAMES)


def get_simd():
    """Name of the SIMD path the kernels use now."""
    return SIMD_NAMES[_simd]


def set_simd(name):
    """Force a SIMD path (one of SIMD_NAMES); a path this CPU lacks raises RuntimeError."""
    global _simd
    if name not in SIMD_NAMES:
        raise ValueError(f"unknown SIMD path {name!r}; expected one of {', '.join(SIMD_NAMES)}")
    level = SIMD_NAMES.index(name)
    if level > _simd_max:
        raise RuntimeError(
            f"this CPU does not support the {name} path (best available: {SIMD_NAMES[_simd_max]})"
        )
    _simd = level


def get_num_threads():
    return _threads


def set_num_threads(n):
    """Use `n` threads in CPU kernels (capped at the usable cores; tiny ops always run on one)."""
    global _threads
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_num_threads expects a positive int, got {n!r}")
    if not PLAST_HAVE_OPENMP:
        _threads = 1
        return
    if _forked_team and n > 1:
        warnings.warn(
            "plast runs CPU kernels on one thread in a process forked after its OpenMP threads may have started "
            "(GNU OpenMP is not fork-safe: a parallel region would hang); use the 'spawn' or 'forkserver' "
            "start method to get threads in the child",
            RuntimeWarning,
            stacklevel=2,
        )
        _threads = 1
        return
    _threads = min(n, usable_cores())


def _init():
    global _simd, _simd_max, _threads
    _simd_max = plast_cpu_simd_max()
    _simd = _simd_max
    forced = os.environ.get("PLAST_SIMD")
    if forced:
        set_simd(forced.strip().lower())
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    try:
        want = int(env) if env else usable_cores()
    except ValueError:
        want = usable_cores()
    set_num_threads(max(1, want))
    if pthread_atfork(NULL, NULL, _atfork_child) != 0:
        raise RuntimeError("plast: pthread_atfork failed; forking after CPU kernels ran could hang")


_init()
