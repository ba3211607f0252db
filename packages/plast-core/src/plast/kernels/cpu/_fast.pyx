# cython: language_level=3
# distutils: sources = src/plast/kernels/cpu/csrc/unary.c src/plast/kernels/cpu/csrc/softmax.c src/plast/kernels/cpu/csrc/layernorm.c src/plast/kernels/cpu/csrc/xent.c src/plast/kernels/cpu/csrc/embedding.c src/plast/kernels/cpu/csrc/reduce.c
"""Thin wrappers over the vectorized kernels in csrc/ (unary math, softmax family, layer_norm, cross-entropy,
embedding, reductions). They take raw addresses and element strides, release the GIL and pass the SIMD level
and thread count from _runtime; the kernel functions in kernels*.py decide when a case fits them.

Float data is float32 or float64: the softmax, logsumexp, layer_norm, cross_entropy and reduce entries take a
trailing `dtype` (the dtype code, F32 or F64: codes.h's PLAST_DT_F32 / PLAST_DT_F64; float32 when left out), unary_nd and embedding_bw take it
first; every float pointer of one call has that dtype.

Every entry returns normally or raises: a C error code becomes ValueError (unsupported case), MemoryError,
or IndexError naming the bad index.
"""

from libc.stdint cimport int32_t, int64_t, uintptr_t


from plast.kernels.cpu._runtime cimport NOGIL_MIN_WORK, float_is64, num_threads, simd_level
from plast._core.codes cimport (
    PLAST_DT_F32,
    PLAST_DT_F64,
    PLAST_RD_MAX,
    PLAST_RD_MIN,
    PLAST_RD_SUM,
    PLAST_SM_LOG_SOFTMAX,
    PLAST_SM_SAFE_SOFTMAX,
    PLAST_SM_SOFTMAX,
    PLAST_UN_COUNT,
)
from plast._core.codes import REDUCTION_CODES, UNARY_CODES as _UNARY_CODES

cdef extern from "unary.h" nogil:
    int plast_unary_nd(int simd, int nthreads, int op, int dtype, int ndim, const Py_ssize_t *shape,
                       const char *x, const Py_ssize_t *x_strides, char *y, const Py_ssize_t *y_strides)

cdef extern from "softmax.h" nogil:
    ctypedef struct plast_op3:
        float *p
        Py_ssize_t so, sn, si
    int plast_softmax_f32(int simd, int nthreads, int mode, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner,
                          plast_op3 x, plast_op3 y)
    int plast_softmax_bw_f32(int simd, int nthreads, int mode, Py_ssize_t outer, Py_ssize_t n,
                             Py_ssize_t inner, plast_op3 g, plast_op3 y, plast_op3 out)
    int plast_logsumexp_f32(int simd, int nthreads, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner,
                            plast_op3 x, plast_op3 out)
    ctypedef struct plast_op3_f64:
        double *p
        Py_ssize_t so, sn, si
    int plast_softmax_f64(int simd, int nthreads, int mode, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner,
                          plast_op3_f64 x, plast_op3_f64 y)
    int plast_softmax_bw_f64(int simd, int nthreads, int mode, Py_ssize_t outer, Py_ssize_t n,
                             Py_ssize_t inner, plast_op3_f64 g, plast_op3_f64 y, plast_op3_f64 out)
    int plast_logsumexp_f64(int simd, int nthreads, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner,
                            plast_op3_f64 x, plast_op3_f64 out)

cdef extern from "layernorm.h" nogil:
    int plast_layer_norm_f32(int simd, int nthreads, Py_ssize_t rows, Py_ssize_t n, const float *x,
                             Py_ssize_t x_row, const float *w, const float *b, float eps, float *y, float *mean,
                             float *rstd)
    int plast_layer_norm_bw_f32(int simd, int nthreads, Py_ssize_t rows, Py_ssize_t n, const float *gy,
                                Py_ssize_t gy_row, const float *x, Py_ssize_t x_row, const float *mean,
                                const float *rstd, const float *w, float *gx, float *gw, float *gb)
    int plast_layer_norm_f64(int simd, int nthreads, Py_ssize_t rows, Py_ssize_t n, const double *x,
                             Py_ssize_t x_row, const double *w, const double *b, double eps, double *y,
                             double *mean, double *rstd)
    int plast_layer_norm_bw_f64(int simd, int nthreads, Py_ssize_t rows, Py_ssize_t n, const double *gy,
                                Py_ssize_t gy_row, const double *x, Py_ssize_t x_row, const double *mean,
                                const double *rstd, const double *w, double *gx, double *gw, double *gb)

