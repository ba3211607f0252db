"""Elementwise ops: rows of the op table and their op-layer functions."""

from .. import dtypes
from ..backends.cpu import kernels as cpu
from ..engine.graph import TensorBase as Tensor  # every plast.Tensor is one
from ..engine.graph import record
from ..errors import DeviceMismatchError
from . import movement
from .registry import register
from .shapes import broadcast_shapes


def _as_tensor_pair(a, b, opname):
    """Bring (tensor|scalar, tensor|scalar) to two tensors of the promoted dtype on one device."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if a.device is not b.device and a.device != b.device:
            raise DeviceMismatchError(
                f"{opname}: inputs are on {a.device} and {b.device}; move one with .to() first"
            )
        dt = dtypes.result_type((a, b))
    elif isinstance(a, Tensor):
        from ..tensor import scalar_tensor

        dt = dtypes.result_type((a,), (b,))
        b = scalar_tensor(b, dt, a.device)
    elif isinstance(b, Tensor):
        from ..tensor import scalar_tensor

        dt = dtypes.result_type((b,), (a,))
        a = scalar_tensor(a, dt, b.device)
    else:
        raise TypeError(
            f"{opname}: expected at least one tensor, got {type(a).__name__} and {type(b).__name__}"
        )
    return movement.cast(a, dt), movement.cast(b, dt), dt


def _binary(name, a, b, *, result_dtype=None):
    a, b, dt = _as_tensor_pair(a, b, name)
    shape = broadcast_shapes(a.shape, b.shape, op=name)
    return record(OPS_BIN[name], (a, b), (), [(shape, result_dtype or dt)], a.device)[0]


# ---- backward rules: one gradient per input; the engine sums broadcast gradients back to input shapes ----


def _add_bw(node, g):
    return g, g


def _sub_bw(node, g):
    return g, neg(g)


def _mul_bw(node, g):
    a, b = node.inputs
    return mul(g, b), mul(g, a)


def _div_bw(node, g):
    a, b = node.inputs
    ga = div(g, b)
    return ga, neg(mul(ga, div(a, b)))


OPS_BIN = {
    "add": register("add", cpu=cpu.binary, backward=_add_bw, fusible=True, saves_inputs=False),
    "sub": register("sub", cpu=cpu.binary, backward=_sub_bw, fusible=True, saves_inputs=False),
    "mul": register("mul", cpu=cpu.binary, backward=_mul_bw, fusible=True),
    "div": register("div", cpu=cpu.binary, backward=_div_bw, fusible=True),
}


def add(a, b, *, alpha=1):
    """a + alpha * b, with broadcasting and type promotion.

    >>> plast.add(plast.tensor([1.0, 2.0]), 1).tolist()
    [2.0, 3.0]
    """
    if alpha != 1:
        b = mul(b, alpha)
    return _binary("add", a, b)


def sub(a, b, *, alpha=1):
    from .. import dtypes as D
    from ..tensor import Tensor

    if all(isinstance(x, Tensor) and x.dtype is D.bool_ for x in (a, b)):
        raise TypeError(
            "sub: subtracting two bool tensors is not supported (as in torch); use `^` / logical_xor, "
            "or cast with .int() first"
        )
    if alpha != 1:
        b = mul(b, alpha)
    return _binary("sub", a, b)


def mul(a, b):
    """a * b, with broadcasting and type promotion."""
    return _binary("mul", a, b)


def div(a, b):
    """True division: integer inputs give float32, as in torch."""
    from ..tensor import Tensor

    dt_a = a.dtype if isinstance(a, Tensor) else None
    dt_b = b.dtype if isinstance(b, Tensor) else None
    if all(d is None or not d.is_floating_point for d in (dt_a, dt_b)):
        a = movement.cast(a, dtypes.float32) if isinstance(a, Tensor) else float(a)
        b = movement.cast(b, dtypes.float32) if isinstance(b, Tensor) else float(b)
    return _binary("div", a, b)


def neg(a):
    return _binary("mul", a, -1)


def _rsub(a, b):
    return sub(b, a)


def _rdiv(a, b):
    return div(b, a)


__all__ = ["add", "sub", "mul", "div", "neg"]

TENSOR_METHODS = {
    "__add__": add,
    "__radd__": add,
    "__sub__": sub,
    "__rsub__": _rsub,
    "__mul__": mul,
    "__rmul__": mul,
    "__truediv__": div,
    "__rtruediv__": _rdiv,
    "__neg__": neg,
    "__pos__": lambda a: a,
    "add": add,
    "sub": sub,
    "mul": mul,
    "div": div,
    "neg": neg,
}
