# distutils: sources = src/plast/kernels/cpu/csrc/gemm.c src/plast/kernels/cpu/csrc/gemm16.c src/plast/kernels/cpu/csrc/gemm_scalar.c src/plast/kernels/cpu/csrc/gemm_avx2.c src/plast/kernels/cpu/csrc/gemm_avx512.c
# distutils: depends = src/plast/kernels/cpu/csrc/gemm.h src/plast/kernels/cpu/csrc/gemm16.h src/plast/kernels/cpu/csrc/half.h src/plast/kernels/cpu/csrc/gemm_internal.h src/plast/kernels/cpu/csrc/gemm_kernels.h src/plast/kernels/cpu/csrc/gemm_act.h src/plast/kernels/cpu/csrc/gemm_avx512_f32.h src/plast/kernels/cpu/csrc/gemm_driver.h src/plast/kernels/cpu/csrc/plast_simd.h
# distutils: libraries = m
"""Matrix products on the CPU: checked numpy front ends over csrc/gemm.c, which run without the GIL.

Operands may be C-contiguous, sub-matrix views (any row stride) or transposed views (``x.T``): the layout is
read from the strides and passed to the kernel as a leading dimension and a transpose flag, so no copy is made.
Other layouts (negative or non-unit inner strides on both axes) are copied first.

``gemm16``/``bmm16`` multiply 16-bit operands with float32 accumulation (csrc/gemm16.h): float16 arrays, or
bfloat16 bit patterns held in uint16 arrays (numpy has no bfloat16).

>>> import numpy as np
>>> from plast.kernels.cpu import _gemm
>>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> _gemm.gemm(a, a.T, bias=np.ones(2, np.float32), act="relu").tolist()
[[6.0, 15.0], [15.0, 51.0]]
"""

import numpy as np

cimport numpy as cnp
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from plast._core.codes cimport PLAST_DT_BF16, PLAST_DT_F16
from plast.kernels.cpu._runtime cimport num_threads, simd_level

from plast._core.codes import ACT_CODES as ACTIVATIONS  # numbered once, in _core/codes.h

cnp.import_array()

cdef extern from "gemm16.h" nogil:
    int plast_gemm_bf16(int simd, int nthreads, int trans_a, int trans_b, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                        float alpha, const unsigned short *A, Py_ssize_t lda, const unsigned short *B, Py_ssize_t ldb,
                        float beta, void *C, Py_ssize_t ldc, int out16, const plast_gemm_epilogue *ep)
    int plast_gemm_f16(int simd, int nthreads, int trans_a, int trans_b, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                       float alpha, const unsigned short *A, Py_ssize_t lda, const unsigned short *B, Py_ssize_t ldb,
                       float beta, void *C, Py_ssize_t ldc, int out16, const plast_gemm_epilogue *ep)
    int plast_gemm_bf16_path(int simd)

# what a product's operands hold (its `kind`): float32 / float64 arrays, or the 16-bit dtype (PLAST_DT_BF16:
# bfloat16 bit patterns in uint16 arrays; PLAST_DT_F16: float16 arrays)
cdef enum:
    KIND_FLOAT = -1


# ---- exported entry points for other Cython modules (see _gemm.pxd) ----------------------------------------