cdef extern from "xent.h" nogil:
    int PLAST_XENT_BAD_TARGET
    int plast_xent_fwd_f32(int simd, int nthreads, Py_ssize_t outer, Py_ssize_t k, Py_ssize_t inner,
                           plast_op3 x, const int64_t *t64, const int32_t *t32, const float *w,
                           int64_t ignore_index, float eps, int reduction, float *out, int64_t *bad)
    int plast_xent_bw_f32(int simd, int nthreads, Py_ssize_t outer, Py_ssize_t k, Py_ssize_t inner,
                          plast_op3 x, const int64_t *t64, const int32_t *t32, const float *w,
                          int64_t ignore_index, float eps, int reduction, const float *g, plast_op3 gx,
                          int64_t *bad)
    int plast_xent_fwd_f64(int simd, int nthreads, Py_ssize_t outer, Py_ssize_t k, Py_ssize_t inner,
                           plast_op3_f64 x, const int64_t *t64, const int32_t *t32, const double *w,
                           int64_t ignore_index, double eps, int reduction, double *out, int64_t *bad)
    int plast_xent_bw_f64(int simd, int nthreads, Py_ssize_t outer, Py_ssize_t k, Py_ssize_t inner,
                          plast_op3_f64 x, const int64_t *t64, const int32_t *t32, const double *w,
                          int64_t ignore_index, double eps, int reduction, const double *g, plast_op3_f64 gx,
                          int64_t *bad)

cdef extern from "embedding.h" nogil:
    int PLAST_EMB_BAD_ID
    int plast_embedding_fwd(int nthreads, Py_ssize_t nids, const int64_t *ids64, const int32_t *ids32,
                            Py_ssize_t num, const char *w, Py_ssize_t w_row, Py_ssize_t row_bytes, char *out,
                            int64_t padding_idx, int zero_padding, int64_t *bad)
    int plast_embedding_bw(int simd, int nthreads, int dtype, Py_ssize_t nids, const int64_t *ids64,
                           const int32_t *ids32, Py_ssize_t num, Py_ssize_t dim, const char *g, Py_ssize_t g_row,
                           char *out, int64_t padding_idx, int64_t *bad)

cdef extern from "reduce.h" nogil:
    int plast_reduce_f32(int simd, int nthreads, int op, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner,
                         plast_op3 x, float *out)
    int plast_reduce_f64(int simd, int nthreads, int op, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner,
                         plast_op3_f64 x, double *out)

# the codes of _core/codes.h these kernels take: the first PLAST_UN_COUNT unary ops, three softmax modes, three
# reductions
UNARY_CODES = {name: code for name, code in _UNARY_CODES.items() if code < PLAST_UN_COUNT}
UNARY_OPS = tuple(sorted(UNARY_CODES, key=UNARY_CODES.get))  # by code
SM_SOFTMAX, SM_SAFE_SOFTMAX, SM_LOG_SOFTMAX = PLAST_SM_SOFTMAX, PLAST_SM_SAFE_SOFTMAX, PLAST_SM_LOG_SOFTMAX
RD_SUM, RD_MAX, RD_MIN = PLAST_RD_SUM, PLAST_RD_MAX, PLAST_RD_MIN
F32, F64 = PLAST_DT_F32, PLAST_DT_F64

DEF MAXD = 16


cdef _check(int rc, str what):
    if rc == -2:
        raise MemoryError(f"{what}: could not allocate scratch memory")
    if rc != 0:
        raise ValueError(f"{what}: unsupported case (code {rc})")


cdef plast_op3 _op3(uintptr_t addr, strides):
    cdef plast_op3 r
    r.p = <float *>addr
    r.so = strides[0]
    r.sn = strides[1]
    r.si = strides[2]
    return r


cdef plast_op3_f64 _op3d(uintptr_t addr, strides):
    cdef plast_op3_f64 r
    r.p = <double *>addr
    r.so = strides[0]
    r.sn = strides[1]
    r.si = strides[2]
    return r


