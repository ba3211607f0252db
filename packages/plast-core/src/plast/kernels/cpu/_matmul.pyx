# cython: boundscheck=True, wraparound=False
"""Matrix products straight from tensors to plast's GEMM (csrc/gemm.c through _gemm.pxd): the layout of each
operand (row-major with a row stride, or transposed) and one batch stride are read from the tensors' shapes and
strides, so the matmul and addmm kernels make no numpy views and no copies. ``matmul`` returns False for layouts
the GEMM cannot take (batch dims that do not collapse to one stride, matrices strided on both axes, other
dtypes), and the caller falls back to numpy (kernels/cpu/kernels.py ``gemm_into``). bfloat16 and float16 go to
the 16-bit GEMM (csrc/gemm16.h: float32 sums, one rounding after the epilogue)."""


from plast._core.codes cimport PLAST_DT_BF16, PLAST_DT_F16, PLAST_DT_F32, PLAST_DT_F64
from plast.kernels.cpu._gemm cimport gemm16_out16, gemm_batched2_f32, gemm_batched2_f64, plast_gemm_epilogue
from plast.kernels.cpu._runtime cimport NOGIL_MIN_WORK
from plast.kernels.cpu._tensors cimport TensorBase, tensor_ptr

from plast._core.codes import ACT_CODES  # noqa: F401 (also the jit replay's: _matmul.ACT_CODES)

DEF MAXD = 16


cdef bint _layout(TensorBase t, const Py_ssize_t *oshape, int ond, int first, Py_ssize_t *ld, bint *trans,
                  Py_ssize_t *bstride, Py_ssize_t *ostride) except *:
    """t is [..., R, C] broadcast against the output's batch dims oshape[:ond-2]: its leading dimension, whether
    it is stored transposed, the single stride of batch dims [first, ond-2) (0 when broadcast) and, with first 1,
    the stride of batch dim 0 (the caller loops over it). False if none fits."""
    shape = t._shape
    strides = t._strides
    cdef int nd = len(shape), nb = ond - 2, tb = nd - 2, i, j
    cdef Py_ssize_t R = shape[nd - 2], C = shape[nd - 1]
    cdef Py_ssize_t sr = strides[nd - 2], sc = strides[nd - 1]
    # the matrix: row-major (unit column stride) or transposed (unit row stride)
    if (sc == 1 or C == 1) and (R == 1 or sr >= C):
        trans[0] = False
        ld[0] = sr if R > 1 else max(C, 1)
    elif (sr == 1 or R == 1) and (C == 1 or sc >= R):
        trans[0] = True
        ld[0] = sc if C > 1 else max(R, 1)
    else:
        return False
    # the batch: the non-broadcast batch dims must collapse into one index range with one stride
    cdef Py_ssize_t unit = -1, count = 1
    for i in range(nb - 1, first - 1, -1):
        o = oshape[i]
        if o == 1:
            continue
        j = i - (nb - tb)
        s = 0 if j < 0 or shape[j] == 1 else strides[j]
        if unit == -1:
            unit = s
            if s != 0 and count != 1:
                return False
        elif s != unit * count:
            return False
        count *= o
    bstride[0] = unit if unit > 0 else 0
    ostride[0] = 0
    if first == 1:
        j = -(nb - tb)
        ostride[0] = 0 if j < 0 or shape[j] == 1 else strides[j]
    return True


