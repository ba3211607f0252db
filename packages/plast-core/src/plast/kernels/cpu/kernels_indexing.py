"""CPU kernels for shape and indexing ops (ops/shape.py, ops/indexing.py).

numpy over views of arena memory (see kernels.np_view): the correctness baseline. Index arrays are data, so the
kernels that read them check every index and raise IndexError (naming the index and the size) before any write.
"""

import ctypes

import numpy as np

from ..._core import dtypes
from ..._core._structs import TensorBase
from ..._core.shapes import contiguous_strides
from . import _kernels
from .kernels import address, np_view


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


def _window_layout(t, dims_map, base):
    """(strides, offset) of the strided window (dims_map, base) of a contiguous tensor t, in elements."""
    est = contiguous_strides(t._shape)
    strides = [sum([c * est[d] for d, c in m]) for m in dims_map]
    off = t._offset + sum([b * est[d] for d, b in enumerate(base)])
    return strides, off


def _window_view(t, shape, dims_map, base):
    """strided_window of a contiguous tensor's memory, built through np_view (numpy's C API) rather than
    as_strided: one K/V cache row per decoded token makes this a per-token cost."""
    strides, off = _window_layout(t, dims_map, base)
    return np_view(TensorBase._from_storage(t._storage, shape, t.dtype, t.device, tuple(strides), off))


def _copy_into_window(t, values, shape, dims_map, base, key):
    """``window[key] = values`` with the C strided copy when `key` is basic (slices over whole dims, one-element
    slices and ints: what _put_key makes of a single position) and `values` has t's dtype and broadcasts to the
    selected region. False (nothing written) otherwise."""
    if values.dtype is not t.dtype:
        return False
    strides, off = _window_layout(t, dims_map, base)
    rshape, rstrides = [], []
    for d, k in enumerate(key):
        if type(k) is int:
            off += k * strides[d]
        elif type(k) is slice and k.step is None and (k.start, k.stop) == (None, None):
            rshape.append(shape[d])
            rstrides.append(strides[d])
        elif type(k) is slice and k.step is None and k.start is not None and k.stop == k.start + 1:
            off += k.start * strides[d]
            rshape.append(1)
            rstrides.append(strides[d])
        else:
            return False
    vshape = values._shape
    if len(vshape) > len(rshape) or any(
        v != 1 and v != r for v, r in zip(reversed(vshape), reversed(rshape))
    ):
        return False  # numpy's broadcasting rules (leading ones, errors) stay with numpy
    region = TensorBase._from_storage(t._storage, tuple(rshape), t.dtype, t.device, tuple(rstrides), off)
    return _kernels.copy_same_dtype(values, region)


def strided_scatter(node, inputs, outputs):
    """out = fill everywhere, except the strided window (dims_map, base), which holds the input."""
    _, dims_map, base, fill = node.args
    out = np_view(outputs[0])
    out.fill(fill)
    g = inputs[0]
    if g.numel() == 0 or out.size == 0:
        return
    strided_window(out, tuple(g.shape), dims_map, base)[...] = np_view(g)


def scatter_sum(node, inputs, outputs, args):
    """The fused ``add`` of strided_scatters (ops/fusion_rules.py scatter_sum): the backward of ``split`` /
    ``chunk`` / narrow views taken side by side, written in one pass instead of a full-size tensor per piece plus
    the adds. ``args`` = (tiled, ((dims_map, base) per input)): when the windows tile the output (a split's
    pieces, build-time check), each gradient is copied into its window by the C strided copy, no zeros first;
    otherwise zeros, then each gradient added into its window."""
    tiled, windows = args
    out_t = outputs[0]
    if out_t.numel() == 0:
        return
    if tiled:
        for g, (dims_map, base) in zip(inputs, windows):
            strides, off = _window_layout(out_t, dims_map, base)
            region = TensorBase._from_storage(
                out_t._storage, tuple(g.shape), out_t.dtype, out_t.device, tuple(strides), off
            )
            if not _kernels.copy_same_dtype(g, region):
                np_view(region)[...] = np_view(g)
        return
    out = np_view(out_t)
    out.fill(0)
    for g, (dims_map, base) in zip(inputs, windows):
        if g.numel():
            strided_window(out, tuple(g.shape), dims_map, base)[...] += np_view(g)


def cat(node, inputs, outputs):
    (dim,) = node.args
    out = np_view(outputs[0])
    if out.size == 0:
        return
    np.concatenate([np_view(t) for t in inputs], axis=dim, out=out)