def unary_nd(int op, int dtype, shape, uintptr_t x, x_strides, uintptr_t y, y_strides):
    """y = op(x) over `shape` (dtype code F32 or F64); strides in elements."""
    cdef int nd = len(shape)
    if nd > MAXD:
        raise ValueError(f"at most {MAXD} dimensions are supported, got {nd}")
    cdef Py_ssize_t sh[MAXD]
    cdef Py_ssize_t sx[MAXD]
    cdef Py_ssize_t sy[MAXD]
    cdef int i, rc
    for i in range(nd):
        sh[i] = shape[i]
        sx[i] = x_strides[i]
        sy[i] = y_strides[i]
    cdef int simd = simd_level(), nt = num_threads()
    with nogil:
        rc = plast_unary_nd(simd, nt, op, dtype, nd, sh, <const char *>x, sx, <char *>y, sy)
    _check(rc, "unary kernel")


def softmax3d(int mode, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, uintptr_t x, xs, uintptr_t y, ys,
              int dtype=F32):
    """softmax (mode 0), safe softmax (1) or log_softmax (2) over n of (outer, n, inner) operands."""
    cdef bint f64 = float_is64(dtype, "softmax kernel")
    cdef plast_op3 a = _op3(x, xs), b = _op3(y, ys)
    cdef plast_op3_f64 ad = _op3d(x, xs), bd = _op3d(y, ys)
    cdef int rc, simd = simd_level(), nt = num_threads()
    with nogil:
        if f64:
            rc = plast_softmax_f64(simd, nt, mode, outer, n, inner, ad, bd)
        else:
            rc = plast_softmax_f32(simd, nt, mode, outer, n, inner, a, b)
    _check(rc, "softmax kernel")


def softmax_bw3d(int mode, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, uintptr_t g, gs, uintptr_t y, ys,
                 uintptr_t out, os, int dtype=F32):
    cdef bint f64 = float_is64(dtype, "softmax backward kernel")
    cdef plast_op3 a = _op3(g, gs), b = _op3(y, ys), c = _op3(out, os)
    cdef plast_op3_f64 ad = _op3d(g, gs), bd = _op3d(y, ys), cd = _op3d(out, os)
    cdef int rc, simd = simd_level(), nt = num_threads()
    with nogil:
        if f64:
            rc = plast_softmax_bw_f64(simd, nt, mode, outer, n, inner, ad, bd, cd)
        else:
            rc = plast_softmax_bw_f32(simd, nt, mode, outer, n, inner, a, b, c)
    _check(rc, "softmax backward kernel")


def logsumexp3d(Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, uintptr_t x, xs, uintptr_t out, os,
                int dtype=F32):
    cdef bint f64 = float_is64(dtype, "logsumexp kernel")
    cdef plast_op3 a = _op3(x, xs), b = _op3(out, os)
    cdef plast_op3_f64 ad = _op3d(x, xs), bd = _op3d(out, os)
    cdef int rc, simd = simd_level(), nt = num_threads()
    with nogil:
        if f64:
            rc = plast_logsumexp_f64(simd, nt, outer, n, inner, ad, bd)
        else:
            rc = plast_logsumexp_f32(simd, nt, outer, n, inner, a, b)
    _check(rc, "logsumexp kernel")


def layer_norm(Py_ssize_t rows, Py_ssize_t n, uintptr_t x, Py_ssize_t x_row, uintptr_t w, uintptr_t b, double eps,
               uintptr_t y, uintptr_t mean, uintptr_t rstd, int dtype=F32):
    """layer norm of `rows` rows of n contiguous elements (w, b: 0 when absent)."""
    cdef bint f64 = float_is64(dtype, "layer_norm kernel")
    cdef int rc, simd = simd_level(), nt = num_threads()
    with nogil:
        if f64:
            rc = plast_layer_norm_f64(simd, nt, rows, n, <const double *>x, x_row, <const double *>w,
                                      <const double *>b, eps, <double *>y, <double *>mean, <double *>rstd)
        else:
            rc = plast_layer_norm_f32(simd, nt, rows, n, <const float *>x, x_row, <const float *>w,
                                      <const float *>b, <float>eps, <float *>y, <float *>mean, <float *>rstd)
    _check(rc, "layer_norm kernel")


