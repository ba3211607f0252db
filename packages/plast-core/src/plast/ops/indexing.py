"""Indexing: ``t[...]``, ``t[...] = v``, gather/scatter, index_select/index_add/index_put, masked_select.

Basic indexing (ints, slices with positive steps, None, ...) is a view (``strided_view`` from ops/shape.py).
Advanced indexing (integer tensors, lists, numpy arrays, boolean masks) follows torch: ints select first, then the
index tensors broadcast together and their result dims go where the first of them stood when they are adjacent,
or in front otherwise (numpy's rule). Three primitives carry all of it:

* ``index(x, *idx)``: gather at index tensors on some dims of x;
* ``index_backward(g, *idx)``: zeros with g added at those positions (repeated indices accumulate);
* ``index_put(old, values, *idx)``: old with values written (or added) at a strided window and index tensors
  inside it; this is ``__setitem__``, ``scatter``, ``scatter_add``, ``index_add`` and ``index_put``.

Their backward rules use each other, so double backward works. gather/scatter become advanced indexing with
``arange`` index tensors on the other dims. Index values are data: the kernels check them (IndexError naming
the index and the size); index tensors that already hold values are also checked at the call.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._core import dtypes
from .._core._structs import TensorBase
from .._core.errors import DeviceMismatchError, DTypeError, ShapeError
from .._core.grad_mode import is_grad_enabled
from .._core.hints import Number, TensorOrNumber
from .._core.shapes import broadcast_shapes, norm_dim
from ..graph._graph import record
from ..graph.inplace import internal_overlap
from ..graph.tape import tracing
from ..kernels.cpu import kernels_indexing as kix
from ..kernels.cpu.kernels import np_view
from . import movement
from .creation import arange, tensor
from .device import values_of
from .elementwise import div, mul
from .factory import scalar_tensor
from .inplace import apply_inplace
from .pointwise import eq, logical_and, nonzero, where
from .registry import register
from .shape import _identity_map, flatten, select, strided_view

_INT_DTYPES = (dtypes.int64, dtypes.int32)


# ---- the three primitives ----


def _index_bw(node, g):
    x, idx = node.inputs[0], node.inputs[1:]
    adv_pos, wrap = node.args
    return (_index_backward_raw(g, idx, tuple(x.shape), adv_pos, wrap),) + (None,) * len(idx)


def _index_backward_bw(node, gg):
    idx = node.inputs[1:]
    _, adv_pos, wrap = node.args
    return (_index_raw(gg, idx, adv_pos, wrap),) + (None,) * len(idx)


def _index_put_bw(node, g):
    old, vals, idx = node.inputs[0], node.inputs[1], node.inputs[2:]
    vshape, dims_map, base, adv_pos, wrap, accumulate = node.args
    g_old = g_vals = None
    if old.requires_grad:
        if accumulate:
            g_old = g
        else:
            g_old = _index_put_raw(g, _zeros(tuple(vals.shape), g.dtype, g.device), idx, node.args)
    if vals.requires_grad:
        g_vals = strided_view(g, vshape, dims_map, base)
        if adv_pos:
            g_vals = _index_raw(g_vals, idx, adv_pos, wrap)
    return (g_old, g_vals) + (None,) * len(idx)


# NOTE: backward reads only the index tensors' values, never x / old / values, so in-place changes of the
# indexed tensor after the op was recorded don't invalidate it.
INDEX = register("index", cpu=kix.index, backward=_index_bw, saves_inputs=False)
INDEX_BACKWARD = register(
    "index_backward", cpu=kix.index_backward, backward=_index_backward_bw, saves_inputs=False
)
INDEX_PUT = register("index_put", cpu=kix.index_put, backward=_index_put_bw, saves_inputs=False)
INDEX_PUT.window_kernels["cpu"] = kix.index_put_window


def _zeros(shape, dtype, device):
    z = scalar_tensor(0.0 if dtype.is_floating_point else 0, dtype, device)
    return movement.expand(z, shape) if shape else z


def _broadcast_index_shapes(idx):
    nd = max(t.ndim for t in idx)
    out = [1] * nd
    for t in idx:
        for i, d in enumerate(t.shape):
            j = nd - t.ndim + i
            if out[j] == 1:
                out[j] = d
            elif d not in (1, out[j]):
                shown = ", ".join(str(list(t.shape)) for t in idx)
                raise IndexError(
                    f"shape mismatch: indexing tensors could not be broadcast together with shapes {shown}"
                )
    return tuple(out)


def _adv_result_shape(vshape, adv_pos, bshape):
    """numpy's rule: adjacent index tensors put their broadcast shape in place, separated ones in front."""
    rest_before = tuple(vshape[d] for d in range(adv_pos[0]))
    adjacent = list(adv_pos) == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    if adjacent:
        return rest_before + tuple(bshape) + tuple(vshape[adv_pos[-1] + 1 :])
    return tuple(bshape) + tuple(vshape[d] for d in range(len(vshape)) if d not in adv_pos)