cdef int _gemm_loop(int code, bint ta, bint tb, Py_ssize_t outer, Py_ssize_t batch, Py_ssize_t M, Py_ssize_t N,
                    Py_ssize_t K, double alpha, double beta, const char *pa, Py_ssize_t lda, Py_ssize_t sa,
                    Py_ssize_t oa, const char *pb, Py_ssize_t ldb, Py_ssize_t sb, Py_ssize_t ob, char *pc,
                    Py_ssize_t es, const plast_gemm_epilogue *ep) noexcept nogil:
    """matmul_run's GEMM calls: float32 and float64 in one call over outer x batch products (one parallel region
    for all of them when they are small), the 16-bit types (bfloat16, float16) one GEMM per matrix; the first
    nonzero error code."""
    cdef Py_ssize_t o, i
    cdef int err = 0
    if code == PLAST_DT_F32:
        return gemm_batched2_f32(ta, tb, outer, batch, M, N, K, <float>alpha, <const float *>pa, lda, sa, oa,
                                 <const float *>pb, ldb, sb, ob, <float>beta, <float *>pc, N, M * N, batch * M * N, ep)
    if code == PLAST_DT_F64:
        return gemm_batched2_f64(ta, tb, outer, batch, M, N, K, alpha, <const double *>pa, lda, sa, oa,
                                 <const double *>pb, ldb, sb, ob, beta, <double *>pc, N, M * N, batch * M * N, ep)
    for o in range(outer):
        for i in range(batch):
            err = gemm16_out16(code == PLAST_DT_BF16, ta, tb, M, N, K, <float>alpha,
                               <const unsigned short *>(pa + (o * oa + i * sa) * es), lda,
                               <const unsigned short *>(pb + (o * ob + i * sb) * es), ldb, <float>beta,
                               <unsigned short *>(pc + (o * batch + i) * M * N * es), N, ep)
            if err:
                return err
    return err


cdef int matmul_run(TensorBase out, TensorBase a, TensorBase b, TensorBase bias, int act, double alpha,
                    double beta) except -1:
    """out = act(alpha * a @ b + beta * out + bias): 1 when done, 0 when the layout or dtype is not one the GEMM
    takes (nothing written). See ``matmul``."""

    cdef int code = out.dtype.code
    if code != PLAST_DT_F32 and code != PLAST_DT_F64 and code != PLAST_DT_BF16 and code != PLAST_DT_F16:
        return 0
    if a.dtype is not out.dtype or b.dtype is not out.dtype:
        return 0
    oshape = out._shape
    cdef int ond = len(oshape), i
    if ond < 2 or ond > MAXD or len(a._shape) < 2 or len(b._shape) < 2:
        return 0
    cdef Py_ssize_t osh[MAXD]
    cdef Py_ssize_t batch = 1
    for i in range(ond):
        osh[i] = oshape[i]
        if i < ond - 2:
            batch *= osh[i]
    cdef Py_ssize_t M = osh[ond - 2], N = osh[ond - 1], K = a._shape[len(a._shape) - 1]
    if batch == 0 or M == 0 or N == 0:
        return 1
    if not out.is_contiguous():
        return 0
    cdef Py_ssize_t lda, ldb, sa, sb, oa, ob, outer = 1
    cdef bint ta, tb
    if not _layout(a, osh, ond, 0, &lda, &ta, &sa, &oa) or not _layout(b, osh, ond, 0, &ldb, &tb, &sb, &ob):
        # batch dims that do not collapse into one stride (attention's (batch, head) views of a fused qkv
        # projection): a loop over the first batch dim, one batched GEMM over the rest per step
        if ond < 4 or not _layout(a, osh, ond, 1, &lda, &ta, &sa, &oa) or not _layout(
            b, osh, ond, 1, &ldb, &tb, &sb, &ob
        ):
            return 0
        outer = osh[0]
        batch //= outer
    cdef plast_gemm_epilogue ep
    ep.bias_col = NULL
    ep.bias_row = NULL
    ep.residual = NULL
    ep.ldr = 0
    ep.residual_bstride = 0
    ep.act = act
    cdef int bnd
    if bias is not None:
        if bias.dtype is not out.dtype:
            return 0
        bshape = bias._shape
        bnd = len(bshape)
        # a bias that varies along columns only: (N,), (1, N), (1, 1, N)...
        for i in range(bnd - 1):
            if bshape[i] != 1:
                return 0
        if bnd == 0 or bshape[bnd - 1] != N or (N > 1 and bias._strides[bnd - 1] != 1):
            return 0
        ep.bias_col = tensor_ptr(bias)
    cdef bint has_ep = ep.act != 0 or ep.bias_col != NULL
    cdef const char *pa = tensor_ptr(a)
    cdef const char *pb = tensor_ptr(b)
    cdef char *pc = tensor_ptr(out)
    cdef int err
    if K == 0:
        return 0  # nothing to multiply: the numpy path writes the epilogue of zeros
    cdef Py_ssize_t es = out.dtype.itemsize
    err = 0
    if outer * batch * M * N * K >= NOGIL_MIN_WORK:
        with nogil:
            err = _gemm_loop(code, ta, tb, outer, batch, M, N, K, alpha, beta, pa, lda, sa, oa, pb, ldb, sb, ob, pc,
                             es, &ep if has_ep else NULL)
    else:
        err = _gemm_loop(code, ta, tb, outer, batch, M, N, K, alpha, beta, pa, lda, sa, oa, pb, ldb, sb, ob, pc, es,
                         &ep if has_ep else NULL)
    if err:
        raise MemoryError("matmul: could not allocate the GEMM's packing buffers")
    return 1