cdef int gemm_f32(bint trans_a, bint trans_b, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, float alpha,
                  const float *A, Py_ssize_t lda, const float *B, Py_ssize_t ldb, float beta, float *C,
                  Py_ssize_t ldc, const plast_gemm_epilogue *ep) noexcept nogil:
    return plast_gemm_f32(simd_level(), num_threads(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                          ldc, ep)


cdef int gemm_f64(bint trans_a, bint trans_b, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, double alpha,
                  const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb, double beta, double *C,
                  Py_ssize_t ldc, const plast_gemm_epilogue *ep) noexcept nogil:
    return plast_gemm_f64(simd_level(), num_threads(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                          ldc, ep)


cdef int gemm_batched_f32(bint trans_a, bint trans_b, Py_ssize_t batch, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                          float alpha, const float *A, Py_ssize_t lda, Py_ssize_t stride_a, const float *B,
                          Py_ssize_t ldb, Py_ssize_t stride_b, float beta, float *C, Py_ssize_t ldc,
                          Py_ssize_t stride_c, const plast_gemm_epilogue *ep) noexcept nogil:
    return plast_gemm_batched_f32(simd_level(), num_threads(), trans_a, trans_b, batch, M, N, K, alpha, A, lda,
                                  stride_a, B, ldb, stride_b, beta, C, ldc, stride_c, ep)


cdef int gemm_batched_f64(bint trans_a, bint trans_b, Py_ssize_t batch, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                          double alpha, const double *A, Py_ssize_t lda, Py_ssize_t stride_a, const double *B,
                          Py_ssize_t ldb, Py_ssize_t stride_b, double beta, double *C, Py_ssize_t ldc,
                          Py_ssize_t stride_c, const plast_gemm_epilogue *ep) noexcept nogil:
    return plast_gemm_batched_f64(simd_level(), num_threads(), trans_a, trans_b, batch, M, N, K, alpha, A, lda,
                                  stride_a, B, ldb, stride_b, beta, C, ldc, stride_c, ep)


cdef int gemm_batched2_f32(bint trans_a, bint trans_b, Py_ssize_t outer, Py_ssize_t batch, Py_ssize_t M, Py_ssize_t N,
                           Py_ssize_t K, float alpha, const float *A, Py_ssize_t lda, Py_ssize_t stride_a,
                           Py_ssize_t ostride_a, const float *B, Py_ssize_t ldb, Py_ssize_t stride_b,
                           Py_ssize_t ostride_b, float beta, float *C, Py_ssize_t ldc, Py_ssize_t stride_c,
                           Py_ssize_t ostride_c, const plast_gemm_epilogue *ep) noexcept nogil:
    return plast_gemm_batched2_f32(simd_level(), num_threads(), trans_a, trans_b, outer, batch, M, N, K, alpha, A,
                                   lda, stride_a, ostride_a, B, ldb, stride_b, ostride_b, beta, C, ldc, stride_c,
                                   ostride_c, ep)


cdef int gemm_batched2_f64(bint trans_a, bint trans_b, Py_ssize_t outer, Py_ssize_t batch, Py_ssize_t M, Py_ssize_t N,
                           Py_ssize_t K, double alpha, const double *A, Py_ssize_t lda, Py_ssize_t stride_a,
                           Py_ssize_t ostride_a, const double *B, Py_ssize_t ldb, Py_ssize_t stride_b,
                           Py_ssize_t ostride_b, double beta, double *C, Py_ssize_t ldc, Py_ssize_t stride_c,
                           Py_ssize_t ostride_c, const plast_gemm_epilogue *ep) noexcept nogil:
    return plast_gemm_batched2_f64(simd_level(), num_threads(), trans_a, trans_b, outer, batch, M, N, K, alpha, A,
                                   lda, stride_a, ostride_a, B, ldb, stride_b, ostride_b, beta, C, ldc, stride_c,
                                   ostride_c, ep)


cdef int gemm16_out16(bint bf16, bint trans_a, bint trans_b, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, float alpha,
                      const unsigned short *A, Py_ssize_t lda, const unsigned short *B, Py_ssize_t ldb, float beta,
                      unsigned short *C, Py_ssize_t ldc, const plast_gemm_epilogue *ep) noexcept nogil:
    if bf16:
        return plast_gemm_bf16(simd_level(), num_threads(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta,
                               C, ldc, 1, ep)
    return plast_gemm_f16(simd_level(), num_threads(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                          ldc, 1, ep)


# ---- argument checking -------------------------------------------------------------------------------------
# Typed numpy C-API access throughout: this runs on every call, and numpy's own matmul costs about 1 us.

cdef inline int _dtype_num(str fn, object a, object b, int kind) except -1:
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{fn}: {name} must be a numpy.ndarray, got {type(x).__name__}")
    cdef int ta = cnp.PyArray_TYPE(<cnp.ndarray>a), tb = cnp.PyArray_TYPE(<cnp.ndarray>b)
    if ta != tb:
        raise TypeError(f"{fn}: a is {a.dtype} and b is {b.dtype}; both must have the same dtype "
                        f"(cast one with .astype)")
    if kind == PLAST_DT_BF16 and ta != cnp.NPY_UINT16:
        raise TypeError(f"{fn}: bfloat16 operands are uint16 arrays of bit patterns, got {a.dtype}")
    if kind == PLAST_DT_F16 and ta != cnp.NPY_FLOAT16:
        raise TypeError(f"{fn}: float16 operands must be float16 arrays, got {a.dtype}")
    if kind == KIND_FLOAT and ta != cnp.NPY_FLOAT32 and ta != cnp.NPY_FLOAT64:
        raise TypeError(f"{fn}: dtype {a.dtype} is not supported; expected float32 or float64")
    return ta


cdef inline void _bounds(cnp.ndarray x, char **lo, char **hi) noexcept:
    """Byte range [lo, hi) that x's elements lie in (hi == lo when x is empty)."""
    cdef char *p = <char *>cnp.PyArray_DATA(x)
    cdef int i, nd = cnp.PyArray_NDIM(x)
    cdef cnp.npy_intp *sh = cnp.PyArray_DIMS(x)
    cdef cnp.npy_intp *st = cnp.PyArray_STRIDES(x)
    lo[0] = p
    hi[0] = p
    if cnp.PyArray_SIZE(x) == 0:
        return
    for i in range(nd):
        if st[i] < 0:
            lo[0] += (sh[i] - 1) * st[i]
        else:
            hi[0] += (sh[i] - 1) * st[i]
    hi[0] += cnp.PyArray_ITEMSIZE(x)


cdef inline object _unaliased(cnp.ndarray x, cnp.ndarray out):
    """x, or a copy of it when its memory range meets out's (out is written while inputs are still read)."""
    cdef char *xl
    cdef char *xh
    cdef char *ol
    cdef char *oh
    _bounds(x, &xl, &xh)
    _bounds(out, &ol, &oh)
    if xl < oh and ol < xh:
        return np.array(x, copy=True)
    return x


cdef tuple _matrix_layout(cnp.ndarray x):
    """(array, trans, ld, batch_stride) for the last two axes of x, in elements; copies x if the kernel cannot
    read it in place. A batch axis of length 1 (or none) gets batch stride 0."""
    cdef Py_ssize_t it = cnp.PyArray_ITEMSIZE(x)
    cdef int nd = cnp.PyArray_NDIM(x)
    cdef cnp.npy_intp *sh = cnp.PyArray_DIMS(x)
    cdef cnp.npy_intp *st = cnp.PyArray_STRIDES(x)
    cdef Py_ssize_t r = sh[nd - 2], c = sh[nd - 1]
    cdef Py_ssize_t s0 = st[nd - 2], s1 = st[nd - 1]
    cdef Py_ssize_t sb = st[0] if nd == 3 and sh[0] > 1 else 0
    if sb >= 0 and sb % it == 0:
        if (c <= 1 or s1 == it) and (r <= 1 or (s0 > 0 and s0 % it == 0 and s0 >= c * it)):
            return x, 0, (s0 // it if r > 1 else max(c, 1)), sb // it
        if (r <= 1 or s0 == it) and (c <= 1 or (s1 > 0 and s1 % it == 0 and s1 >= r * it)):
            return x, 1, (s1 // it if c > 1 else max(r, 1)), sb // it
    x = np.ascontiguousarray(x)
    return x, 0, max(c, 1), (r * c if nd == 3 and sh[0] > 1 else 0)


cdef cnp.ndarray _vector(str fn, str name, object v, Py_ssize_t n, int typenum, cnp.ndarray out):
    if not isinstance(v, np.ndarray):
        raise TypeError(f"{fn}: {name} must be a numpy.ndarray, got {type(v).__name__}")
    if cnp.PyArray_TYPE(<cnp.ndarray>v) != typenum:
        raise TypeError(f"{fn}: {name} is {v.dtype} but the product is {out.dtype}; cast it with .astype")
    if v.ndim != 1 or v.shape[0] != n:
        raise ValueError(f"{fn}: {name} must have shape ({n},), got {v.shape}")
    return _unaliased(np.ascontiguousarray(v), out)


cdef class _Call:
    """One checked product, ready to run (possibly many times, for timing) without the GIL."""
    cdef list keep
    cdef public object out
    cdef bint f64, ta, tb, has_ep, out16
    cdef int kind
    cdef Py_ssize_t batch, M, N, K, lda, ldb, ldc, sa, sb, sc
    cdef double alpha, beta
    cdef const void *A
    cdef const void *B
    cdef void *C
    cdef plast_gemm_epilogue ep

    cdef int run(self, int simd, int nthreads) noexcept nogil:
        cdef const plast_gemm_epilogue *ep = &self.ep if self.has_ep else NULL
        if self.kind != KIND_FLOAT:
            return self.run16(simd, nthreads, ep)
        if self.f64:
            return plast_gemm_batched_f64(simd, nthreads, self.ta, self.tb, self.batch, self.M, self.N, self.K,
                                          self.alpha, <const double *>self.A, self.lda, self.sa,
                                          <const double *>self.B, self.ldb, self.sb, self.beta,
                                          <double *>self.C, self.ldc, self.sc, ep)
        return plast_gemm_batched_f32(simd, nthreads, self.ta, self.tb, self.batch, self.M, self.N, self.K,
                                      <float>self.alpha, <const float *>self.A, self.lda, self.sa,
                                      <const float *>self.B, self.ldb, self.sb, <float>self.beta,
                                      <float *>self.C, self.ldc, self.sc, ep)

    cdef int run16(self, int simd, int nthreads, const plast_gemm_epilogue *ep) noexcept nogil:
        # one product after another, each with every thread; C and the residual step in bytes of C's type
        cdef Py_ssize_t b, csize = 2 if self.out16 else 4
        cdef plast_gemm_epilogue e
        cdef int err
        for b in range(self.batch):
            if ep != NULL:
                e = ep[0]
                if e.residual != NULL:
                    e.residual = <const char *>e.residual + b * e.residual_bstride * csize
            if self.kind == PLAST_DT_BF16:
                err = plast_gemm_bf16(simd, nthreads, self.ta, self.tb, self.M, self.N, self.K, <float>self.alpha,
                                      <const unsigned short *>self.A + b * self.sa, self.lda,
                                      <const unsigned short *>self.B + b * self.sb, self.ldb, <float>self.beta,
                                      <char *>self.C + b * self.sc * csize, self.ldc, self.out16,
                                      &e if ep != NULL else NULL)
            else:
                err = plast_gemm_f16(simd, nthreads, self.ta, self.tb, self.M, self.N, self.K, <float>self.alpha,
                                     <const unsigned short *>self.A + b * self.sa, self.lda,
                                     <const unsigned short *>self.B + b * self.sb, self.ldb, <float>self.beta,
                                     <char *>self.C + b * self.sc * csize, self.ldc, self.out16,
                                     &e if ep != NULL else NULL)
            if err:
                return err
        return 0


cdef _Call _prepare(str fn, object a_in, object b_in, object out_in, double alpha, double beta, object bias,
                    object bias_row, object act, object residual, bint batched, int kind=KIND_FLOAT,
                    bint out16=False):
    cdef int in_typenum = _dtype_num(fn, a_in, b_in, kind)
    # the product's (and out's, the biases', the residual's) type: the operands' own, or float32 for 16-bit
    # operands unless out16
    cdef int typenum = in_typenum if kind == KIND_FLOAT or out16 else cnp.NPY_FLOAT32
    cdef cnp.ndarray a = <cnp.ndarray>a_in, b = <cnp.ndarray>b_in, out
    cdef int nda = cnp.PyArray_NDIM(a), ndb = cnp.PyArray_NDIM(b)
    if batched:
        if nda < 2 or nda > 3 or ndb < 2 or ndb > 3:
            raise ValueError(f"{fn}: a and b must be 2-D or 3-D (batch, rows, cols), got shapes {a_in.shape} and "
                             f"{b_in.shape}")
    elif nda != 2 or ndb != 2:
        raise ValueError(f"{fn}: a and b must be 2-D, got shapes {a_in.shape} and {b_in.shape} (use bmm for batches)")
    cdef cnp.npy_intp *sha = cnp.PyArray_DIMS(a)
    cdef cnp.npy_intp *shb = cnp.PyArray_DIMS(b)
    cdef Py_ssize_t M = sha[nda - 2], K = sha[nda - 1], N = shb[ndb - 1]
    if shb[ndb - 2] != K:
        raise ValueError(f"{fn}: a is {a_in.shape} and b is {b_in.shape}; the inner dimensions must match "
                         f"(a.shape[-1] == b.shape[-2])")
    cdef Py_ssize_t ba = sha[0] if nda == 3 else 1
    cdef Py_ssize_t bb = shb[0] if ndb == 3 else 1
    if ba != bb and ba != 1 and bb != 1:
        raise ValueError(f"{fn}: batch sizes {ba} (a) and {bb} (b) do not broadcast; they must be equal or 1")
    cdef Py_ssize_t batch = max(ba, bb)
    cdef Py_ssize_t it = 4 if typenum == cnp.NPY_FLOAT32 else 8 if typenum == cnp.NPY_FLOAT64 else 2

    cdef cnp.npy_intp oshape[3]
    oshape[0] = batch
    oshape[1] = M
    oshape[2] = N
    cdef int ndo = 3 if batched else 2
    if out_in is None:
        if beta != 0.0:
            raise ValueError(f"{fn}: beta={beta} accumulates into out, so out must be given")
        out = cnp.PyArray_EMPTY(ndo, &oshape[3 - ndo], typenum, 0)
    else:
        if not isinstance(out_in, np.ndarray):
            raise TypeError(f"{fn}: out must be a numpy.ndarray, got {type(out_in).__name__}")
        out = <cnp.ndarray>out_in
        if cnp.PyArray_TYPE(out) != typenum:
            want = a.dtype if typenum == in_typenum else np.dtype(np.float32)
            raise TypeError(f"{fn}: out is {out.dtype} but the product is {want}")
        if cnp.PyArray_NDIM(out) != ndo or any([cnp.PyArray_DIMS(out)[i] != oshape[3 - ndo + i]
                                                for i in range(ndo)]):
            want = (<object>(batch, M, N)) if batched else (<object>(M, N))
            raise ValueError(f"{fn}: out must have shape {want}, got {out_in.shape}")
        if not cnp.PyArray_ISWRITEABLE(out):
            raise ValueError(f"{fn}: out is read-only")
    cdef cnp.npy_intp *sto = cnp.PyArray_STRIDES(out)
    cdef Py_ssize_t oc0 = sto[ndo - 2], oc1 = sto[ndo - 1]
    cdef Py_ssize_t osb = sto[0] if batched and batch > 1 else 0
    if cnp.PyArray_SIZE(out) == 0:  # nothing is written; strides of empty arrays mean nothing
        oc0, oc1, osb = max(N, 1) * it, it, max(M * N, 1) * it
    if not ((N <= 1 or oc1 == it) and (M <= 1 or (oc0 > 0 and oc0 % it == 0 and oc0 >= N * it))):
        raise ValueError(f"{fn}: out must be row-major with unit column stride (strides {(<object>out).strides}); pass a "
                         f"C-contiguous array or a row-major sub-matrix view")
    cdef Py_ssize_t ldc = oc0 // it if M > 1 else max(N, 1)
    if batch > 1 and (osb <= 0 or osb % it != 0 or osb // it < (M - 1) * ldc + N):
        raise ValueError(f"{fn}: out's batches must not overlap (strides {(<object>out).strides})")

    cdef _Call call = _Call()
    call.keep = []
    a, call.ta, call.lda, call.sa = _matrix_layout(_unaliased(a, out))
    b, call.tb, call.ldb, call.sb = _matrix_layout(_unaliased(b, out))

    call.ep.bias_col = NULL
    call.ep.bias_row = NULL
    call.ep.residual = NULL
    call.ep.ldr = 0
    call.ep.residual_bstride = 0
    call.ep.act = 0
    if act is not None and act != "none":
        if act not in ACTIVATIONS:
            raise ValueError(f"{fn}: unknown act {act!r}; expected one of {', '.join(map(repr, ACTIVATIONS))}")
        call.ep.act = ACTIVATIONS[act]
    cdef cnp.ndarray v
    if bias is not None:
        v = _vector(fn, "bias", bias, N, typenum, out)
        call.ep.bias_col = cnp.PyArray_DATA(v)
        call.keep.append(v)
    if bias_row is not None:
        v = _vector(fn, "bias_row", bias_row, M, typenum, out)
        call.ep.bias_row = cnp.PyArray_DATA(v)
        call.keep.append(v)
    cdef Py_ssize_t rb
    if residual is not None:
        if not isinstance(residual, np.ndarray):
            raise TypeError(f"{fn}: residual must be a numpy.ndarray, got {type(residual).__name__}")
        if residual.dtype != out.dtype:
            raise TypeError(f"{fn}: residual is {residual.dtype} but the product is {out.dtype}")
        rshape = residual.shape
        ok = rshape == (M, N) or (batched and residual.ndim == 3 and rshape[1:] == (M, N)
                                  and rshape[0] in (1, batch))
        if not ok:
            want = (<object>(batch, M, N)) if batched else (<object>(M, N))
            raise ValueError(f"{fn}: residual must have shape {want}"
                             f"{' or (' + str(M) + ', ' + str(N) + ')' if batched else ''}, got {rshape}")
        residual, rt, call.ep.ldr, rb = _matrix_layout(_unaliased(residual, out))
        if rt:  # the epilogue reads the residual row by row
            residual, rt, call.ep.ldr, rb = _matrix_layout(np.ascontiguousarray(residual))
        call.ep.residual_bstride = rb
        call.ep.residual = cnp.PyArray_DATA(residual)
        call.keep.append(residual)
    call.has_ep = (call.ep.act != 0 or call.ep.bias_col != NULL or call.ep.bias_row != NULL
                   or call.ep.residual != NULL)

    call.keep.append(a)
    call.keep.append(b)
    call.out = out
    call.f64 = typenum == cnp.NPY_FLOAT64
    call.kind = kind
    call.out16 = out16
    call.batch = batch
    call.M = M
    call.N = N
    call.K = K
    call.ldc = ldc
    call.sc = osb // it
    call.alpha = alpha
    call.beta = beta
    call.A = cnp.PyArray_DATA(a)
    call.B = cnp.PyArray_DATA(b)
    call.C = cnp.PyArray_DATA(out)
    return call


cdef object _run(_Call call):
    cdef int err
    cdef int simd = simd_level(), nt = num_threads()
    with nogil:
        err = call.run(simd, nt)
    if err:
        raise MemoryError("gemm: could not allocate the packing buffers")
    return call.out


# ---- public functions --------------------------------------------------------------------------------------

def gemm(a, b, out=None, *, double alpha=1.0, double beta=0.0, bias=None, bias_row=None, act="none",
         residual=None):
    """out = act(alpha * a @ b + beta * out + bias + bias_row[:, None]) + residual, for 2-D float arrays.

    a is (M, K), b is (K, N), out (M, N); bias is (N,), bias_row (M,), residual (M, N); act is "none", "relu",
    "gelu" (erf) or "gelu_tanh". beta != 0 accumulates into the given out. Uses plast's SIMD level and thread
    count (plast.kernels.cpu._runtime).

    >>> import numpy as np
    >>> x = np.ones((2, 3), np.float32)
    >>> gemm(x, x.T, alpha=0.5).tolist()
    [[1.5, 1.5], [1.5, 1.5]]
    """
    return _run(_prepare("gemm", a, b, out, alpha, beta, bias, bias_row, act, residual, False))


def bmm(a, b, out=None, *, double alpha=1.0, double beta=0.0, bias=None, bias_row=None, act="none",
        residual=None):
    """Batched gemm: a (B, M, K) or (M, K), b (B, K, N) or (K, N) -> out (B, M, N).

    A 2-D operand, or a batch axis of length 1, is shared by every batch (stride 0, no copy). bias and bias_row
    are shared too; residual is (B, M, N), (1, M, N) or (M, N).

    >>> import numpy as np
    >>> a = np.ones((4, 2, 3)); w = np.full((3, 5), 2.0)
    >>> bmm(a, w).shape
    (4, 2, 5)
    """
    return _run(_prepare("bmm", a, b, out, alpha, beta, bias, bias_row, act, residual, True))


cdef int _kind(str fn, str dtype) except -1:
    if dtype == "bfloat16":
        return PLAST_DT_BF16
    if dtype == "float16":
        return PLAST_DT_F16
    raise ValueError(f"{fn}: dtype must be 'bfloat16' or 'float16', got {dtype!r}")


def gemm16(a, b, out=None, *, str dtype="bfloat16", bint out16=False, double alpha=1.0, double beta=0.0,
           bias=None, bias_row=None, act="none", residual=None):
    """gemm for 16-bit operands, float32 accumulation: bfloat16 bit patterns in uint16 arrays
    (dtype="bfloat16") or float16 arrays (dtype="float16").

    out, bias, bias_row and residual are float32, or with out16=True the operands' 16-bit type (the result is
    rounded to nearest even once, after the epilogue). The path follows plast's SIMD level: AMX tiles, then
    AVX512-BF16, else the operands are widened to float32 (``gemm16_path``).

    >>> import numpy as np
    >>> one = np.full((2, 3), 0x3f80, np.uint16)  # bfloat16 1.0
    >>> gemm16(one, one.T).tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    return _run(_prepare("gemm16", a, b, out, alpha, beta, bias, bias_row, act, residual, False,
                         _kind("gemm16", dtype), out16))


def bmm16(a, b, out=None, *, str dtype="bfloat16", bint out16=False, double alpha=1.0, double beta=0.0,
          bias=None, bias_row=None, act="none", residual=None):
    """Batched gemm16, with bmm's broadcasting of 2-D operands and batch axes of length 1."""
    return _run(_prepare("bmm16", a, b, out, alpha, beta, bias, bias_row, act, residual, True,
                         _kind("bmm16", dtype), out16))


def gemm16_path(str dtype="bfloat16"):
    """The path gemm16 takes now: "amx", "avx512_bf16", or "widen (<vector level>)"."""
    _kind("gemm16_path", dtype)
    cdef int level = plast_gemm_bf16_path(simd_level())
    names = ("scalar", "avx2", "avx512", "avx512_bf16", "amx")
    if dtype == "bfloat16" and level >= 3:
        return names[level]
    return f"widen ({names[min(level, 2)]})"


def _time_calls(a, b, out=None, *, Py_ssize_t reps=10, bint batched=False, double alpha=1.0, double beta=0.0,
                bias=None, act="none", residual=None, str dtype=None, bint out16=False):
    """Seconds taken by each of `reps` kernel calls on the same operands, timed in C without the GIL: the
    kernel's own speed, without Python's per-call overhead (bench/bench_gemm.py)."""
    cdef _Call call = _prepare("gemm", a, b, out, alpha, beta, bias, None, act, residual, batched,
                               KIND_FLOAT if dtype is None else _kind("gemm", dtype), out16)
    cdef int simd = simd_level(), nt = num_threads()
    cdef cnp.ndarray[double, ndim=1] times = np.empty(reps, dtype=np.float64)
    cdef double *t = <double *>cnp.PyArray_DATA(times)
    cdef timespec t0, t1
    cdef Py_ssize_t i
    cdef int err = 0
    with nogil:
        for i in range(reps):
            clock_gettime(CLOCK_MONOTONIC, &t0)
            err |= call.run(simd, nt)
            clock_gettime(CLOCK_MONOTONIC, &t1)
            t[i] = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9
    if err:
        raise MemoryError("gemm: could not allocate the packing buffers")
    return times