def _index_raw(x, idx, adv_pos, wrap):
    shape = _adv_result_shape(tuple(x.shape), adv_pos, _broadcast_index_shapes(idx))
    return record(INDEX, (x, *idx), (tuple(adv_pos), wrap), [(shape, x.dtype)], x.device)[0]


def _index_backward_raw(g, idx, in_shape, adv_pos, wrap):
    args = (tuple(in_shape), tuple(adv_pos), wrap)
    return record(INDEX_BACKWARD, (g, *idx), args, [(tuple(in_shape), g.dtype)], g.device)[0]


def _index_put_raw(old, values, idx, args):
    return record(INDEX_PUT, (old, values, *idx), args, [(tuple(old.shape), old.dtype)], old.device)[0]


# ---- parsing an index ----


def _check_values(t, size, dim, wrap):
    """Check an index tensor's values now when it already holds them (else the kernel checks them)."""
    if t._storage is None or t.numel() == 0 or t.device.type != "cpu":
        return  # on the GPU the kernel checks (reading indices back here would cost a sync per op)
    t._storage.check()
    a = np_view(t)
    lo, hi = int(a.min()), int(a.max())
    if lo < (-size if wrap else 0) or hi >= size:
        bad = hi if hi >= size else lo
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _tracing():
    return tracing()


def _inplace(x, fn, opname):
    """apply_inplace, with x realized first when that lets the write go to x's memory.

    NOTE: works around graph/inplace.py: an unrealized tensor is rebound to a new node, and nodes recorded
    earlier that read it (views of it, other ops) would then see the new value, e.g. ``x[1:, 0] += 1`` on a lazy
    x. Realizing x first takes the direct-write path, which views share."""
    if x._storage is None and x.grad_fn is None and not _tracing():
        x._realized()
    return apply_inplace(x, fn, opname)


def _legacy_tuple(index):
    """torch still reads a short list holding sequences, slices, None or ... as a tuple of indices."""
    if isinstance(index, tuple):
        return index
    if isinstance(index, list) and len(index) < 32:
        for it in index:
            if it is None or it is Ellipsis or isinstance(it, (TensorBase, list, tuple, slice, np.ndarray)):
                return tuple(index)
    return (index,)


def _classify(it, device):
    """(kind, value): kind in none, ellipsis, bool, int, slice, adv (int tensor), mask (bool tensor)."""
    if it is None:
        return "none", None
    if it is Ellipsis:
        return "ellipsis", None
    if isinstance(it, (bool, np.bool_)):
        return "bool", bool(it)
    if isinstance(it, (numbers.Integral, np.integer)):
        return "int", int(it)
    if isinstance(it, slice):
        return "slice", it
    if isinstance(it, TensorBase):
        if it.device != device:
            raise DeviceMismatchError(f"indexing: the index is on {it.device}, the tensor on {device}")
        if it.dtype is dtypes.uint8:
            # torch reads a uint8 index as a mask (deprecated there, with this warning)
            warnings.warn(
                "indexing with dtype plast.uint8 is deprecated (as in torch), please use a dtype plast.bool "
                "instead",
                UserWarning,
                stacklevel=4,
            )
            it = movement.cast(it, dtypes.bool_)
        if it.dtype is dtypes.bool_:
            if it.ndim == 0:
                return "bool", bool(values_of(it))
            return "mask", it
        if it.dtype in _INT_DTYPES:
            if it.ndim == 0 and not _tracing():
                return "int", int(values_of(it))
            return "adv", it
        raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors, got {it.dtype}")
    if isinstance(it, (list, tuple, np.ndarray)):
        try:
            arr = np.asarray(it)
        except ValueError as e:
            raise IndexError(f"can't use a ragged sequence as an index: {e}") from None
        if arr.dtype == np.bool_:
            return ("bool", bool(arr)) if arr.ndim == 0 else ("mask", tensor(arr))
        if arr.dtype.kind in "iu" or arr.size == 0:
            if arr.ndim == 0:
                return "int", int(arr)
            return "adv", tensor(arr.astype(np.int64))
        raise IndexError(f"arrays used as indices must be of integer or boolean type, got {arr.dtype}")
    raise IndexError(
        "only integers, slices (`:`), ellipsis (`...`), None, booleans and integer or boolean tensors are valid "
        f"indices (got {type(it).__name__})"
    )


