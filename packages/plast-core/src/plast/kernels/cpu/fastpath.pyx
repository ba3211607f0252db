# cython: boundscheck=True, wraparound=True
"""Layout helpers for the vectorized kernels in _fast: describe a strided tensor as the 3-d (outer, n, inner)
array those kernels take, or say that it can't be (the caller then copies or keeps its numpy path). Compiled:
every reduction, softmax and layer norm call goes through here. The sum kernel (SumKernel), the op table's most
called reduction, is here too: layout and call with no Python in between."""


from plast.kernels.cpu._fast cimport reduce3d_c
from plast.kernels.cpu._tensors cimport TensorBase, tensor_ptr
from plast._core.codes cimport PLAST_DT_F32, PLAST_DT_F64, PLAST_RD_SUM

from . import _fast  # no-cython-lint (imported so that a failed build shows up at import, not mid-step)


cdef bint _merge_c(shape, strides, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *size, Py_ssize_t *stride) except -1:
    """(size, stride) of dims lo..hi merged into one, or False when they don't merge. Size-1 dims are ignored;
    an empty or all-ones group is (size, 0) with stride 0 (never read for size 1)."""
    cdef Py_ssize_t sz = 1, st = 0, s, d
    cdef bint have = False
    for d in range(lo, hi):
        s = shape[d]
        if s == 1:
            continue
        if have and st != <Py_ssize_t>strides[d] * s:
            return False
        sz *= s
        st = strides[d]
        have = True
    size[0] = sz
    stride[0] = st
    return True


def as3d(t, a, b):
    """(outer, n, inner, (s_outer, s_n, s_inner)) for dims [0, a), [a, b), [b, ndim) of tensor `t`, strides in
    elements; None when a group of dims can't be merged into one stride."""
    return as3d_raw(t._shape, t._strides, a, b)


def as3d_raw(shape, strides, Py_ssize_t a, Py_ssize_t b):
    cdef Py_ssize_t nd = len(shape), o0, o1, n0, n1, i0, i1
    if (not _merge_c(shape, strides, 0, a, &o0, &o1) or not _merge_c(shape, strides, a, b, &n0, &n1)
            or not _merge_c(shape, strides, b, nd, &i0, &i1)):
        return None
    # a group of size 1 gets the stride that keeps the kernels on their contiguous paths
    return o0, n0, i0, (o1, n1 if n0 > 1 else 1, i1 if i0 > 1 else 1)


def contiguous_block(dims):
    """(a, b) when sorted `dims` are the consecutive range a..b-1, else None."""
    if not dims:
        return None
    a, b = dims[0], dims[-1] + 1
    return (a, b) if tuple(dims) == tuple(range(a, b)) else None


cdef inline Py_ssize_t _numel(object shape):
    cdef Py_ssize_t n = 1
    for s in shape:
        n *= <Py_ssize_t>s
    return n


cdef class SumKernel:
    """The op table's sum kernel ``kernel(node, inputs, outputs)``, node.args = (dims, keepdim): float32/float64
    over a consecutive block of dims that merges into one stride runs _fast's vectorized reduction straight from
    the tensors; everything else goes to `fallback` (numpy, kernels/cpu/kernels.py)."""

    def __init__(self, fallback):
        self.fallback = fallback

    def __call__(self, node, inputs, outputs):
        self.run(node, inputs, outputs)

    cdef int run(self, object node, object inputs, object outputs) except -1:
        cdef TensorBase x = <TensorBase?>inputs[0], out = <TensorBase?>outputs[0]
        cdef int code = x.dtype.code
        cdef Py_ssize_t a = 0, b = 0, nd = len(x._shape)
        cdef Py_ssize_t o0, o1, n0, n1, i0, i1
        dims = node.args[0]
        if (code == PLAST_DT_F32 or code == PLAST_DT_F64) and out.dtype.code == code:
            if nd:
                if not dims:
                    self.fallback(node, inputs, outputs)
                    return 0
                a, b = dims[0], dims[-1] + 1
                if b - a != len(dims):  # sorted, unique dims (ops/reduce.py): not one consecutive block
                    self.fallback(node, inputs, outputs)
                    return 0
            # as3d_raw, without building its tuples
            shape, strides = x._shape, x._strides
            if (_merge_c(shape, strides, 0, a, &o0, &o1) and _merge_c(shape, strides, a, b, &n0, &n1)
                    and _merge_c(shape, strides, b, nd, &i0, &i1)):
                if _numel(out._shape) and _numel(x._shape):  # (an empty sum: the fallback writes its zeros)
                    # a group of size 1 gets the stride that keeps the kernel on its contiguous paths
                    reduce3d_c(PLAST_RD_SUM, o0, n0, i0, tensor_ptr(x), o1, n1 if n0 > 1 else 1, i1 if i0 > 1 else 1,
                               tensor_ptr(out), code)
                    return 0
        self.fallback(node, inputs, outputs)
        return 0