def matmul(TensorBase out, TensorBase a, TensorBase b, TensorBase bias=None, str act="none", double alpha=1.0,
           double beta=0.0):
    """out = act(alpha * a @ b + beta * out + bias) where a is [..., M, K], b [..., K, N] and out a contiguous
    [..., M, N] (batch dims broadcast); bias, if given, broadcasts along rows ((N,), (1, N)...). Returns False
    when the layout or dtype is not one the GEMM takes (nothing is written then)."""
    return matmul_run(out, a, b, bias, ACT_CODES[act], alpha, beta) == 1


# ---- the op table's kernels for matmul, addmm and the fused addmm_act (kernels.py, kernels_nn.py and
# kernels_fused.py bind them): the GEMM straight from the tensors with no Python in between; layouts and dtypes it
# does not take go to `fallback`, the numpy path of the Python module.

cdef class MatmulKernel:
    """``kernel(node, inputs, outputs)`` for matmul: out = a @ b."""

    def __init__(self, fallback):
        self.fallback = fallback

    def __call__(self, node, inputs, outputs):
        self.run(node, inputs, outputs)

    cdef int run(self, object node, object inputs, object outputs) except -1:
        if matmul_run(<TensorBase?>outputs[0], <TensorBase?>inputs[0], <TensorBase?>inputs[1], None, 0, 1.0,
                      0.0) != 1:
            self.fallback(node, inputs, outputs)
        return 0


cdef class AddmmKernel:
    """``kernel(node, inputs, outputs)`` for addmm: out = beta * bias + alpha * (a @ b), node.args = (beta,
    alpha); the GEMM takes beta 1 (bias as its epilogue) and beta 0."""

    def __init__(self, fallback):
        self.fallback = fallback

    def __call__(self, node, inputs, outputs):
        self.run(node, inputs, outputs)

    cdef int run(self, object node, object inputs, object outputs) except -1:
        beta, alpha = node.args
        cdef TensorBase out = <TensorBase?>outputs[0]
        if beta == 1 and matmul_run(out, <TensorBase?>inputs[1], <TensorBase?>inputs[2], <TensorBase?>inputs[0], 0,
                                    float(alpha), 0.0) == 1:
            return 0
        if beta == 0 and matmul_run(out, <TensorBase?>inputs[1], <TensorBase?>inputs[2], None, 0, float(alpha),
                                    0.0) == 1:
            return 0
        self.fallback(node, inputs, outputs)
        return 0


cdef class AddmmActKernel:
    """The fused group kernel ``kernel(root, inputs, outputs, args)``: out = act(a @ b + bias), inputs (bias, a,
    b), args (act or None,)."""

    def __init__(self, fallback):
        self.fallback = fallback

    def __call__(self, root, inputs, outputs, args):
        self.run(root, inputs, outputs, args)

    cdef int run(self, object root, object inputs, object outputs, object args) except -1:
        act = args[0] or "none"
        if matmul_run(<TensorBase?>outputs[0], <TensorBase?>inputs[1], <TensorBase?>inputs[2],
                      <TensorBase?>inputs[0], ACT_CODES[act], 1.0, 0.0) != 1:
            self.fallback(root, inputs, outputs, args)
        return 0
