"""matmul: 1-D, 2-D and batched with broadcasting, like torch.matmul (but integer x float promotes)."""

from .. import dtypes
from ..backends.cpu import kernels as cpu
from ..engine.graph import record
from ..errors import DeviceMismatchError, ShapeError
from . import movement
from .registry import register
from .shapes import broadcast_shapes


def _matmul_bw(node, g):
    a, b = node.inputs
    return matmul(g, movement.transpose(b, -1, -2)), matmul(movement.transpose(a, -1, -2), g)


MATMUL = register("matmul", cpu=cpu.matmul_nd, backward=_matmul_bw)


def matmul(a, b):
    """Matrix product with torch's rules for 1-D and batched operands.

    >>> plast.matmul(plast.ones(2, 3), plast.ones(3)).tolist()
    [3.0, 3.0]
    """
    if a.device != b.device:
        raise DeviceMismatchError(f"matmul: inputs are on {a.device} and {b.device}")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            f"matmul: both arguments need at least 1 dimension, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    dt = dtypes.promote(a.dtype, b.dtype)
    a, b = movement.cast(a, dt), movement.cast(b, dt)
    # 1-D operands become matrices and the added dim is removed afterwards, as in torch
    squeeze_a = a.ndim == 1
    squeeze_b = b.ndim == 1
    if squeeze_a:
        a = movement.reshape(a, (1, a.shape[0]))
    if squeeze_b:
        b = movement.reshape(b, (b.shape[0], 1))
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied "
            f"({a.shape[-1]} != {b.shape[-2]})"
        )
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], op="matmul")
    shape = batch + (a.shape[-2], b.shape[-1])
    out = record(MATMUL, (a, b), (), [(shape, dt)], a.device)[0]
    if squeeze_a and squeeze_b:
        return movement.reshape(out, batch)
    if squeeze_a:
        return movement.reshape(out, batch + (b.shape[-1],))
    if squeeze_b:
        return movement.reshape(out, batch + (a.shape[-2],))
    return out


__all__ = ["matmul"]

TENSOR_METHODS = {"matmul": matmul, "__matmul__": matmul, "__rmatmul__": lambda a, b: matmul(b, a)}