class _Parsed:
    __slots__ = ("vshape", "dims_map", "base", "adv", "adv_pos")


def _parse(x, index):
    """Split `index` into a strided view of x (ints, slices, None) and index tensors on dims of that view."""
    items = [_classify(it, x.device) for it in _legacy_tuple(index)]
    n_ell = sum(k == "ellipsis" for k, _ in items)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 if k in ("int", "slice", "adv") else (v.ndim if k == "mask" else 0) for k, v in items)
    if consumed > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    fill = [("slice", slice(None))] * (x.ndim - consumed)
    if n_ell:
        e = next(i for i, (k, _) in enumerate(items) if k == "ellipsis")
        items = items[:e] + fill + items[e + 1 :]
    else:
        items = items + fill
    shape, dims_map, base = [], [], [0] * x.ndim
    adv, adv_pos = [], []
    d = 0
    for kind, v in items:
        if kind == "none" or kind == "bool":
            shape.append(0 if v is False else 1)
            dims_map.append(())
        elif kind == "int":
            n = x.shape[d]
            if not -n <= v < n:
                raise IndexError(f"index {v} is out of bounds for dimension {d} with size {n}")
            base[d] = v + n if v < 0 else v
            d += 1
        elif kind == "slice":
            n = x.shape[d]
            if v.step is not None and int(v.step) <= 0:
                raise ValueError(
                    "step must be greater than zero (negative steps are not supported; use flip)"
                )
            start, stop, step = v.indices(n)
            length = len(range(start, stop, step))
            base[d] = start if length else 0
            shape.append(length)
            dims_map.append(((d, step),))
            d += 1
        elif kind == "adv":
            _check_values(v, x.shape[d], len(shape), True)
            adv_pos.append(len(shape))
            adv.append(v)
            shape.append(x.shape[d])
            dims_map.append(((d, 1),))
            d += 1
        else:  # mask
            k = v.ndim
            if tuple(v.shape) != tuple(x.shape[d : d + k]):
                raise IndexError(
                    f"the shape of the mask {list(v.shape)} at index {d} does not match the shape of the indexed "
                    f"tensor {list(x.shape)} at index {d}"
                )
            for t in nonzero(v, as_tuple=True):
                adv_pos.append(len(shape))
                adv.append(t)
                shape.append(x.shape[d])
                dims_map.append(((d, 1),))
                d += 1
    p = _Parsed()
    p.vshape, p.dims_map, p.base = tuple(shape), tuple(dims_map), tuple(base)
    p.adv, p.adv_pos = tuple(adv), tuple(adv_pos)
    return p


def _indexed_shape(p):
    if not p.adv:
        return p.vshape
    return _adv_result_shape(p.vshape, p.adv_pos, _broadcast_index_shapes(p.adv))


# ---- __getitem__ / __setitem__ / index_put ----


def getitem(x: TensorBase, index: Any) -> TensorBase:
    """``x[index]`` with torch's rules: ints, slices (positive steps), None, ..., integer tensors/lists/arrays and
    boolean masks. Basic indexing returns a view; advanced indexing gathers a copy.

    >>> t = plast.arange(12).reshape(3, 4)
    >>> t[1:, ::2].tolist(), t[[0, 2], -1].tolist(), t[t > 9].tolist()
    ([[4, 6], [8, 10]], [3, 11], [10, 11])
    """
    p = _parse(x, index)
    v = strided_view(x, p.vshape, p.dims_map, p.base)
    if not p.adv:
        return v
    return _index_raw(v, p.adv, p.adv_pos, True)


def _value_tensor(value, x, op):
    if isinstance(value, TensorBase):
        if value.device != x.device:
            raise DeviceMismatchError(f"{op}: the value is on {value.device}, the tensor on {x.device}")
        return movement.cast(value, x.dtype)
    if isinstance(value, (bool, numbers.Number, np.generic)) and not isinstance(value, complex):
        v = value.item() if isinstance(value, np.generic) else value
        if not x.dtype.is_floating_point and isinstance(v, float):
            v = int(v)
        return scalar_tensor(v, x.dtype, x.device)
    return tensor(value, dtype=x.dtype)