def layer_norm_bw(Py_ssize_t rows, Py_ssize_t n, uintptr_t gy, Py_ssize_t gy_row, uintptr_t x, Py_ssize_t x_row,
                  uintptr_t mean, uintptr_t rstd, uintptr_t w, uintptr_t gx, uintptr_t gw, uintptr_t gb,
                  int dtype=F32):
    cdef bint f64 = float_is64(dtype, "layer_norm backward kernel")
    cdef int rc, simd = simd_level(), nt = num_threads()
    with nogil:
        if f64:
            rc = plast_layer_norm_bw_f64(simd, nt, rows, n, <const double *>gy, gy_row, <const double *>x,
                                         x_row, <const double *>mean, <const double *>rstd, <const double *>w,
                                         <double *>gx, <double *>gw, <double *>gb)
        else:
            rc = plast_layer_norm_bw_f32(simd, nt, rows, n, <const float *>gy, gy_row, <const float *>x,
                                         x_row, <const float *>mean, <const float *>rstd, <const float *>w,
                                         <float *>gx, <float *>gw, <float *>gb)
    _check(rc, "layer_norm backward kernel")


cdef _bad(int rc, int64_t bad, str what, str msg):
    if rc == -3:
        raise IndexError(msg.format(bad=bad))
    _check(rc, what)


def cross_entropy(Py_ssize_t outer, Py_ssize_t k, Py_ssize_t inner, uintptr_t x, xs, uintptr_t t, int t_is64,
                  uintptr_t w, int64_t ignore_index, double eps, str reduction, uintptr_t out, int dtype=F32):
    """cross-entropy with class-index targets (contiguous, int64 if t_is64 else int32)."""
    cdef bint f64 = float_is64(dtype, "cross_entropy kernel")
    cdef plast_op3 a = _op3(x, xs)
    cdef plast_op3_f64 ad = _op3d(x, xs)
    cdef int rc, simd = simd_level(), nt = num_threads(), red = REDUCTION_CODES[reduction]
    cdef int64_t bad = 0
    cdef const int64_t *t64 = <const int64_t *>t if t_is64 else NULL
    cdef const int32_t *t32 = NULL if t_is64 else <const int32_t *>t
    with nogil:
        if f64:
            rc = plast_xent_fwd_f64(simd, nt, outer, k, inner, ad, t64, t32, <const double *>w, ignore_index,
                                    eps, red, <double *>out, &bad)
        else:
            rc = plast_xent_fwd_f32(simd, nt, outer, k, inner, a, t64, t32, <const float *>w, ignore_index,
                                    <float>eps, red, <float *>out, &bad)
    _bad(rc, bad, "cross_entropy kernel",
         "cross_entropy: target {bad} is out of bounds for %d classes (expected 0 <= target < %d, "
         "or ignore_index=%d)" % (k, k, ignore_index))


def cross_entropy_bw(Py_ssize_t outer, Py_ssize_t k, Py_ssize_t inner, uintptr_t x, xs, uintptr_t t, int t_is64,
                     uintptr_t w, int64_t ignore_index, double eps, str reduction, uintptr_t g, uintptr_t gx, gxs,
                     int dtype=F32):
    cdef bint f64 = float_is64(dtype, "cross_entropy backward kernel")
    cdef plast_op3 a = _op3(x, xs), b = _op3(gx, gxs)
    cdef plast_op3_f64 ad = _op3d(x, xs), bd = _op3d(gx, gxs)
    cdef int rc, simd = simd_level(), nt = num_threads(), red = REDUCTION_CODES[reduction]
    cdef int64_t bad = 0
    cdef const int64_t *t64 = <const int64_t *>t if t_is64 else NULL
    cdef const int32_t *t32 = NULL if t_is64 else <const int32_t *>t
    with nogil:
        if f64:
            rc = plast_xent_bw_f64(simd, nt, outer, k, inner, ad, t64, t32, <const double *>w, ignore_index,
                                   eps, red, <const double *>g, bd, &bad)
        else:
            rc = plast_xent_bw_f32(simd, nt, outer, k, inner, a, t64, t32, <const float *>w, ignore_index,
                                   <float>eps, red, <const float *>g, b, &bad)
    _bad(rc, bad, "cross_entropy backward kernel",
         "cross_entropy: target {bad} is out of bounds for %d classes (expected 0 <= target < %d, "
         "or ignore_index=%d)" % (k, k, ignore_index))


