"""How an in-place write to a view reaches the tensor it views, one rule per view row (torch's CopySlices).

plast computes an in-place op out of place and rebinds the tensor to the result when the tensor is part of a
differentiable graph (graph/inplace.py). For a view that is not enough: ``y[0].mul_(3)`` must change ``y``, and
every other view of ``y`` made before the write (``y[:, 1]``, ``y.view(-1)``) must show the change, as they
would in torch, where they share memory. The engine walks the view chain from the written view up to its base
and asks two things of each view node, answered here in plast ops (so the new values are differentiable, and
jit traces them like any other op):

* ``unview(node, old, new, mask)``: `old` (the node's input, before the write) with the part the node shows
  replaced by `new` (where `mask` marks what the write changed);
* ``redo(node, x, shape)``: the node's view taken again, of x (the input's value after the write).
"""

from __future__ import annotations

from .._core import dtypes
from . import _movement, movement, reduce, shape
from .creation import ones
from .pointwise import where


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def unview(node, old, new, mask):
    """`old` with the window that view node `node` shows replaced by `new` (new has the node's output shape).

    `mask` (bool, new's shape) marks the elements of `new` the write changed, None when all of them: a view
    further down the chain may show only part of this one. Returns (the new value, its mask)."""
    op = node.op
    if op is shape.STRIDED_VIEW:  # slices, select, narrow, diagonal, unsqueeze, ...
        dims_map, base = node.args[0], node.args[1]
        if mask is None:
            mask = ones(new.shape, dtype=dtypes.bool_, device=new.device)
        mask = shape.strided_scatter(mask, old.shape, dims_map, base, fill=False)
        return where(mask, shape.strided_scatter(new, old.shape, dims_map, base), old), mask
    if op is _movement.PERMUTE:
        inv = _inverse(node.args[0])
        return movement.permute(new, inv), None if mask is None else movement.permute(mask, inv)
    if op is _movement.VIEW:  # the same elements in row-major order, all of them
        return movement.reshape(new, old.shape), None if mask is None else movement.reshape(mask, old.shape)
    if op is _movement.EXPAND:
        if mask is None:  # every copy written: the written view itself overlaps (checked before), never here
            raise RuntimeError("unsupported operation: an in-place write to every copy of an expanded view")
        # The written view shows each element of `old` at most once (it has no stride-0 dim), so along the
        # expanded dims at most one copy is marked: summing the marked copies picks it.
        lead = len(new.shape) - len(old.shape)
        dims = tuple(range(lead)) + tuple(
            lead + i for i, (a, b) in enumerate(zip(old.shape, new.shape[lead:])) if a != b
        )
        picked = reduce.sum(where(mask, new, 0), dims, keepdim=True)
        hit = reduce.any(mask, dims, keepdim=True) if dims else mask
        picked = movement.reshape(picked, old.shape)
        hit = movement.reshape(hit, old.shape)
        return where(hit, movement.cast(picked, old.dtype), old), hit
    raise NotImplementedError(f"an in-place write through a {op.name!r} view does not reach its base yet")


def redo(node, x, out_shape):
    """View node `node` taken again, of x (which has the shape of the node's input)."""
    op = node.op
    if op is shape.STRIDED_VIEW:
        return shape.strided_view(x, out_shape, node.args[0], node.args[1])
    if op is _movement.PERMUTE:
        return movement.permute(x, node.args[0])
    if op is _movement.VIEW:
        # a reshape: a view of x where its strides allow one (they do when x is laid out as the old input was)
        return movement.reshape(x, out_shape)
    if op is _movement.EXPAND:
        return movement.expand(x, out_shape)
    raise NotImplementedError(
        f"a {op.name!r} view can't be taken again after an in-place write to its base yet"
    )