def _put(x, p, values, accumulate, op):
    """x with `values` (broadcast to the indexed shape) written or added at the parsed index, out of place."""
    ishape = _indexed_shape(p)
    v = _value_tensor(values, x, op)
    # torch drops leading size-1 dims of a value with more dims than the slot
    while v.ndim > len(ishape) and v.shape[0] == 1:
        v = movement.reshape(v, tuple(v.shape[1:]))
    try:
        v = movement.expand(v, ishape)
    except ShapeError:
        raise ShapeError(
            f"{op}: shape mismatch: value of shape {tuple(v.shape)} can't be broadcast to the indexing result of "
            f"shape {ishape}"
        ) from None
    args = (p.vshape, p.dims_map, p.base, p.adv_pos, True, bool(accumulate))
    return _index_put_raw(x, v, p.adv, args)


def setitem(x: TensorBase, index: Any, value: TensorOrNumber) -> None:
    """``x[index] = value`` (value broadcasts to the indexed shape and is cast to x's dtype). In place, as in
    torch; differentiable with respect to both x's old value and `value`.

    >>> t = plast.zeros(2, 3)
    >>> t[0, 1:] = 5.0
    >>> t.tolist()
    [[0.0, 5.0, 5.0], [0.0, 0.0, 0.0]]
    """
    p = _parse(x, index)
    if not p.adv and internal_overlap(x):
        # x repeats memory (an expanded tensor): write the indexed view, as torch does (``x.expand(3, 3)[0] = 5``
        # writes the row, which repeats nothing); a view that repeats memory itself raises in apply_inplace
        x = strided_view(x, p.vshape, p.dims_map, p.base)
        p = _parse(x, ...)
    _inplace(x, lambda old: _put(old, p, value, False, "__setitem__"), "__setitem__")


def _indices_tuple(indices, op):
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}: indices must be a tuple of tensors, got {type(indices).__name__}")
    return tuple(slice(None) if i is None else i for i in indices)


def index_put(
    x: TensorBase,
    indices: TensorBase | Sequence[TensorBase | None],
    values: TensorOrNumber,
    accumulate: bool = False,
) -> TensorBase:
    """Out-of-place ``x[indices] = values`` (or ``+=`` with accumulate=True, where repeated indices add up).

    >>> plast.zeros(3).index_put((plast.tensor([0, 0, 2]),), plast.tensor(1.0), accumulate=True).tolist()
    [2.0, 0.0, 1.0]
    """
    p = _parse(x, _indices_tuple(indices, "index_put"))
    return _put(x, p, values, accumulate, "index_put")


def index_put_(
    x: TensorBase,
    indices: TensorBase | Sequence[TensorBase | None],
    values: TensorOrNumber,
    accumulate: bool = False,
) -> TensorBase:
    """In-place index_put."""
    p = _parse(x, _indices_tuple(indices, "index_put_"))
    return _inplace(x, lambda old: _put(old, p, values, accumulate, "index_put_"), "index_put_")


def masked_select(x: TensorBase, mask: TensorBase) -> TensorBase:
    """The elements of x where the (broadcast) bool mask is True, as a 1-D tensor.

    >>> plast.masked_select(plast.tensor([1, 2, 3]), plast.tensor([True, False, True])).tolist()
    [1, 3]
    """
    if mask.dtype is not dtypes.bool_:
        raise DTypeError(f"masked_select: mask must be a bool tensor, got {mask.dtype}")
    shape = broadcast_shapes(x.shape, mask.shape, op="masked_select")
    return getitem(movement.expand(x, shape), movement.expand(mask, shape))


# ---- gather / scatter / index_select / index_add / take_along_dim ----

_ARANGE = {}


def _arange(n, device):
    """0..n-1 as a persistent int64 constant (internal: index tensors for the dims gather/scatter don't index)."""
    key = (n, str(device))
    t = _ARANGE.get(key)
    if t is None:
        if len(_ARANGE) > 512:
            _ARANGE.clear()
        t = _ARANGE[key] = arange(n, dtype=dtypes.int64)
    return t


def _along_dim(index, d):
    """Index tensors that address element [i0, .., index[i], .., ik] for every position i of `index`."""
    nd = index.ndim
    out = []
    for i in range(nd):
        if i == d:
            out.append(index)
        else:
            shape = [1] * nd
            shape[i] = index.shape[i]
            out.append(movement.reshape(_arange(index.shape[i], index.device), tuple(shape)))
    return out


