# cython: boundscheck=True, wraparound=True, binding=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is op-layer code, not a kernel.
"""Elementwise ops add, sub, mul, div and neg: their rows of the op table, backward rules and op-layer functions,
compiled: every training step calls them dozens of times (the forward pass, the backward rules, the loss), so
their argument checks, type promotion and broadcasting read the tensors' C fields (graph/_graph.pxd) and end in
a C call to ``record``. Uncommon operands (a Python scalar meeting a tensor of another category, tensors of two
dtypes) take the general rules of plast._core.dtypes. (unary() at the end serves ops/unary.py's rows.)
"""

from libc.math cimport copysign

from plast._core._structs cimport TensorBase
from plast.graph._graph cimport record

from .._core import dtypes as _dtypes
from .._core.errors import BoolArithmeticError, DeviceMismatchError
from .._core._shapes import broadcast_shapes
from ..kernels.cpu import kernels as cpu
from ._movement import cast  # records the cast row (ops/movement.py)
from .factory import SCALAR_CACHE, scalar_tensor, wrap_int
from .registry import register

cdef object _bool = _dtypes.bool_


# ---- backward rules: one gradient per input; the engine sums broadcast gradients back to input shapes ----
# NOTE: a gradient for an input that does not require grad would be recorded and never used: rules skip them.


def _add_bw(node, g):
    return g, g


def _sub_bw(node, g):
    return g, neg(g) if node.inputs[1].requires_grad else None


def _mul_bw(node, g):
    a, b = node.inputs
    return mul(g, b) if a.requires_grad else None, mul(g, a) if b.requires_grad else None


def _div_bw(node, g):
    a, b = node.inputs
    ga = div(g, b)
    return ga if a.requires_grad else None, neg(mul(ga, div(a, b))) if b.requires_grad else None


# ---- the rows ----

cdef object ADD = register("add", cpu=cpu.binary, backward=_add_bw, chain="add", saves_inputs=False)
cdef object SUB = register("sub", cpu=cpu.binary, backward=_sub_bw, chain="sub", saves_inputs=False)
cdef object MUL = register("mul", cpu=cpu.binary, backward=_mul_bw, chain="mul")
cdef object DIV = register("div", cpu=cpu.binary, backward=_div_bw, chain="div")


cdef object _constant(object value, object dt, object device):
    """The shared 0-d constant for a Python scalar: ops/factory.py's cache, read here first (its key hashes in C:
    the device's type and index, not the device object)."""
    key = (type(value), value, copysign(1.0, value) if type(value) is float else 0.0, dt.code, device.type,
           device.index)
    t = SCALAR_CACHE.get(key)
    if t is None:
        if type(value) is int and not dt.is_floating_point and dt is not _bool:
            # arithmetic takes an integer scalar's low bits, as torch does (uint8 + 300 adds 44)
            t = SCALAR_CACHE[key] = scalar_tensor(wrap_int(value, dt), dt, device)
        else:
            t = scalar_tensor(value, dt, device)
    return t


cdef inline object _scalar_dtype(object tdt, object v):
    """torch's promotion of a tensor dtype with a Python scalar (a weak operand) for the common cases; None for
    the general rule."""
    cdef type tv = type(v)
    if tv is float:
        return tdt if tdt.is_floating_point else None
    if tv is int:
        return tdt if tdt is not _bool else None
    return None


