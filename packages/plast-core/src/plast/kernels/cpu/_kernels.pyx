# cython: language_level=3
# distutils: sources = src/plast/kernels/cpu/csrc/elementwise.c src/plast/kernels/cpu/csrc/philox.c src/plast/kernels/cpu/csrc/convert16.c
# distutils: depends = src/plast/kernels/cpu/csrc/convert16.h src/plast/kernels/cpu/csrc/half.h
"""Thin wrappers over the C kernels in csrc/: they check nothing the op layer has already checked, take raw
addresses (arena memory), release the GIL, and pass the SIMD level and thread count from _runtime."""

from libc.stdint cimport uint32_t, uint64_t, uintptr_t
from libc.string cimport memcpy

import numpy as np

from ._views import np_view

from plast.kernels.cpu._runtime cimport NOGIL_MIN_WORK, num_threads, simd_level, threads_for
from plast.kernels.cpu._tensors cimport TensorBase, fill_bcast_strides, fill_shape, tensor_ptr
from plast._core.codes cimport PLAST_BIN_COUNT, PLAST_DT_BOOL, PLAST_DT_F32, PLAST_DT_F64, PLAST_DT_I32, PLAST_DT_I64

from plast._core import codes as _codes

cdef extern from "elementwise.h" nogil:
    int PLAST_MAX_NDIM
    int plast_binary_nd(int simd, int nthreads, int op, int dtype, int ndim, const Py_ssize_t *shape,
                        const char *a, const Py_ssize_t *a_strides, const char *b, const Py_ssize_t *b_strides,
                        char *out, const Py_ssize_t *out_strides)

cdef extern from "convert16.h" nogil:
    int plast_convert16(int simd, int nthreads, int src_code, const void *src, int dst_code, void *dst,
                        Py_ssize_t n)

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


cdef void _copy_nd(int nd, const Py_ssize_t *sh, const char *src, const Py_ssize_t *ss, char *dst,
                   const Py_ssize_t *ds, Py_ssize_t isz) noexcept nogil:
    """dst = src elementwise over `sh` (strides in bytes); the innermost dim is a memcpy when both are unit."""
    cdef Py_ssize_t idx[MAXD]
    cdef Py_ssize_t i, k, n = sh[nd - 1], s_in = ss[nd - 1], s_out = ds[nd - 1]
    cdef const char *ps
    cdef char *pd
    for k in range(nd):
        idx[k] = 0
    while True:
        ps = src
        pd = dst
        for k in range(nd - 1):
            ps += idx[k] * ss[k]
            pd += idx[k] * ds[k]
        if s_in == isz and s_out == isz:
            memcpy(pd, ps, n * isz)
        elif isz == 4:
            for i in range(n):
                (<uint32_t *>(pd + i * s_out))[0] = (<const uint32_t *>(ps + i * s_in))[0]
        elif isz == 8:
            for i in range(n):
                (<uint64_t *>(pd + i * s_out))[0] = (<const uint64_t *>(ps + i * s_in))[0]
        else:
            for i in range(n):
                memcpy(pd + i * s_out, ps + i * s_in, isz)
        k = nd - 2
        while k >= 0:
            idx[k] += 1
            if idx[k] < sh[k]:
                break
            idx[k] = 0
            k -= 1
        if k < 0:
            return


cdef int copy_run(TensorBase x, TensorBase out) except -1:
    """out[...] = x for one dtype, any strides (x broadcast to out's shape), and the casts between float32 and
    bfloat16/float16 of contiguous tensors (csrc/convert16.c): 1, or 0 for other casts (the caller uses numpy)."""
    cdef Py_ssize_t n16
    cdef int cx, co, rc
    cdef const char *p16
    cdef char *q16
    if x.dtype is not out.dtype:
        if x.dtype.itemsize + out.dtype.itemsize != 6 or x._shape != out._shape:  # one 4-byte, one 2-byte type
            return 0
        if not x.is_contiguous() or not out.is_contiguous():
            return 0
        n16, cx, co, p16, q16 = out.numel(), x.dtype.code, out.dtype.code, tensor_ptr(x), tensor_ptr(out)
        if n16 >= NOGIL_MIN_WORK:
            with nogil:
                rc = plast_convert16(simd_level(), num_threads(), cx, p16, co, q16, n16)
        else:
            rc = plast_convert16(simd_level(), 1, cx, p16, co, q16, n16)
        return 1 if rc == 0 else 0
    cdef Py_ssize_t sh[MAXD]
    cdef Py_ssize_t sx[MAXD]
    cdef Py_ssize_t so[MAXD]
    cdef int nd = fill_shape(out._shape, sh, MAXD), i
    cdef Py_ssize_t n = 1, isz = out.dtype.itemsize
    for i in range(nd):
        n *= sh[i]
    if n == 0:
        return 1
    cdef const char *px = tensor_ptr(x)
    cdef char *po = tensor_ptr(out)
    if nd == 0:
        memcpy(po, px, isz)
        return 1
    fill_bcast_strides(x, sh, nd, sx)
    fill_bcast_strides(out, sh, nd, so)
    for i in range(nd):
        sx[i] *= isz
        so[i] *= isz
    if n >= NOGIL_MIN_WORK:
        with nogil:
            _copy_nd(nd, sh, px, sx, po, so, isz)
    else:
        _copy_nd(nd, sh, px, sx, po, so, isz)
    return 1