def _check_index_tensor(index, op):
    if not isinstance(index, TensorBase):
        raise TypeError(f"{op}: index must be a tensor, got {type(index).__name__}")
    if index.dtype not in _INT_DTYPES:
        raise DTypeError(f"{op}: index must be an int64 (or int32) tensor, got {index.dtype}")


def _check_along(x, d, index, op, src=None):
    if index.ndim != x.ndim:
        raise ShapeError(
            f"{op}: index must have as many dims as the input; index {tuple(index.shape)}, input {tuple(x.shape)}"
        )
    for i in range(x.ndim):
        if i != d and index.shape[i] > x.shape[i]:
            raise ShapeError(
                f"{op}: index {tuple(index.shape)} must not be larger than the input {tuple(x.shape)} apart from "
                f"dim {d}"
            )
        if src is not None and index.shape[i] > src.shape[i]:
            raise ShapeError(
                f"{op}: index {tuple(index.shape)} must not be larger than src {tuple(src.shape)}"
            )
    _check_values(index, x.shape[d], d, False)


def gather(x: TensorBase, dim: int, index: TensorBase, *, sparse_grad: bool = False) -> TensorBase:
    """out[i][j][k] = x[i][index[i][j][k]][k] for dim=1 (and so on): torch.gather.

    >>> plast.gather(plast.tensor([[1, 2], [3, 4]]), 1, plast.tensor([[1], [0]])).tolist()
    [[2], [3]]
    """
    _check_index_tensor(index, "gather")
    if x.ndim == 0:
        x = movement.reshape(x, (1,))
        out = gather(x, 0, movement.reshape(index, (index.numel(),)))
        return movement.reshape(out, tuple(index.shape))
    d = norm_dim(dim, x.ndim, "gather")
    _check_along(x, d, index, "gather")
    return _index_raw(x, _along_dim(index, d), tuple(range(x.ndim)), False)


def _scatter(x, dim, index, src, accumulate, op):
    _check_index_tensor(index, op)
    if x.ndim == 0:
        flat_src = movement.reshape(src, (-1,)) if isinstance(src, TensorBase) else src
        out = _scatter(movement.reshape(x, (1,)), 0, movement.reshape(index, (-1,)), flat_src, accumulate, op)
        return movement.reshape(out, ())
    d = norm_dim(dim, x.ndim, op)
    if isinstance(src, TensorBase):
        if src.device != x.device:
            raise DeviceMismatchError(f"{op}: src is on {src.device}, the input on {x.device}")
        if src.ndim != x.ndim:
            raise ShapeError(
                f"{op}: src {tuple(src.shape)} must have as many dims as the input {tuple(x.shape)}"
            )
        _check_along(x, d, index, op, src)
        vals = strided_view(movement.cast(src, x.dtype), index.shape, _identity_map(x.ndim), (0,) * x.ndim)
    elif isinstance(src, numbers.Number):
        _check_along(x, d, index, op)
        v = int(src) if not x.dtype.is_floating_point and isinstance(src, float) else src
        vals = movement.expand(scalar_tensor(v, x.dtype, x.device), tuple(index.shape))
    else:
        raise TypeError(f"{op}: src must be a tensor or a number, got {type(src).__name__}")
    adv_pos = tuple(range(x.ndim))
    args = (tuple(x.shape), _identity_map(x.ndim), (0,) * x.ndim, adv_pos, False, accumulate)
    return _index_put_raw(x, vals, _along_dim(index, d), args)


def _scatter_any(x, dim, index, src, reduce, op):
    """scatter with torch's legacy reduce argument: None writes, 'add' adds, 'multiply' multiplies (repeated
    indices all take part). Unlike torch (which has no derivative for reduce=), both reductions differentiate:
    'add' like scatter_add, 'multiply' like scatter_reduce(..., 'prod')."""
    if reduce is None or reduce == "add":
        return _scatter(x, dim, index, src, reduce == "add", op)
    if reduce != "multiply":
        raise ValueError(f"{op}: reduce must be 'add' or 'multiply', got {reduce!r}")
    _check_index_tensor(index, op)
    if isinstance(src, TensorBase):
        src = movement.cast(src, x.dtype)
    elif isinstance(src, numbers.Number):
        src = _full(tuple(index.shape), src, x.dtype, x.device)
    else:
        raise TypeError(f"{op}: src must be a tensor or a number, got {type(src).__name__}")
    return _scatter_reduce(x, dim, index, src, "prod", True, op)


