"""CPU kernels for the op table's "cpu" column.

Hot ops call the C kernels (csrc/, through _kernels.pyx). Ops not yet worth a C kernel run numpy over views of
arena memory (`np_view`): numpy writes straight into the output's storage, so memory still comes from the
arenas. A numpy kernel is replaced by a C one when a benchmark says it matters.
"""

import numpy as np

from . import _kernels


def np_view(t):
    """A numpy view of a realized tensor's memory, with its strides. Internal: arena memory is only exposed to
    numpy inside kernels, never handed to users (see Tensor.numpy). Cached on the tensor while its storage and
    layout stay the same (jit plans call the same kernels on the same tensors every step)."""
    st = t._storage
    c = t._npcache
    if c is not None and c[0] is st and c[1] == t._offset and c[2] == t._strides:
        return c[3]
    nd = t.dtype.np
    isz = nd.itemsize
    if t.numel() == 0:
        return np.empty(t._shape, dtype=nd)
    base = np.frombuffer(st, dtype=nd, count=st.nbytes // isz)
    arr = np.lib.stride_tricks.as_strided(
        base[t._offset :], shape=t._shape, strides=tuple(s * isz for s in t._strides)
    )
    t._npcache = (st, t._offset, t._strides, arr)
    return arr


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


BINARY_CODES = {"add": 0, "sub": 1, "mul": 2, "div": 3, "maximum": 4, "minimum": 5}


_BOOL_BINARY = {
    "add": np.logical_or,
    "mul": np.logical_and,
    "maximum": np.logical_or,
    "minimum": np.logical_and,
}


def binary(node, inputs, outputs):
    a, b = inputs
    out = outputs[0]
    if out.numel() == 0:
        return
    if out.dtype.code == 0:  # bool arithmetic is logical, as in torch
        _BOOL_BINARY[node.op.name](np_view(a), np_view(b), out=np_view(out))
        return
    shape = out._shape
    _kernels.binary_nd(
        BINARY_CODES[node.op.name],
        out.dtype.code,
        shape,
        address(a),
        bcast_strides(a, shape),
        address(b),
        bcast_strides(b, shape),
        address(out),
        out._strides,
    )


def copy(node, inputs, outputs):
    """Materialize (and cast) a strided input into a contiguous output."""
    np_view(outputs[0])[...] = np_view(inputs[0])


def fill(node, inputs, outputs):
    np_view(outputs[0]).fill(node.args[0])


def view(node, inputs, outputs):
    """Views share the input's storage: only shape, strides and offset change."""
    x = inputs[0]
    strides, offset = node.args[-2], node.args[-1]
    return x._storage, strides, x._offset + offset


def sum_(node, inputs, outputs):
    dims, keepdim = node.args
    x = np_view(inputs[0])
    np_view(outputs[0])[...] = np.sum(x, axis=dims, keepdims=keepdim, dtype=outputs[0].dtype.np)


def _erf(x):
    from math import erf

    return np.vectorize(erf, otypes=[x.dtype])(x) if x.size else x.copy()


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
}


def unary(node, inputs, outputs):
    out = np_view(outputs[0])
    out[...] = UNARY[node.op.name](np_view(inputs[0]))


def matmul_nd(node, inputs, outputs):
    a, b = (np_view(t) for t in inputs)
    np.matmul(a, b, out=np_view(outputs[0]))