def embedding(Py_ssize_t nids, uintptr_t ids, int ids_is64, Py_ssize_t num, uintptr_t w, Py_ssize_t w_row_bytes,
              Py_ssize_t row_bytes, uintptr_t out, padding_idx, bint zero_padding):
    """out[r] = w[ids[r]] row by row (any element size); ids contiguous."""
    cdef int rc, nt = num_threads()
    cdef int64_t bad = 0, pad = -1 if padding_idx is None else padding_idx
    cdef const int64_t *i64 = <const int64_t *>ids if ids_is64 else NULL
    cdef const int32_t *i32 = NULL if ids_is64 else <const int32_t *>ids
    with nogil:
        rc = plast_embedding_fwd(nt, nids, i64, i32, num, <const char *>w, w_row_bytes, row_bytes, <char *>out,
                                 pad, zero_padding, &bad)
    _bad(rc, bad, "embedding kernel",
         "embedding: id {bad} is out of range for %d rows (expected 0 <= id < %d)" % (num, num))


def embedding_bw(int dtype, Py_ssize_t nids, uintptr_t ids, int ids_is64, Py_ssize_t num, Py_ssize_t dim,
                 uintptr_t g, Py_ssize_t g_row, uintptr_t out, padding_idx):
    cdef int rc, simd = simd_level(), nt = num_threads()
    cdef int64_t bad = 0, pad = -1 if padding_idx is None else padding_idx
    cdef const int64_t *i64 = <const int64_t *>ids if ids_is64 else NULL
    cdef const int32_t *i32 = NULL if ids_is64 else <const int32_t *>ids
    with nogil:
        rc = plast_embedding_bw(simd, nt, dtype, nids, i64, i32, num, dim, <const char *>g, g_row, <char *>out, pad,
                                &bad)
    _bad(rc, bad, "embedding backward kernel",
         "embedding: id {bad} is out of range for %d rows (expected 0 <= id < %d)" % (num, num))


cdef Py_ssize_t _reduce_calls[2]  # reduce3d_c calls in float32, float64 (tests check the C path ran)
_reduce_calls[0] = _reduce_calls[1] = 0


def reduce_calls():
    """{dtype code: calls} of the reduction kernel since import, whoever called it (reduce3d or a compiled
    caller such as fastpath.SumKernel, which no Python-level spy sees)."""
    return {F32: _reduce_calls[0], F64: _reduce_calls[1]}


cdef int reduce3d_c(int op, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, const char *x, Py_ssize_t so,
                    Py_ssize_t sn, Py_ssize_t si, char *out, int dtype) except -1:
    """reduce3d for compiled callers (fastpath.SumKernel): addresses and strides as C values."""
    cdef bint f64 = float_is64(dtype, "reduce kernel")
    _reduce_calls[f64] += 1
    cdef plast_op3 a
    cdef plast_op3_f64 ad
    a.p, a.so, a.sn, a.si = <float *>x, so, sn, si
    ad.p, ad.so, ad.sn, ad.si = <double *>x, so, sn, si
    cdef int rc, simd = simd_level(), nt = num_threads()
    if outer * n * inner >= NOGIL_MIN_WORK:
        with nogil:
            if f64:
                rc = plast_reduce_f64(simd, nt, op, outer, n, inner, ad, <double *>out)
            else:
                rc = plast_reduce_f32(simd, nt, op, outer, n, inner, a, <float *>out)
    else:
        if f64:
            rc = plast_reduce_f64(simd, nt, op, outer, n, inner, ad, <double *>out)
        else:
            rc = plast_reduce_f32(simd, nt, op, outer, n, inner, a, <float *>out)
    _check(rc, "reduce kernel")
    return 0


def reduce3d(int op, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, uintptr_t x, xs, uintptr_t out,
             int dtype=F32):
    """sum (0), max (1) or min (2) over n of an (outer, n, inner) operand into contiguous (outer, inner)."""
    reduce3d_c(op, outer, n, inner, <const char *>x, xs[0], xs[1], xs[2], <char *>out, dtype)