def scatter(
    x: TensorBase,
    dim: int,
    index: TensorBase,
    src: TensorOrNumber | None = None,
    *,
    value: Number | None = None,
    reduce: str | None = None,
) -> TensorBase:
    """Out-of-place torch.scatter: x with src[i][j][k] written at x[index[i][j][k]][j][k] (dim=0); `src` may be a
    tensor or a number (or pass value=); reduce='add' / 'multiply' combine instead of writing.

    >>> plast.zeros(3).scatter(0, plast.tensor([2, 0]), plast.tensor([5.0, 7.0])).tolist()
    [7.0, 0.0, 5.0]
    """
    if src is None:
        if value is None:
            raise TypeError("scatter: pass src (a tensor or number) or value")
        src = value
    return _scatter_any(x, dim, index, src, reduce, "scatter")


def scatter_(
    x: TensorBase,
    dim: int,
    index: TensorBase,
    src: TensorOrNumber | None = None,
    *,
    value: Number | None = None,
    reduce: str | None = None,
) -> TensorBase:
    """In-place scatter."""
    if src is None:
        if value is None:
            raise TypeError("scatter_: pass src (a tensor or number) or value")
        src = value
    return _inplace(x, lambda old: _scatter_any(old, dim, index, src, reduce, "scatter_"), "scatter_")


def scatter_add(x: TensorBase, dim: int, index: TensorBase, src: TensorBase) -> TensorBase:
    """Out-of-place torch.scatter_add: x with src added at the scattered positions (repeats add up).

    >>> plast.zeros(3).scatter_add(0, plast.tensor([2, 2]), plast.tensor([5.0, 7.0])).tolist()
    [0.0, 0.0, 12.0]
    """
    return _scatter(x, dim, index, src, True, "scatter_add")


def scatter_add_(x: TensorBase, dim: int, index: TensorBase, src: TensorBase) -> TensorBase:
    """In-place scatter_add."""
    return _inplace(x, lambda old: _scatter(old, dim, index, src, True, "scatter_add_"), "scatter_add_")


# ---- scatter_reduce ----

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _full(shape, value, dtype, device):
    v = float(value) if dtype.is_floating_point else bool(value) if dtype is dtypes.bool_ else int(value)
    t = scalar_tensor(v, dtype, device)
    return movement.expand(t, shape) if shape else t


def _scatter_reduce_output(node):
    t = node.outputs[0]()
    if t is None:
        t = record(node.op, node.inputs, node.args, node.specs, node.device)[0]
    return t


def _scatter_reduce_bw(node, g):
    """torch's scatter_reduce backward, in plast ops (so it differentiates again): sum and mean pass the
    gradient through (mean divided by the counts), prod by products of the others (exact with one zero),
    amax/amin split it evenly among the values equal to the result."""
    x, index, src = node.inputs
    d, reduce, include_self = node.args
    dt = x.dtype

    def take(t):
        return gather(t, d, index)

    if reduce == "sum":
        g_self, g_src = g, take(g)
    elif reduce == "mean":
        n = _scatter(
            _full(tuple(g.shape), 1 if include_self else 0, dt, g.device),
            d,
            index,
            _full(tuple(index.shape), 1, dt, g.device),
            True,
            "scatter_reduce",
        )
        n = where(eq(n, 0), 1.0, n)
        g_self, g_src = div(g, n), div(take(g), take(n))
    elif reduce == "prod":
        result = _scatter_reduce_output(node)
        self_one = where(eq(x, 0), 1.0, x)
        g_self = div(
            mul(g, _scatter_reduce(self_one, d, index, src, "prod", include_self, "scatter_reduce")), self_one
        )
        src_zero = eq(src, 0)
        zeros_there = take(
            _scatter(
                _full(tuple(x.shape), 0, dt, x.device),
                d,
                index,
                movement.cast(src_zero, dt),
                True,
                "scatter_reduce",
            )
        )
        single = logical_and(src_zero, eq(zeros_there, 1))
        # a lone zero's gradient is the product of the others, which dividing the result by it can't give
        others = _scatter_reduce(x, d, index, where(single, 1.0, src), "prod", include_self, "scatter_reduce")
        g_src = where(single, take(mul(g, others)), div(take(mul(g, result)), where(src_zero, 1.0, src)))
        g_src = _guard_double_backward(g_src, zeros_there)
    else:  # amax / amin
        result = _scatter_reduce_output(node)
        self_hit = movement.cast(eq(x, result), dt)
        src_hit = movement.cast(eq(src, take(result)), dt)
        # NOTE: like torch, an excluded self (include_self=False) equal to the result still counts as a tie here
        share = div(g, _scatter(self_hit, d, index, src_hit, True, "scatter_reduce"))
        g_self, g_src = mul(self_hit, share), mul(src_hit, take(share))
    if not include_self:
        g_self = _scatter(g_self, d, index, 0.0, False, "scatter_reduce")
    return g_self, None, g_src