def copy_same_dtype(TensorBase x, TensorBase out):
    """out[...] = x for one dtype, any strides; False when the dtypes differ (see copy_run)."""
    return copy_run(x, out) == 1


# the binary ops the C kernel takes (add..minimum), numbered in _core/codes.h
BINARY_CODES = {name: code for name, code in _codes.BINARY_CODES.items() if code < PLAST_BIN_COUNT}
# bool arithmetic is logical, as in torch (the C kernel takes the numeric dtypes)
cdef dict _BOOL_BINARY = {
    "add": np.logical_or,
    "mul": np.logical_and,
    "maximum": np.logical_or,
    "minimum": np.logical_and,
}


def bool_binary(node, inputs, outputs):
    """add/mul/maximum/minimum of bool tensors: logical or/and."""
    a, b = inputs
    out = outputs[0]
    if out.numel():
        _BOOL_BINARY[node.op.name](np_view(a), np_view(b), out=np_view(out))


cdef int binary_run(int op, TensorBase a, TensorBase b, TensorBase out) except -1:
    """out = a <op> b (numeric dtypes) with broadcasting and any strides, straight from the tensors."""
    cdef int code = out.dtype.code
    cdef Py_ssize_t sh[MAXD]
    cdef Py_ssize_t sa[MAXD]
    cdef Py_ssize_t sb[MAXD]
    cdef Py_ssize_t so[MAXD]
    cdef int nd = fill_shape(out._shape, sh, MAXD), i
    cdef Py_ssize_t n = 1
    for i in range(nd):
        n *= sh[i]
    if n == 0:
        return 0
    fill_bcast_strides(a, sh, nd, sa)
    fill_bcast_strides(b, sh, nd, sb)
    fill_bcast_strides(out, sh, nd, so)
    cdef const char *pa = tensor_ptr(a)
    cdef const char *pb = tensor_ptr(b)
    cdef char *po = tensor_ptr(out)
    cdef int rc
    cdef int simd = simd_level(), nt = num_threads()
    if n >= NOGIL_MIN_WORK:
        with nogil:
            rc = plast_binary_nd(simd, nt, op, code, nd, sh, pa, sa, pb, sb, po, so)
    else:
        rc = plast_binary_nd(simd, nt, op, code, nd, sh, pa, sa, pb, sb, po, so)
    if rc != 0:
        raise ValueError(f"binary kernel: unsupported op code {op} for dtype {out.dtype}")
    return 0


def binary(node, inputs, outputs):
    """The op table's kernel for add/sub/mul/div/maximum/minimum: out = a <op> b with broadcasting, any strides
    (bool arithmetic is logical, as in torch: kernels.bool_binary)."""
    cdef TensorBase out = outputs[0]
    if out.dtype.code == PLAST_DT_BOOL:
        return bool_binary(node, inputs, outputs)
    binary_run(BINARY_CODES[node.op.name], inputs[0], inputs[1], out)


# the dtypes the binary kernel takes
_DTYPE_CODES = {
    np.dtype(np.int32): PLAST_DT_I32,
    np.dtype(np.int64): PLAST_DT_I64,
    np.dtype(np.float32): PLAST_DT_F32,
    np.dtype(np.float64): PLAST_DT_F64,
}


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
    if k < 2 and dtype != PLAST_DT_F32 and dtype != PLAST_DT_F64:  # the element size decides how far it writes
        raise ValueError(
            f"philox_fill: {kind} draws are float32 (code {PLAST_DT_F32}) or float64 (code {PLAST_DT_F64}), "
            f"got code {dtype}"
        )
    with nogil:
        if k == 0:
            if dtype == PLAST_DT_F32:
                plast_philox_uniform_f32(nt, seed, offset, <float *>out, n, <float>p1, <float>p2)
            else:
                plast_philox_uniform_f64(nt, seed, offset, <double *>out, n, p1, p2)
        elif k == 1:
            if dtype == PLAST_DT_F32:
                plast_philox_normal_f32(nt, seed, offset, <float *>out, n, <float>p1, <float>p2)
            else:
                plast_philox_normal_f64(nt, seed, offset, <double *>out, n, p1, p2)
        else:
            plast_philox_u32(nt, seed, offset, <uint32_t *>out, n)
    if kind == "uniform" and dtype == PLAST_DT_F32 or kind == "u32":
        return (n + 3) // 4
    return (n + 1) // 2
