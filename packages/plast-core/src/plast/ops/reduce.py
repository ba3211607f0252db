"""Reductions."""

from .. import dtypes
from ..backends.cpu import kernels as cpu
from ..engine.graph import record
from . import movement
from .registry import register
from .shapes import norm_dim, numel


def _dims(x, dim, op):
    if dim is None:
        return tuple(range(x.ndim))
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted({norm_dim(d, x.ndim, op) for d in dim}))
    return dims


def _reduced_shape(shape, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _sum_bw(node, g):
    x = node.inputs[0]
    dims, keepdim = node.args
    if not keepdim:
        g = movement.reshape(g, _reduced_shape(x.shape, dims, True))
    return (movement.expand(g, x.shape),)


SUM = register("sum", cpu=cpu.sum_, backward=_sum_bw)


def sum(x, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    """Sum over `dim` (all dims when None). Integer and bool inputs sum in int64, like torch."""
    dims = _dims(x, dim, "sum")
    out_dtype = dtypes.as_dtype(dtype) if dtype is not None else (x.dtype if x.dtype.is_floating_point else dtypes.int64)
    if x.dtype is not out_dtype:
        x = movement.cast(x, out_dtype)
    shape = _reduced_shape(x.shape, dims, keepdim)
    return record(SUM, (x,), (dims, keepdim), [(shape, out_dtype)], x.device)[0]


def mean(x, dim=None, keepdim=False, *, dtype=None):
    if not (x.dtype.is_floating_point or dtype is not None):
        raise TypeError(f"mean(): needs a floating point input or dtype=, got {x.dtype}")
    dims = _dims(x, dim, "mean")
    n = numel([x.shape[d] for d in dims])
    from .elementwise import div

    return div(sum(x, dims, keepdim, dtype=dtype), float(n) if n else float("nan"))


def sum_to_shape(g, shape):
    """Sum a broadcast gradient back to `shape` (the engine does this for every op, DESIGN §2.6)."""
    if tuple(g.shape) == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
    out = sum(g, dims, keepdim=True) if dims else g
    return movement.reshape(out, tuple(shape))


__all__ = ["sum", "mean"]

TENSOR_METHODS = {"sum": sum, "mean": mean}