def _double_backward_error(node, g):
    raise RuntimeError(
        "scatter_reduce(): double backward is unsupported for src when more than one zero in src is scattered to "
        "the same position (as in torch); the first gradient is fine"
    )


SCATTER_REDUCE = register("scatter_reduce", cpu=kix.scatter_reduce, backward=_scatter_reduce_bw)
DOUBLE_BACKWARD_ERROR = register(
    "scatter_reduce_double_backward_error",
    cpu=kix.identity,
    backward=_double_backward_error,
    saves_inputs=False,
)


def _guard_double_backward(g_src, zeros_there):
    """g_src, behind a row that raises if differentiated, when a graph of the backward is being built and some
    position receives several zeros from src (torch's first gradient there is right, its derivative is not)."""
    if not (is_grad_enabled() and g_src.requires_grad) or _tracing():
        return g_src
    if zeros_there.numel() == 0 or not np.any(values_of(zeros_there) > 1.5):
        return g_src
    return record(DOUBLE_BACKWARD_ERROR, (g_src,), (), [(tuple(g_src.shape), g_src.dtype)], g_src.device)[0]


def _scatter_reduce(x, dim, index, src, reduce, include_self, op):
    _check_index_tensor(index, op)
    if not isinstance(src, TensorBase):
        raise TypeError(f"{op}: src must be a tensor, got {type(src).__name__}")
    if reduce not in _REDUCTIONS:
        raise ValueError(f"{op}: reduce must be one of {', '.join(map(repr, _REDUCTIONS))}, got {reduce!r}")
    if src.device != x.device:
        raise DeviceMismatchError(f"{op}: src is on {src.device}, the input on {x.device}")
    if src.dtype is not x.dtype:
        raise DTypeError(
            f"{op}: src must have the input's dtype {x.dtype}, got {src.dtype}; cast one of them"
        )
    if reduce == "mean" and x.dtype is dtypes.bool_:
        raise DTypeError(f"{op}: reduce='mean' is not defined for bool tensors")
    if x.ndim == 0:
        norm_dim(dim, 1, op)
        fx, fi, fs = (movement.reshape(t, (-1,)) for t in (x, index, src))
        return movement.reshape(_scatter_reduce(fx, 0, fi, fs, reduce, include_self, op), ())
    d = norm_dim(dim, x.ndim, op)
    if src.ndim != x.ndim:
        raise ShapeError(f"{op}: src {tuple(src.shape)} must have as many dims as the input {tuple(x.shape)}")
    _check_along(x, d, index, op, src)
    if tuple(src.shape) != tuple(index.shape):
        src = strided_view(src, tuple(index.shape), _identity_map(x.ndim), (0,) * x.ndim)
    args = (d, reduce, bool(include_self))
    return record(SCATTER_REDUCE, (x, index, src), args, [(tuple(x.shape), x.dtype)], x.device)[0]


def scatter_reduce(
    x: TensorBase, dim: int, index: TensorBase, src: TensorBase, reduce: str, *, include_self: bool = True
) -> TensorBase:
    """torch.scatter_reduce: x with src[i] reduced into x[index[i]] along `dim` by reduce = 'sum', 'prod',
    'mean', 'amax' or 'amin'; with include_self=False x's own value at a position that receives values takes no
    part. Integer 'mean' rounds down, like torch. Gradients as torch defines them (ties of amax/amin share).

    >>> x = plast.tensor([1.0, 2.0, 3.0])
    >>> x.scatter_reduce(0, plast.tensor([0, 0, 2]), plast.tensor([5.0, 4.0, 1.0]), "amax").tolist()
    [5.0, 2.0, 3.0]
    """
    return _scatter_reduce(x, dim, index, src, reduce, include_self, "scatter_reduce")


def scatter_reduce_(
    x: TensorBase, dim: int, index: TensorBase, src: TensorBase, reduce: str, *, include_self: bool = True
) -> TensorBase:
    """In-place scatter_reduce."""
    return _inplace(
        x,
        lambda old: _scatter_reduce(old, dim, index, src, reduce, include_self, "scatter_reduce_"),
        "scatter_reduce_",
    )


