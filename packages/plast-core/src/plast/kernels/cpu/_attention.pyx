# cython: language_level=3
# distutils: sources = src/plast/kernels/cpu/csrc/attention.c
# distutils: depends = src/plast/kernels/cpu/csrc/attention.h src/plast/kernels/cpu/csrc/attention_simd.h src/plast/kernels/cpu/csrc/attention_body.h src/plast/kernels/cpu/csrc/vmath_simd.h
"""Thin wrapper over the blocked attention kernel (csrc/attention.c), float32 and float64.

Operands are raw addresses with element strides along (batch, head, row, feature); lse operands use the first
three. The calls release the GIL and pass the SIMD level and thread count from _runtime; kernels_attention.py
decides when a case fits and lays tensors out as these 4-d operands.
"""

from libc.stdint cimport uintptr_t

from plast._core.codes cimport PLAST_DT_F32, PLAST_DT_F64
from plast.kernels.cpu._runtime cimport num_threads, simd_level

cdef extern from "attention.h" nogil:
    int PLAST_ATTN_EINVAL
    int PLAST_ATTN_ENOMEM

    ctypedef struct plast_attn_op:
        void *p
        Py_ssize_t sb, sh, sl, sd

    ctypedef struct plast_attn_dims:
        Py_ssize_t B, H, L, S, D, Dv
        double scale
        int causal

    int plast_attn_fwd(int simd, int nthreads, int dtype, const plast_attn_dims *dims, plast_attn_op q,
                       plast_attn_op k, plast_attn_op v, plast_attn_op out, plast_attn_op lse)
    int plast_attn_fwd_masked(int simd, int nthreads, int dtype, const plast_attn_dims *dims, plast_attn_op q,
                              plast_attn_op k, plast_attn_op v, plast_attn_op kmask, plast_attn_op out,
                              plast_attn_op lse)
    int plast_attn_bwd(int simd, int nthreads, int dtype, const plast_attn_dims *dims, plast_attn_op q,
                       plast_attn_op k, plast_attn_op v, plast_attn_op out, plast_attn_op lse,
                       plast_attn_op dout, plast_attn_op dq, plast_attn_op dk, plast_attn_op dv)

# the dtype codes the kernel takes (a float32 / float64 tensor's dtype.code)
F32 = PLAST_DT_F32
F64 = PLAST_DT_F64


cdef plast_attn_op _op(uintptr_t addr, tuple strides) except *:
    cdef plast_attn_op r
    if len(strides) not in (3, 4):
        raise ValueError(f"attention operand strides must be (batch, head, row[, feature]), got {strides}")
    r.p = <void *>addr
    r.sb = strides[0]
    r.sh = strides[1]
    r.sl = strides[2]
    r.sd = strides[3] if len(strides) == 4 else 0
    return r


cdef plast_attn_dims _dims(tuple shape, double scale, bint causal) except *:
    cdef plast_attn_dims d
    if len(shape) != 6:
        raise ValueError(f"attention dims must be (B, H, L, S, D, Dv), got {shape}")
    d.B, d.H, d.L, d.S, d.D, d.Dv = shape
    d.scale = scale
    d.causal = causal
    return d


cdef _check(int rc, str what, tuple shape, int dtype):
    if rc == PLAST_ATTN_ENOMEM:
        raise MemoryError(f"{what}: could not allocate scratch memory for (B, H, L, S, D, Dv) = {shape}")
    if rc != 0:
        raise ValueError(
            f"{what}: unsupported case (B, H, L, S, D, Dv) = {shape}, dtype code {dtype}: the kernel takes "
            f"float32/float64, head dims >= 1 and a finite scale"
        )


def forward(int dtype, tuple shape, double scale, bint causal, uintptr_t q, tuple qs, uintptr_t k, tuple ks,
            uintptr_t v, tuple vs, uintptr_t out, tuple outs, uintptr_t lse, tuple lses):
    """out (B, H, L, Dv) and lse (B, H, L) of softmax(q k^T * scale (+ causal mask)) v; shape is
    (B, H, L, S, D, Dv)."""
    cdef plast_attn_dims d = _dims(shape, scale, causal)
    cdef plast_attn_op oq = _op(q, qs), ok = _op(k, ks), ov = _op(v, vs), oo = _op(out, outs), ol = _op(lse, lses)
    cdef int rc, simd = simd_level(), nt = num_threads()
    with nogil:
        rc = plast_attn_fwd(simd, nt, dtype, &d, oq, ok, ov, oo, ol)
    _check(rc, "attention forward kernel", shape, dtype)


def forward_masked(int dtype, tuple shape, double scale, uintptr_t q, tuple qs, uintptr_t k, tuple ks,
                   uintptr_t v, tuple vs, uintptr_t m, tuple ms, uintptr_t out, tuple outs, uintptr_t lse,
                   tuple lses):
    """forward() with a key mask m: bytes (nonzero = may be attended) with strides (batch, head, key), the same
    for every query row (a padding mask). Not causal."""
    cdef plast_attn_dims d = _dims(shape, scale, False)
    cdef plast_attn_op oq = _op(q, qs), ok = _op(k, ks), ov = _op(v, vs), oo = _op(out, outs), ol = _op(lse, lses)
    cdef plast_attn_op om = _op(m, ms)
    if m == 0:
        raise ValueError("attention forward_masked: the mask address is NULL")
    cdef int rc, simd = simd_level(), nt = num_threads()
    with nogil:
        rc = plast_attn_fwd_masked(simd, nt, dtype, &d, oq, ok, ov, om, oo, ol)
    _check(rc, "attention forward kernel (key mask)", shape, dtype)


def backward(int dtype, tuple shape, double scale, bint causal, uintptr_t q, tuple qs, uintptr_t k, tuple ks,
             uintptr_t v, tuple vs, uintptr_t out, tuple outs, uintptr_t lse, tuple lses, uintptr_t dout,
             tuple douts, uintptr_t dq, tuple dqs, uintptr_t dk, tuple dks, uintptr_t dv, tuple dvs):
    """dq, dk, dv of forward() given its out, lse and dout = d(loss)/d(out)."""
    cdef plast_attn_dims d = _dims(shape, scale, causal)
    cdef plast_attn_op oq = _op(q, qs), ok = _op(k, ks), ov = _op(v, vs), oo = _op(out, outs), ol = _op(lse, lses)
    cdef plast_attn_op og = _op(dout, douts), gq = _op(dq, dqs), gk = _op(dk, dks), gv = _op(dv, dvs)
    cdef int rc, simd = simd_level(), nt = num_threads()
    with nogil:
        rc = plast_attn_bwd(simd, nt, dtype, &d, oq, ok, ov, oo, ol, og, gq, gk, gv)
    _check(rc, "attention backward kernel", shape, dtype)
