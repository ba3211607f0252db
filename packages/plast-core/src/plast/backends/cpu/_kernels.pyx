# cython: language_level=3
# distutils: sources = src/plast/backends/cpu/csrc/elementwise.c src/plast/backends/cpu/csrc/philox.c
"""Thin wrappers over the C kernels in csrc/: they check nothing the op layer has already checked, take raw
addresses (arena memory), release the GIL, and pass the SIMD level and thread count from _runtime."""

from libc.stdint cimport uint32_t, uint64_t, uintptr_t

import numpy as np

from plast.backends.cpu._runtime cimport num_threads, simd_level, threads_for

cdef extern from "elementwise.h" nogil:
    int PLAST_MAX_NDIM
    int plast_binary_nd(int simd, int nthreads, int op, int dtype, int ndim, const Py_ssize_t *shape,
                        const char *a, const Py_ssize_t *a_strides, const char *b, const Py_ssize_t *b_strides,
                        char *out, const Py_ssize_t *out_strides)

cdef extern from "philox.h" nogil:
    void plast_philox_block(uint64_t seed, uint64_t block, uint32_t out[4])
    void plast_philox_uniform_f32(int nthreads, uint64_t seed, uint64_t offset, float *out, Py_ssize_t n, float low, float high)
    void plast_philox_uniform_f64(int nthreads, uint64_t seed, uint64_t offset, double *out, Py_ssize_t n, double low, double high)
    void plast_philox_normal_f32(int nthreads, uint64_t seed, uint64_t offset, float *out, Py_ssize_t n, float mean, float std)
    void plast_philox_normal_f64(int nthreads, uint64_t seed, uint64_t offset, double *out, Py_ssize_t n, double mean, double std)
    void plast_philox_u32(int nthreads, uint64_t seed, uint64_t offset, uint32_t *out, Py_ssize_t n)

BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_MAX, BIN_MIN = range(6)

DEF MAXD = 16


def binary_nd(int op, int dtype, shape, uintptr_t a, a_strides, uintptr_t b, b_strides,
              uintptr_t out, out_strides):
    """out = a <op> b over `shape`; strides in elements (0 for broadcast dims)."""
    cdef int nd = len(shape)
    if nd > MAXD:
        raise ValueError(f"at most {MAXD} dimensions are supported, got {nd}")
    cdef Py_ssize_t sh[MAXD]
    cdef Py_ssize_t sa[MAXD]
    cdef Py_ssize_t sb[MAXD]
    cdef Py_ssize_t so[MAXD]
    cdef int i
    for i in range(nd):
        sh[i] = shape[i]
        sa[i] = a_strides[i]
        sb[i] = b_strides[i]
        so[i] = out_strides[i]
    cdef int rc
    cdef int simd = simd_level(), nt = num_threads()
    with nogil:
        rc = plast_binary_nd(simd, nt, op, dtype, nd, sh, <const char *>a, sa, <const char *>b, sb,
                             <char *>out, so)
    if rc != 0:
        raise ValueError(f"binary kernel: unsupported op {op} for dtype code {dtype}")


_DTYPE_CODES = {np.dtype(np.int32): 1, np.dtype(np.int64): 2, np.dtype(np.float32): 3, np.dtype(np.float64): 4}


def binary_arrays(int op, a, b, out):
    """Test/bench entry: out[...] = a <op> b for numpy arrays of one dtype, broadcasting a and b to out."""
    a = np.asarray(a)
    b = np.asarray(b)
    if not (a.dtype == b.dtype == out.dtype) or a.dtype not in _DTYPE_CODES:
        raise TypeError(f"binary_arrays needs one supported dtype, got {a.dtype}, {b.dtype}, {out.dtype}")
    a = np.broadcast_to(a, out.shape)
    b = np.broadcast_to(b, out.shape)
    es = out.itemsize
    for arr in (a, b, out):
        if any(s % es for s in arr.strides):
            raise ValueError("strides must be multiples of the item size")
    binary_nd(op, _DTYPE_CODES[out.dtype], out.shape,
              a.__array_interface__["data"][0], tuple(s // es for s in a.strides),
              b.__array_interface__["data"][0], tuple(s // es for s in b.strides),
              out.__array_interface__["data"][0], tuple(s // es for s in out.strides))


def philox_block(uint64_t seed, uint64_t block):
    cdef uint32_t r[4]
    plast_philox_block(seed, block, r)
    return (r[0], r[1], r[2], r[3])


def philox_fill(str kind, int dtype, uint64_t seed, uint64_t offset, uintptr_t out, Py_ssize_t n, double p1, double p2):
    """Fill n elements at `out` from the stream (seed, offset). kind: 'uniform' (low, high), 'normal' (mean, std),
    'u32'. Returns the number of 128-bit blocks consumed."""
    cdef int nt = threads_for(n, 1 << 16)
    cdef int k = 0 if kind == "uniform" else 1 if kind == "normal" else 2
    if k == 2 and kind != "u32":
        raise ValueError(f"unknown distribution {kind!r}")
    with nogil:
        if k == 0:
            if dtype == 3:
                plast_philox_uniform_f32(nt, seed, offset, <float *>out, n, <float>p1, <float>p2)
            else:
                plast_philox_uniform_f64(nt, seed, offset, <double *>out, n, p1, p2)
        elif k == 1:
            if dtype == 3:
                plast_philox_normal_f32(nt, seed, offset, <float *>out, n, <float>p1, <float>p2)
            else:
                plast_philox_normal_f64(nt, seed, offset, <double *>out, n, p1, p2)
        else:
            plast_philox_u32(nt, seed, offset, <uint32_t *>out, n)
    if kind == "uniform" and dtype == 3 or kind == "u32":
        return (n + 3) // 4
    return (n + 1) // 2