def _index_1d(index, op):
    _check_index_tensor(index, op)
    if index.ndim > 1:
        raise ShapeError(f"{op}: index must be 1-D (or 0-D), got shape {tuple(index.shape)}")
    return movement.reshape(index, (1,)) if index.ndim == 0 else index


def index_select(x: TensorBase, dim: int, index: TensorBase) -> TensorBase:
    """The entries of x at positions `index` (1-D) along `dim`.

    >>> plast.tensor([[1, 2], [3, 4]]).index_select(1, plast.tensor([1, 1, 0])).tolist()
    [[2, 2, 1], [4, 4, 3]]
    """
    index = _index_1d(index, "index_select")
    if x.ndim == 0:
        # torch: a 0-d input gives a 0-d result (the index must then hold one element)
        return movement.reshape(index_select(movement.reshape(x, (1,)), 0, index), ())
    d = norm_dim(dim, x.ndim, "index_select")
    _check_values(index, x.shape[d], d, False)
    return _index_raw(x, (index,), (d,), False)


def _index_add(x, dim, index, source, alpha, op):
    index = _index_1d(index, op)
    d = norm_dim(dim, max(x.ndim, 1), op)
    if not isinstance(source, TensorBase):
        raise TypeError(f"{op}: source must be a tensor, got {type(source).__name__}")
    if x.ndim == 0:
        if source.ndim != 0 or index.numel() != 1:
            raise ShapeError(
                f"{op}: a 0-d input takes a 0-d source and one index, got source "
                f"{tuple(source.shape)} and {index.numel()} indices"
            )
        out = _index_add(movement.reshape(x, (1,)), 0, index, movement.reshape(source, (1,)), alpha, op)
        return movement.reshape(out, ())
    want = tuple(x.shape[:d]) + (index.shape[0],) + tuple(x.shape[d + 1 :])
    if tuple(source.shape) != want:
        raise ShapeError(
            f"{op}: source must have shape {want} (input {tuple(x.shape)}, index of length "
            f"{index.shape[0]}), got {tuple(source.shape)}"
        )
    _check_values(index, x.shape[d], d, False)

    vals = movement.cast(source if alpha == 1 else mul(source, alpha), x.dtype)
    args = (tuple(x.shape), _identity_map(x.ndim), (0,) * x.ndim, (d,), False, True)
    return _index_put_raw(x, vals, (index,), args)


def index_add(
    x: TensorBase, dim: int, index: TensorBase, source: TensorBase, *, alpha: Number = 1
) -> TensorBase:
    """x with alpha * source added at positions `index` along `dim` (repeats add up).

    >>> plast.zeros(3).index_add(0, plast.tensor([0, 0]), plast.tensor([1.0, 2.0])).tolist()
    [3.0, 0.0, 0.0]
    """
    return _index_add(x, dim, index, source, alpha, "index_add")


def index_add_(
    x: TensorBase, dim: int, index: TensorBase, source: TensorBase, *, alpha: Number = 1
) -> TensorBase:
    """In-place index_add."""
    return _inplace(x, lambda old: _index_add(old, dim, index, source, alpha, "index_add_"), "index_add_")


def take_along_dim(x: TensorBase, indices: TensorBase, dim: int | None = None) -> TensorBase:
    """torch.take_along_dim: gather with x and indices broadcast against each other except along `dim`
    (the flattened tensors when dim is None).

    >>> plast.take_along_dim(plast.tensor([[10, 30], [40, 20]]), plast.tensor([[1], [0]]), 1).tolist()
    [[30], [40]]
    """
    _check_index_tensor(indices, "take_along_dim")
    if dim is None:
        return gather(flatten(x), 0, flatten(indices))
    if x.ndim != indices.ndim:
        raise ShapeError(
            f"take_along_dim: input {tuple(x.shape)} and indices {tuple(indices.shape)} must have the same number "
            "of dims"
        )
    d = norm_dim(dim, x.ndim, "take_along_dim")
    xs = list(x.shape)
    js = list(indices.shape)
    xs[d] = js[d] = 1
    b = list(broadcast_shapes(tuple(xs), tuple(js), op="take_along_dim"))
    bx, bi = list(b), list(b)
    bx[d], bi[d] = x.shape[d], indices.shape[d]
    return gather(movement.expand(x, tuple(bx)), d, movement.expand(indices, tuple(bi)))


def _iter(x: TensorBase) -> Iterator[TensorBase]:
    if x.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")

    return (select(x, 0, i) for i in range(x.shape[0]))


__all__ = [
    "gather",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index_select",
    "index_add",
    "index_put",
    "take_along_dim",
    "masked_select",
]
