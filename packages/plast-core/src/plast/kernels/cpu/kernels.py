"""CPU kernels for the op table's "cpu" column.

Hot ops call the C kernels (csrc/, through _kernels.pyx). Ops not yet worth a C kernel run numpy over views of
arena memory (`np_view`): numpy writes straight into the output's storage, so memory still comes from the
arenas. A numpy kernel is replaced by a C one when a benchmark says it matters.
"""

import numpy as np

from . import _fast, _gemm, _kernels, _matmul
from ._views import np_view  # noqa: F401 -- the kernels' numpy view of a tensor (compiled)
from .fastpath import SumKernel


def address(t):
    return t._storage.address + t._offset * t.dtype.itemsize


def bcast_strides(t, shape):
    """Strides (elements) of `t` broadcast to `shape` (0 along broadcast dims)."""
    nd = len(shape)
    pad = nd - t.ndim
    out = [0] * nd
    for i in range(t.ndim):
        if t._shape[i] != 1 or shape[pad + i] == 1:
            out[pad + i] = t._strides[i]
    return tuple(out)


BINARY_CODES = _kernels.BINARY_CODES


bool_binary = _kernels.bool_binary  # bool arithmetic is logical, as in torch (compiled)
binary = _kernels.binary  # the op table's kernel for add/sub/mul/div/maximum/minimum (compiled)


def copy(node, inputs, outputs):
    """Materialize (and cast) a strided input into a contiguous output."""
    if not _kernels.copy_same_dtype(inputs[0], outputs[0]):
        np_view(outputs[0])[...] = np_view(inputs[0])


def fill(node, inputs, outputs):
    np_view(outputs[0]).fill(node.args[0])


def view(node, inputs, outputs):
    """Views share the input's storage: only shape, strides and offset change."""
    x = inputs[0]
    strides, offset = node.args[-2], node.args[-1]
    return x._storage, strides, x._offset + offset


def _sum_numpy(node, inputs, outputs):
    """sum for what the vectorized reduction does not take (other dtypes, dims that do not merge, empty)."""
    dims, keepdim = node.args
    x, out = inputs[0], outputs[0]
    # a sum of nothing is 0; numpy refuses even an empty view with a dim past its size limit
    if not x.numel():
        if out.numel():
            np_view(out)[...] = 0
        return
    np_view(out)[...] = np.sum(np_view(x), axis=dims, keepdims=keepdim, dtype=out.dtype.np)


sum_ = SumKernel(_sum_numpy)  # the op table's sum kernel (compiled: kernels/cpu/fastpath.pyx)


def _erf(x):
    from math import erf

    return np.vectorize(erf, otypes=[x.dtype])(x) if x.size else x.copy()


def _gelu_np(approx, grad):
    """GELU or its derivative in float64 numpy (the fallback for inputs the C kernel does not take, as an integer
    tensor), the formulas of csrc/unary.c."""

    def f(x):
        v = np.asarray(x, dtype=np.float64)
        if approx:
            t = np.tanh(0.79788456080286535588 * (v + 0.044715 * v**3))
            if grad:
                return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * 0.79788456080286535588 * (
                    1 + 3 * 0.044715 * v * v
                )
            return 0.5 * v * (1 + t)
        cdf = 0.5 * (1 + _erf(v * 0.70710678118654752440))
        return cdf + v * np.exp(-0.5 * v * v) * 0.39894228040143267794 if grad else v * cdf

    return f


# Unary ops as numpy expressions writing into arena memory. NOTE: these are the correctness baseline; the
# vectorized C versions (issue: "CPU kernels at hardware speed") replace them op by op.
UNARY = {
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "abs": np.abs,
    "sign": np.sign,
    "relu": lambda x: np.maximum(x, 0, dtype=x.dtype),
    "sigmoid": lambda x: (0.5 * (1 + np.tanh(0.5 * x))).astype(x.dtype, copy=False),
    "erf": _erf,
    "gelu_tanh": _gelu_np(True, False),
    "gelu_erf": _gelu_np(False, False),
    "gelu_tanh_grad": _gelu_np(True, True),
    "gelu_erf_grad": _gelu_np(False, True),
}


# ops with a vectorized C kernel (float32 and float64); the rest, and other dtypes, run the numpy versions
_FAST_UNARY = {
    name: _fast.UNARY_CODES[name]
    for name in (
        "exp", "log", "log1p", "sqrt", "tanh", "sigmoid", "relu", "abs", "sign", "erf", "sin", "cos",
        "gelu_tanh", "gelu_erf", "gelu_tanh_grad", "gelu_erf_grad",
    )
}  # fmt: skip


def unary(node, inputs, outputs):
    x, out = inputs[0], outputs[0]
    code = _FAST_UNARY.get(node.op.name)
    if code is not None and x.dtype is out.dtype and x.dtype.code in (_fast.F32, _fast.F64):
        if out.numel():
            _fast.unary_nd(code, x.dtype.code, out._shape, address(x), x._strides, address(out), out._strides)
        return
    np_view(out)[...] = UNARY[node.op.name](np_view(x))


def gemm_into(out, a, b, *, bias=None, act="none", alpha=1.0):
    """out = act(alpha * a @ b + bias) with plast's GEMM (csrc/gemm.c) for float32/float64 operands of 2 or more
    dims (leading dims broadcast); numpy's matmul otherwise. Arrays are numpy views of arena memory."""
    if out.size == 0:
        return
    if (
        out.dtype.itemsize == 2
    ):  # bfloat16 or float16 (plast has no 16-bit integers): in float32, rounded once
        f32 = np.empty(out.shape, np.float32)
        wide = None if bias is None else np.asarray(bias, np.float32)
        gemm_into(f32, a.astype(np.float32), b.astype(np.float32), bias=wide, act=act, alpha=alpha)
        out[...] = f32
        return
    if out.dtype.kind == "f" and a.dtype == b.dtype == out.dtype and a.shape[-1]:
        if a.ndim == 2 and b.ndim == 2:
            _gemm.gemm(a, b, out, alpha=alpha, bias=bias, act=act)
            return
        batch = out.shape[:-2]
        a3 = (
            np.broadcast_to(a, batch + a.shape[-2:]).reshape((-1,) + a.shape[-2:])
            if a.ndim > 2 or batch
            else a
        )
        b3 = (
            np.broadcast_to(b, batch + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
            if b.ndim > 2 or batch
            else b
        )
        o3 = out.reshape((-1,) + out.shape[-2:])
        if np.shares_memory(o3, out):
            _gemm.bmm(a3, b3, o3, alpha=alpha, bias=bias, act=act)
            return
    np.matmul(a, b, out=out)
    if alpha != 1:
        out *= alpha
    if bias is not None:
        out += bias
    if act == "relu":
        np.maximum(out, 0, out=out)
    elif act != "none":
        raise ValueError(f"gemm_into: activation {act!r} needs the float GEMM")


def row_bias(bias, n):
    """bias as a length-n vector when it broadcasts along rows ((), (1,), (n,), (1, 1), (1, n)), else None."""
    if bias.ndim > 2 or (bias.ndim == 2 and bias.shape[0] != 1) or bias.size not in (1, n):
        return None
    flat = bias.reshape(-1)
    return flat if flat.size == n else np.broadcast_to(flat, (n,))


def _matmul_numpy(node, inputs, outputs):
    """matmul for the layouts and dtypes plast's GEMM does not take."""
    a, b = inputs
    gemm_into(np_view(outputs[0]), np_view(a), np_view(b))


matmul_nd = _matmul.MatmulKernel(_matmul_numpy)  # the op table's matmul kernel (compiled; numpy fallback)