cdef object binary(object op, object a, object b, str name):
    """a <op> b: two tensors, or a tensor and a Python scalar, promoted to one dtype and broadcast."""
    cdef TensorBase ta, tb
    cdef bint a_t = isinstance(a, TensorBase), b_t = isinstance(b, TensorBase)
    if a_t and b_t:
        ta, tb = <TensorBase>a, <TensorBase>b
        if ta.device is not tb.device and ta.device != tb.device:
            raise DeviceMismatchError(f"{name}: inputs are on {ta.device} and {tb.device}; move one with .to() first")
        dt = ta.dtype
        if tb.dtype is not dt:
            dt = _dtypes.result_type((a, b))
    elif a_t:
        ta = <TensorBase>a
        dt = _scalar_dtype(ta.dtype, b)
        if dt is None:
            dt = _dtypes.result_type((a,), (b,))
        tb = <TensorBase>_constant(b, dt, ta.device)
    elif b_t:
        tb = <TensorBase>b
        dt = _scalar_dtype(tb.dtype, a)
        if dt is None:
            dt = _dtypes.result_type((b,), (a,))
        ta = <TensorBase>_constant(a, dt, tb.device)
    else:
        raise TypeError(f"{name}: expected at least one tensor, got {type(a).__name__} and {type(b).__name__}")
    if ta.dtype is not dt:
        ta = <TensorBase>cast(ta, dt)
    if tb.dtype is not dt:
        tb = <TensorBase>cast(tb, dt)
    shape = ta._shape
    if shape != tb._shape:
        shape = broadcast_shapes(shape, tb._shape, op=name)
    return record(op, (ta, tb), (), [(shape, dt)], ta.device)[0]


def add(a, b, *, alpha=1):
    """a + alpha * b, with broadcasting and type promotion.

    >>> plast.add(plast.tensor([1.0, 2.0]), 1).tolist()
    [2.0, 3.0]
    """
    if alpha != 1:
        b = binary(MUL, b, alpha, "mul")
    return binary(ADD, a, b, "add")


cdef inline bint _is_bool(object x):
    return (<TensorBase>x).dtype is _bool if isinstance(x, TensorBase) else type(x) is bool


def sub(a, b, *, alpha=1):
    """a - alpha * b, with broadcasting and type promotion. A bool operand raises RuntimeError, as in torch
    (``1 - mask`` would silently be an int64 tensor, not the inverted mask it usually means)."""
    if _is_bool(a) or _is_bool(b):
        if _is_bool(a) and _is_bool(b):
            raise BoolArithmeticError(
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                "`logical_xor()` operator instead."
            )
        raise BoolArithmeticError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
            "mask, use the `~` or `logical_not()` operator instead."
        )
    if alpha != 1:
        b = binary(MUL, b, alpha, "mul")
    return binary(SUB, a, b, "sub")


def mul(a, b):
    """a * b, with broadcasting and type promotion."""
    return binary(MUL, a, b, "mul")


def div(a, b):
    """True division: integer and bool inputs give the default dtype (float32 unless set), as in torch."""
    cdef bint a_t = isinstance(a, TensorBase), b_t = isinstance(b, TensorBase)
    if (not a_t or not (<TensorBase>a).dtype.is_floating_point) and (
        not b_t or not (<TensorBase>b).dtype.is_floating_point
    ):
        dt = _dtypes.default_float
        a = cast(<TensorBase>a, dt) if a_t else float(a)
        b = cast(<TensorBase>b, dt) if b_t else float(b)
    return binary(DIV, a, b, "div")


def neg(a):
    """-a. A bool tensor raises RuntimeError, as in torch (it used to give an int64 tensor of -1 and 0)."""
    if isinstance(a, TensorBase) and (<TensorBase>a).dtype is _bool:
        raise BoolArithmeticError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
            "use the `~` or `logical_not()` operator instead."
        )
    return binary(MUL, a, -1, "mul")


def rsub(a, b):
    """b - a (Tensor.__rsub__)."""
    return sub(b, a)


def rdiv(a, b):
    """b / a (Tensor.__rtruediv__)."""
    return div(b, a)


cdef tuple _INT_OK = ("abs", "sign", "relu")


def unary(op, x):
    """`op` (a unary row of the op table) applied to x; integer and bool inputs are computed in the default
    dtype (float32 unless set) except for the ops that keep them (abs, sign, relu)."""
    cdef TensorBase t = <TensorBase?>x
    if not t.dtype.is_floating_point and op.name not in _INT_OK:
        t = <TensorBase>cast(t, _dtypes.default_float)
    return record(op, (t,), (), [(t._shape, t.dtype)], t.device)[0]


__all__ = ["add", "sub", "mul", "div", "neg"]
