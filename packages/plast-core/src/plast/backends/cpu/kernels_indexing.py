"""CPU kernels for shape and indexing ops (ops/shape.py, ops/indexing.py).

numpy over views of arena memory (see kernels.np_view): the correctness baseline. Index arrays are data, so the
kernels that read them check every index and raise IndexError (naming the index and the size) before any write.
"""

import numpy as np

from .kernels import np_view


def _contig_strides(shape):
    strides, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc *= max(shape[i], 1)
    return strides


def strided_window(arr, shape, dims_map, base):
    """The numpy view of a fresh contiguous array `arr` that a strided_view row with (dims_map, base) selects."""
    est = _contig_strides(arr.shape)
    isz = arr.itemsize
    strides = tuple(sum(c * est[d] for d, c in m) * isz for m in dims_map)
    off = sum(b * est[d] for d, b in enumerate(base))
    return np.lib.stride_tricks.as_strided(arr.reshape(-1)[off:], shape=shape, strides=strides)


def strided_scatter(node, inputs, outputs):
    """out = fill everywhere, except the strided window (dims_map, base), which holds the input."""
    _, dims_map, base, fill = node.args
    out = np_view(outputs[0])
    out.fill(fill)
    g = inputs[0]
    if g.numel() == 0 or out.size == 0:
        return
    strided_window(out, tuple(g.shape), dims_map, base)[...] = np_view(g)


def cat(node, inputs, outputs):
    (dim,) = node.args
    out = np_view(outputs[0])
    if out.size == 0:
        return
    np.concatenate([np_view(t) for t in inputs], axis=dim, out=out)


def flip(node, inputs, outputs):
    (dims,) = node.args
    np_view(outputs[0])[...] = np.flip(np_view(inputs[0]), axis=dims)


def tril(node, inputs, outputs):
    (k,) = node.args
    fn = np.tril if node.op.name == "tril" else np.triu
    x = np_view(inputs[0])
    if x.size:
        np_view(outputs[0])[...] = fn(x, k)


def checked_index(t, size, dim, wrap):
    """The values of index tensor `t` as an intp array, checked against `size` (negatives wrapped if `wrap`)."""
    a = np_view(t)
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        low_ok = -size if wrap else 0
        if lo < low_ok or hi >= size:
            bad = hi if hi >= size else lo
            raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
        if lo < 0:
            a = np.where(a < 0, a + size, a)
    return a.astype(np.intp, copy=False)


def _key(ndim, shape, adv_pos, idx, wrap):
    key = [slice(None)] * ndim
    for p, t in zip(adv_pos, idx):
        key[p] = checked_index(t, shape[p], p, wrap)
    return tuple(key)


def index(node, inputs, outputs):
    """Advanced indexing: x[..., i0, ..., i1, ...] with index tensors at dims `adv_pos` (numpy's rules)."""
    adv_pos, wrap = node.args
    x = np_view(inputs[0])
    key = _key(x.ndim, x.shape, adv_pos, inputs[1:], wrap)
    out = np_view(outputs[0])
    if out.size:
        out[...] = x[key]


def index_backward(node, inputs, outputs):
    """Zeros of the indexed tensor's shape with g added at the indexed positions (repeats accumulate)."""
    _, adv_pos, wrap = node.args
    out = np_view(outputs[0])
    key = _key(out.ndim, out.shape, adv_pos, inputs[1:], wrap)
    out.fill(0)
    g = np_view(inputs[0])
    if g.size:
        np.add.at(out, key, g)


def index_put(node, inputs, outputs):
    """out = old, with `values` written (or added) at a strided window and index tensors inside it."""
    vshape, dims_map, base, adv_pos, wrap, accumulate = node.args
    old, values, idx = inputs[0], inputs[1], inputs[2:]
    out = np_view(outputs[0])
    key = _key(len(vshape), vshape, adv_pos, idx, wrap)
    if out.size:
        out[...] = np_view(old)
    if out.size == 0 or values.numel() == 0:
        return
    window = strided_window(out, tuple(vshape), dims_map, base)
    vals = np_view(values)
    if accumulate:
        if adv_pos:
            np.add.at(window, key, vals)
        else:
            window += vals
    else:
        window[key] = vals