def split_copy(node, inputs, outputs):
    """Consecutive pieces of the input along `dim` copied into the outputs (ops/shape.py split_copy)."""
    (dim,) = node.args
    xt = inputs[0]
    if all(s == 1 for s in xt._shape[:dim]) and tuple(xt._strides) == contiguous_strides(xt._shape):
        # NOTE: each piece is then one block of memory: a memmove each, where numpy's views and slicing cost
        # tens of microseconds a piece (a sequence split into its time steps has dozens)
        step = xt.dtype.itemsize * (xt._strides[dim] if xt.ndim else 1)
        src = address(xt)
        for o in outputs:
            ctypes.memmove(address(o), src, o.numel() * xt.dtype.itemsize)
            src += o._shape[dim] * step
        return
    x = np_view(xt)
    start = 0
    for o in outputs:
        n = o._shape[dim]
        if n and x.size:
            np_view(o)[...] = x[(slice(None),) * dim + (slice(start, start + n),)]
        start += n


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


def _put_key(ndim, shape, adv_pos, idx, wrap):
    """_key for writes, with the common one-position case (a single index tensor of one element and at most
    one dim: ``cache[:, :, pos] = row``) as a basic slice, which numpy assigns without fancy indexing."""
    if (
        len(idx) == 1
        and idx[0].ndim <= 1
        and idx[0].numel() == 1
        and idx[0].dtype in (dtypes.int32, dtypes.int64)
    ):
        p = adv_pos[0]
        size = shape[p]
        i = int(np_view(idx[0]).reshape(-1)[0])
        if i < (-size if wrap else 0) or i >= size:
            raise IndexError(f"index {i} is out of bounds for dimension {p} with size {size}")
        if i < 0:
            i += size
        key = [slice(None)] * ndim
        key[p] = i if idx[0].ndim == 0 else slice(i, i + 1)
        return tuple(key)
    return _key(ndim, shape, adv_pos, idx, wrap)


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


def _put(node, inputs, outputs, copy_old):
    """Write (or add) `values` at the strided window and index tensors inside it into output 0, after copying
    input 0's value there when `copy_old`. The indices are checked before anything is written."""
    vshape, dims_map, base, adv_pos, wrap, accumulate = node.args
    values, idx = inputs[1], inputs[2:]
    out = np_view(outputs[0])
    nd = len(vshape)
    key = _key(nd, vshape, adv_pos, idx, wrap) if accumulate else _put_key(nd, vshape, adv_pos, idx, wrap)
    if copy_old and out.size:
        out[...] = np_view(inputs[0])
    if out.size == 0 or values.numel() == 0:
        return
    if not accumulate and _copy_into_window(outputs[0], values, tuple(vshape), dims_map, base, key):
        return
    window = _window_view(outputs[0], tuple(vshape), dims_map, base)
    vals = np_view(values)
    if accumulate:
        if adv_pos:
            np.add.at(window, key, vals)
        else:
            window += vals
    else:
        window[key] = vals


def index_put(node, inputs, outputs):
    """out = old, with `values` written (or added) at a strided window and index tensors inside it."""
    _put(node, inputs, outputs, copy_old=True)


def index_put_window(node, inputs, outputs):
    """index_put with the output in input 0's own memory (an in-place write): only the window is written, and a
    bad index leaves the tensor as it was."""
    _put(node, inputs, outputs, copy_old=False)


def _identity(reduce, dt):
    """The value a position starts from when include_self=False: the reduction's neutral element."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dt == np.bool_:
        return reduce == "amin"
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return info.min if reduce == "amax" else info.max
    return -np.inf if reduce == "amax" else np.inf


_UFUNCS = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def scatter_reduce(node, inputs, outputs):
    """out = x with src[i] reduced into x at index[i] along `dim` (every repeated index takes part, NaN propagates
    through amax/amin); with include_self=False the positions that receive values start from the reduction's
    neutral element instead of x. `src` has index's shape (the op layer narrowed it)."""
    dim, reduce, include_self = node.args
    x, index, src = inputs
    out = np_view(outputs[0])
    if out.size == 0:
        return
    out[...] = np_view(x)
    if index.numel() == 0:
        return
    idx = checked_index(index, out.shape[dim], dim, False)
    key = tuple(
        idx if i == dim else np.arange(n).reshape([n if j == i else 1 for j in range(idx.ndim)])
        for i, n in enumerate(idx.shape)
    )
    vals = np_view(src)
    if not include_self:
        out[key] = _identity(reduce, out.dtype)
    with np.errstate(invalid="ignore"):  # NaN propagates through amax/amin quietly, as in torch
        _UFUNCS[reduce].at(out, key, vals)
    if reduce == "mean":
        lin = np.ravel_multi_index(np.broadcast_arrays(*key), out.shape)
        count = np.bincount(lin.ravel(), minlength=out.size).reshape(out.shape)
        hit = count > 0
        denom = count[hit] + (1 if include_self else 0)
        if np.issubdtype(out.dtype, np.integer):
            out[hit] = np.floor_divide(out[hit], denom)
        else:
            out[hit] = out[hit] / denom


def identity(node, inputs, outputs):
    """A copy of the input (for rows whose only job is their backward rule)."""
    out = np_view(outputs[0])
    if out.size:
        out[...] = np_view(inputs[0])
