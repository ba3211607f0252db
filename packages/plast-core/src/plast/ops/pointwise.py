"""The rest of the elementwise ops: pow and integer-style division, maximum/minimum, clamp, where, masked_fill,
comparisons, logical and bitwise ops, rounding, and a few unary functions and activations.

Rules, as in torch: operands broadcast and promote (``plast._core.dtypes``; Python scalars are weak); comparisons,
logical ops and ``isnan``-style tests return bool and carry no gradient; ``floor_divide`` has no gradient;
rounding ops have a zero gradient. Composites (``softplus``, ``elu``, ``lerp``, ...) are written in primitives.
"""

from __future__ import annotations

import math

import numpy as np

from .._core import dtypes
from .._core._structs import TensorBase
from .._core.errors import DeviceMismatchError, DTypeError, ShapeError
from .._core.hints import Number, TensorOrNumber
from .._core.shapes import broadcast_shapes
from ..graph._graph import record
from ..kernels.cpu import kernels_pointwise as cpu
from . import movement
from .creation import tensor, zeros_like
from .device import values_of
from .elementwise import add, div, mul, neg, sub
from .factory import scalar_tensor
from .registry import register
from .unary import _out, exp, log, log1p

_SCALARS = (bool, int, float)


def is_operand(v):
    return isinstance(v, (TensorBase, *_SCALARS, np.generic))


def _operands(vals, opname, device=None):
    """Tensors and Python scalars -> tensors of one promoted dtype on one device: (tensors, dtype, device)."""
    vals = [v.item() if isinstance(v, np.generic) else v for v in vals]
    tensors = [v for v in vals if isinstance(v, TensorBase)]
    for v in vals:
        if not isinstance(v, (TensorBase, *_SCALARS)):
            raise TypeError(f"{opname}: expected tensors or Python numbers, got {type(v).__name__}")
    for t in tensors:
        if device is None:
            device = t.device
        elif t.device != device:
            raise DeviceMismatchError(
                f"{opname}: inputs are on {device} and {t.device}; move one with .to() first"
            )
    if device is None:
        raise TypeError(f"{opname}: expected at least one tensor")
    dt = dtypes.result_type(tensors, [v for v in vals if not isinstance(v, TensorBase)])
    out = [movement.cast(v, dt) if isinstance(v, TensorBase) else scalar_tensor(v, dt, device) for v in vals]
    return out, dt, device


def _elementwise(op, vals, result_dtype=None, args=()):
    ts, dt, dev = _operands(vals, op.name)
    shape = broadcast_shapes(*(t.shape for t in ts), op=op.name)
    return record(op, tuple(ts), args, [(shape, result_dtype or dt)], dev)[0]


def _zeros_like(g):
    return zeros_like(g)


def _check_tensor(x, opname):
    if not isinstance(x, TensorBase):
        raise TypeError(f"{opname}: expected a tensor, got {type(x).__name__}")
    return x


def _no_bool(dt, opname):
    if dt is dtypes.bool_:
        raise DTypeError(f"{opname} is not defined for bool tensors; convert with .long() or .float() first")


# ---- pow ----


def _pow_bw(node, g):
    a, b = node.inputs
    ga = gb = None
    if a.requires_grad:
        if node.args:  # a Python exponent
            e = node.args[0]
            if e == 0:
                ga = _zeros_like(g)
            elif e == 1:
                ga = g
            elif e == 2:
                ga = mul(g, mul(a, 2.0))
            else:
                ga = mul(g, mul(pow(a, e - 1), e))
        else:
            ga = where(eq(b, 0), 0.0, mul(g, mul(b, pow(a, sub(b, 1)))))
    if b.requires_grad:
        gb = where(logical_and(eq(a, 0), ge(b, 0)), 0.0, mul(g, mul(_out(node), log(a))))
    return ga, gb


# the exponent's gradient reads the output
POW = register("pow", cpu=cpu.pow_, backward=_pow_bw, chain="pow", reads_output=True)


def pow(input: TensorOrNumber, exponent: TensorOrNumber) -> TensorBase:  # noqa: A001
    """input ** exponent for tensors and Python numbers (either side), with broadcasting and promotion.

    Integer tensors raised to integer powers stay integer; a negative Python int exponent of an integer tensor
    raises, as in torch. The exponent's gradient is ``out * log(input)``.

    >>> plast.pow(plast.tensor([1.0, 2.0, 3.0]), 2).tolist()
    [1.0, 4.0, 9.0]
    >>> (2 ** plast.tensor([0, 1, 3])).tolist()
    [1, 2, 8]
    """
    exponent = exponent.item() if isinstance(exponent, np.generic) else exponent
    (a, b), dt, dev = _operands((input, exponent), "pow")
    _no_bool(dt, "pow")
    args = ()
    if isinstance(input, TensorBase) and isinstance(exponent, _SCALARS):
        if not dt.is_floating_point and exponent < 0:
            raise RuntimeError(
                f"pow: integers to negative integer powers are not allowed ({input.dtype} tensor ** {exponent}); "
                "use a float exponent or convert the tensor with .float()"
            )
        args = (float(exponent) if dt.is_floating_point else int(exponent),)
    shape = broadcast_shapes(a.shape, b.shape, op="pow")
    return record(POW, (a, b), args, [(shape, dt)], dev)[0]


# ---- floor_divide, remainder, fmod ----


def _remainder_bw(node, g):
    a, b = node.inputs
    return g, (neg(mul(g, floor_divide(a, b))) if b.requires_grad else None)


def _fmod_bw(node, g):
    a, b = node.inputs
    return g, (neg(mul(g, trunc(div(a, b)))) if b.requires_grad else None)


FLOOR_DIVIDE = register("floor_divide", cpu=cpu.division, saves_inputs=False, chain="floor_divide")
REMAINDER = register("remainder", cpu=cpu.division, backward=_remainder_bw, chain="remainder")
FMOD = register("fmod", cpu=cpu.division, backward=_fmod_bw, chain="fmod")


def _division(op, a, b):
    (a, b), dt, dev = _operands((a, b), op.name)
    _no_bool(dt, op.name)
    shape = broadcast_shapes(a.shape, b.shape, op=op.name)
    return record(op, (a, b), (), [(shape, dt)], dev)[0]


def floor_divide(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """input // other rounded toward minus infinity (Python's and torch's rule). No gradient. Integer division
    by zero raises ZeroDivisionError when the value is computed; float division by zero gives +-inf or nan.

    >>> plast.floor_divide(plast.tensor([7, -7]), 2).tolist()
    [3, -4]
    """
    return _division(FLOOR_DIVIDE, input, other)


def remainder(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """input - floor(input / other) * other: the result has the sign of `other` (Python's ``%``).

    >>> plast.remainder(plast.tensor([5, -5]), 3).tolist()
    [2, 1]
    """
    return _division(REMAINDER, input, other)


def fmod(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """C's fmod: the remainder of division rounded toward zero; the result has the sign of `input`.

    >>> plast.fmod(plast.tensor([5, -5]), 3).tolist()
    [2, -2]
    """
    return _division(FMOD, input, other)


# ---- maximum, minimum ----


def _minmax_bw(node, g):
    a, b = node.inputs
    ties = eq(a, b)
    half = mul(g, 0.5)
    # NOTE: as torch does: ties split the gradient; where a NaN meets a number both sides get all of it
    loser_a = lt(a, b) if node.op.name == "maximum" else gt(a, b)
    loser_b = gt(a, b) if node.op.name == "maximum" else lt(a, b)
    ga = where(ties, half, where(loser_a, 0.0, g)) if a.requires_grad else None
    gb = where(ties, half, where(loser_b, 0.0, g)) if b.requires_grad else None
    return ga, gb


MAXIMUM = register("maximum", cpu=cpu.minmax, backward=_minmax_bw, chain="maximum")
MINIMUM = register("minimum", cpu=cpu.minmax, backward=_minmax_bw, chain="minimum")


def maximum(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """Elementwise maximum, NaN-propagating, with broadcasting and promotion. On ties the gradient is split
    evenly between the inputs, as in torch.

    >>> plast.maximum(plast.tensor([1.0, 5.0]), plast.tensor([3.0, 2.0])).tolist()
    [3.0, 5.0]
    """
    return _elementwise(MAXIMUM, (input, other))


def minimum(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """Elementwise minimum, NaN-propagating (see maximum).

    >>> plast.minimum(plast.tensor([1.0, 5.0]), 2.0).tolist()
    [1.0, 2.0]
    """
    return _elementwise(MINIMUM, (input, other))


# ---- clamp ----


def _clamp_bw(node, g):
    has_min, has_max = node.args
    x = node.inputs[0]
    lo = node.inputs[1] if has_min else None
    hi = node.inputs[1 + has_min] if has_max else None
    if has_min and has_max:
        gx = where(logical_and(ge(x, lo), le(x, hi)), g, 0.0)
        glo = where(logical_and(lt(x, lo), lt(lo, hi)), g, 0.0) if lo.requires_grad else None
        ghi = where(logical_or(gt(x, hi), lt(hi, lo)), g, 0.0) if hi.requires_grad else None
        return gx, glo, ghi
    if has_min:
        return where(ge(x, lo), g, 0.0), (where(lt(x, lo), g, 0.0) if lo.requires_grad else None)
    return where(le(x, hi), g, 0.0), (where(gt(x, hi), g, 0.0) if hi.requires_grad else None)


CLAMP = register("clamp", cpu=cpu.clamp, backward=_clamp_bw)


def clamp(
    input: TensorBase,
    min: TensorOrNumber | None = None,
    max: TensorOrNumber | None = None,  # noqa: A002
) -> TensorBase:
    """Limit input to [min, max]; each bound is a number, a tensor (broadcast) or None. NaN propagates.
    When min > max every element becomes max, as in torch. The gradient flows to input inside [min, max]
    (bounds included), to a bound where it is the result.

    >>> plast.clamp(plast.tensor([-2.0, 0.5, 3.0]), -1, 1).tolist()
    [-1.0, 0.5, 1.0]
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given (not None)")
    vals = [input] + [v for v in (min, max) if v is not None]
    ts, dt, dev = _operands(vals, "clamp")
    shape = broadcast_shapes(*(t.shape for t in ts), op="clamp")
    return record(CLAMP, tuple(ts), (min is not None, max is not None), [(shape, dt)], dev)[0]


def clamp_min(input: TensorBase, min: TensorOrNumber) -> TensorBase:  # noqa: A002
    """clamp(input, min=min).

    >>> plast.clamp_min(plast.tensor([-1.0, 2.0]), 0.0).tolist()
    [0.0, 2.0]
    """
    return clamp(input, min=min)


def clamp_max(input: TensorBase, max: TensorOrNumber) -> TensorBase:  # noqa: A002
    """clamp(input, max=max).

    >>> plast.clamp_max(plast.tensor([-1.0, 2.0]), 0.0).tolist()
    [-1.0, 0.0]
    """
    return clamp(input, max=max)


clip = clamp


# ---- where, masked_fill ----


def _where_bw(node, g):
    c, a, b = node.inputs
    ga = where(c, g, 0.0) if a.requires_grad else None
    gb = where(c, 0.0, g) if b.requires_grad else None
    return None, ga, gb


WHERE = register("where", cpu=cpu.where, backward=_where_bw)


def _check_bool(t, opname, what):
    if not isinstance(t, TensorBase):
        raise TypeError(f"{opname}: {what} must be a bool tensor, got {type(t).__name__}")
    if t.dtype is not dtypes.bool_:
        raise DTypeError(
            f"{opname}: {what} must be a bool tensor, got {t.dtype}; compare first (e.g. x > 0) or call .bool()"
        )


def nonzero(x: TensorBase, *, as_tuple: bool = False) -> TensorBase | tuple[TensorBase, ...]:
    """Indices of the non-zero elements: an (N, ndim) int64 tensor, or a tuple of ndim 1-D tensors.

    Reads x's values (the result's shape depends on them).

    >>> plast.tensor([0, 3, 0, 4]).nonzero().tolist()
    [[1], [3]]
    """
    a = values_of(x)
    dev = x.device
    if a.ndim == 0:
        a = a.reshape(1)
        nz = np.nonzero(a)
        if as_tuple:
            return (tensor(nz[0].astype(np.int64), device=dev),)
        return tensor(np.zeros((len(nz[0]), 0), np.int64), device=dev)
    nz = np.nonzero(a)
    if as_tuple:
        return tuple(tensor(i.astype(np.int64), device=dev) for i in nz)
    return tensor(np.stack(nz, axis=1).astype(np.int64), device=dev)


def where(
    condition: TensorBase,
    input: TensorOrNumber | None = None,  # noqa: A002
    other: TensorOrNumber | None = None,
) -> TensorBase | tuple[TensorBase, ...]:
    """input where condition is True, else other; tensors or numbers, broadcast together and promoted. With only
    `condition`, the indices of its nonzero elements as a tuple of 1-D int64 tensors (``nonzero(as_tuple=True)``).

    >>> c = plast.tensor([True, False, True])
    >>> plast.where(c, plast.tensor([1.0, 2.0, 3.0]), 0.0).tolist()
    [1.0, 0.0, 3.0]
    """
    if input is None and other is None:
        # torch.where(condition) is nonzero(condition, as_tuple=True): one int64 index tensor per dim

        if not isinstance(condition, TensorBase):
            raise TypeError(f"where(condition): condition must be a tensor, got {type(condition).__name__}")
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where: pass both input and other (or neither)")
    _check_bool(condition, "where", "condition")
    (a, b), dt, dev = _operands((input, other), "where", device=condition.device)
    if condition.device != dev:
        raise DeviceMismatchError(f"where: condition is on {condition.device}, the values on {dev}")
    shape = broadcast_shapes(condition.shape, a.shape, b.shape, op="where")
    return record(WHERE, (condition, a, b), (), [(shape, dt)], dev)[0]


def _tensor_where(self: TensorBase, condition: TensorBase, other: TensorOrNumber) -> TensorBase:
    return where(condition, self, other)


def masked_fill(input: TensorBase, mask: TensorBase, value: TensorOrNumber) -> TensorBase:
    """input with `value` (a number or a 0-d tensor, cast to input's dtype) where `mask` is True; mask is a
    bool tensor broadcastable with input.

    >>> x = plast.tensor([1.0, 2.0, 3.0])
    >>> x.masked_fill(x > 1.5, 0.0).tolist()
    [1.0, 0.0, 0.0]
    """
    if not isinstance(input, TensorBase):
        raise TypeError(f"masked_fill: expected a tensor, got {type(input).__name__}")
    _check_bool(mask, "masked_fill", "mask")
    dt = input.dtype
    if isinstance(value, TensorBase):
        if value.ndim != 0:
            raise ShapeError(
                f"masked_fill: value must be a number or a 0-dimensional tensor, got shape {tuple(value.shape)}"
            )
        value = movement.cast(value, dt)
    else:
        value = value.item() if isinstance(value, np.generic) else value
        if not isinstance(value, _SCALARS):
            raise TypeError(
                f"masked_fill: value must be a number or a 0-d tensor, got {type(value).__name__}"
            )
        try:
            value = (
                float(value) if dt.is_floating_point else bool(value) if dt is dtypes.bool_ else int(value)
            )
        except (OverflowError, ValueError) as e:
            raise ValueError(f"masked_fill: value {value!r} can't be stored in a {dt} tensor") from e
        value = scalar_tensor(value, dt, input.device)
    broadcast_shapes(input.shape, mask.shape, op="masked_fill")
    return where(mask, value, input)


# ---- comparisons, logical and bitwise ops (bool results, no gradient) ----


def _no_grad_op(name, kernel):
    return register(name, cpu=kernel, saves_inputs=False)


CMP = {n: _no_grad_op(n, cpu.binary) for n in ("eq", "ne", "lt", "le", "gt", "ge")}


def eq(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """input == other elementwise (bool).

    >>> plast.eq(plast.tensor([1, 2]), 2).tolist()
    [False, True]
    """
    return _elementwise(CMP["eq"], (input, other), dtypes.bool_)


def ne(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """input != other elementwise (bool)."""
    return _elementwise(CMP["ne"], (input, other), dtypes.bool_)


def lt(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """input < other elementwise (bool)."""
    return _elementwise(CMP["lt"], (input, other), dtypes.bool_)


def le(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """input <= other elementwise (bool)."""
    return _elementwise(CMP["le"], (input, other), dtypes.bool_)


def gt(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """input > other elementwise (bool).

    >>> (plast.tensor([1.0, 3.0]) > 2).tolist()
    [False, True]
    """
    return _elementwise(CMP["gt"], (input, other), dtypes.bool_)


def ge(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """input >= other elementwise (bool)."""
    return _elementwise(CMP["ge"], (input, other), dtypes.bool_)


LOGICAL = {n: _no_grad_op(n, cpu.binary) for n in ("logical_and", "logical_or", "logical_xor")}
LOGICAL_NOT = _no_grad_op("logical_not", cpu.unary)


def _as_bool(v, opname):
    if isinstance(v, TensorBase):
        return movement.cast(v, dtypes.bool_)
    if isinstance(v, np.generic):
        v = v.item()
    if not isinstance(v, _SCALARS):
        raise TypeError(f"{opname}: expected tensors or Python numbers, got {type(v).__name__}")
    return bool(v)


def _logical(name, a, b):
    return _elementwise(LOGICAL[name], (_as_bool(a, name), _as_bool(b, name)), dtypes.bool_)


def logical_and(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """True where both are nonzero (any dtypes; bool result).

    >>> plast.logical_and(plast.tensor([1.0, 0.0, 2.0]), plast.tensor([True, True, False])).tolist()
    [True, False, False]
    """
    return _logical("logical_and", input, other)


def logical_or(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """True where either is nonzero (bool result)."""
    return _logical("logical_or", input, other)


def logical_xor(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """True where exactly one is nonzero (bool result)."""
    return _logical("logical_xor", input, other)


def logical_not(input: TensorBase) -> TensorBase:
    """True where input is zero (bool result).

    >>> plast.logical_not(plast.tensor([0.0, 2.0])).tolist()
    [True, False]
    """
    x = _as_bool(input, "logical_not")
    return record(LOGICAL_NOT, (x,), (), [(x.shape, dtypes.bool_)], x.device)[0]


BITWISE = {n: _no_grad_op(n, cpu.binary) for n in ("bitwise_and", "bitwise_or", "bitwise_xor")}
BITWISE_NOT = _no_grad_op("bitwise_not", cpu.unary)


def _bitwise(name, a, b):
    ts, dt, dev = _operands((a, b), name)
    if dt.is_floating_point:
        raise DTypeError(f"{name} is only defined for integer and bool tensors, got {dt}")
    shape = broadcast_shapes(*(t.shape for t in ts), op=name)
    return record(BITWISE[name], tuple(ts), (), [(shape, dt)], dev)[0]


def bitwise_and(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """Bitwise AND of integer or bool tensors (``&``; logical AND for bool).

    >>> (plast.tensor([6, 3]) & 5).tolist()
    [4, 1]
    """
    return _bitwise("bitwise_and", input, other)


def bitwise_or(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """Bitwise OR of integer or bool tensors (``|``)."""
    return _bitwise("bitwise_or", input, other)


def bitwise_xor(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """Bitwise XOR of integer or bool tensors (``^``)."""
    return _bitwise("bitwise_xor", input, other)


def bitwise_not(input: TensorBase) -> TensorBase:
    """Bitwise NOT of an integer or bool tensor (``~``; logical NOT for bool).

    >>> (~plast.tensor([True, False])).tolist()
    [False, True]
    """
    if _check_tensor(input, "bitwise_not").dtype.is_floating_point:
        raise DTypeError(f"bitwise_not (~) is only defined for integer and bool tensors, got {input.dtype}")
    return record(BITWISE_NOT, (input,), (), [(input.shape, input.dtype)], input.device)[0]


# integer-only ops with no gradient (torch defines none): numpy kernels on the CPU, as the bitwise ops
INTEGER = {n: _no_grad_op(n, cpu.gcd_lcm) for n in ("gcd", "lcm")}
INTEGER.update({n: _no_grad_op(n, cpu.binary) for n in ("bitwise_left_shift", "bitwise_right_shift")})


def _integer(name, a, b):
    ts, dt, dev = _operands((a, b), name)
    if dt.is_floating_point or dt is dtypes.bool_:
        raise DTypeError(f"{name} is only defined for integer tensors, got {dt}")
    shape = broadcast_shapes(*(t.shape for t in ts), op=name)
    return record(INTEGER[name], tuple(ts), (), [(shape, dt)], dev)[0]


def gcd(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """Greatest common divisor of integer tensors, non-negative (gcd(0, 0) = 0), broadcast.

    >>> plast.gcd(plast.tensor([4, -6, 0]), plast.tensor([6, 9, 5])).tolist()
    [2, 3, 5]
    """
    return _integer("gcd", input, other)


def lcm(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """Least common multiple of integer tensors, non-negative (0 where either is 0), broadcast."""
    return _integer("lcm", input, other)


def bitwise_left_shift(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """input << other for integer tensors; a count below 0 or of the width or more gives 0, as torch.

    >>> (plast.tensor([1, 3]) << 2).tolist()
    [4, 12]
    """
    return _integer("bitwise_left_shift", input, other)


def bitwise_right_shift(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """input >> other for integer tensors (arithmetic: the sign fills in); a count below 0 or of the width or
    more gives the sign (0 or -1), as torch."""
    return _integer("bitwise_right_shift", input, other)


def _rlshift(self: TensorBase, other: TensorOrNumber) -> TensorBase:
    return bitwise_left_shift(other, self)


def _rrshift(self: TensorBase, other: TensorOrNumber) -> TensorBase:
    return bitwise_right_shift(other, self)


TESTS = {n: _no_grad_op(n, cpu.unary) for n in ("isfinite", "isnan", "isinf")}


def _test(name, x):
    _check_tensor(x, name)
    return record(TESTS[name], (x,), (), [(x.shape, dtypes.bool_)], x.device)[0]


def isfinite(input: TensorBase) -> TensorBase:
    """True where input is neither inf nor nan.

    >>> plast.isfinite(plast.tensor([1.0, float("inf"), float("nan")])).tolist()
    [True, False, False]
    """
    return _test("isfinite", input)


def isnan(input: TensorBase) -> TensorBase:
    """True where input is nan."""
    return _test("isnan", input)


def isinf(input: TensorBase) -> TensorBase:
    """True where input is +inf or -inf."""
    return _test("isinf", input)


# ---- rounding (zero gradient) ----


def _zero_bw(node, g):
    return (_zeros_like(g),)


# round to whole numbers fuses; round_decimals (round with decimals != 0, args (decimals,)) has no chain opcode
ROUNDING = {
    n: register(n, cpu=cpu.unary, backward=_zero_bw, saves_inputs=False, chain=n)
    for n in ("floor", "ceil", "trunc", "round")
}
ROUNDING["round_decimals"] = register("round_decimals", cpu=cpu.unary, backward=_zero_bw, saves_inputs=False)


def _rounding(name, x, args=()):
    _check_tensor(x, name)
    _no_bool(x.dtype, name)
    if not x.dtype.is_floating_point:
        return movement.clone(x)  # integers are already whole
    return record(ROUNDING[name], (x,), args, [(x.shape, x.dtype)], x.device)[0]


def floor(input: TensorBase) -> TensorBase:
    """Round down to a whole number (the gradient is zero).

    >>> plast.floor(plast.tensor([1.5, -1.5])).tolist()
    [1.0, -2.0]
    """
    return _rounding("floor", input)


def ceil(input: TensorBase) -> TensorBase:
    """Round up to a whole number (the gradient is zero)."""
    return _rounding("ceil", input)


def trunc(input: TensorBase) -> TensorBase:
    """Round toward zero (the gradient is zero)."""
    return _rounding("trunc", input)


def round(input: TensorBase, decimals: int = 0) -> TensorBase:  # noqa: A001
    """Round half to even, to `decimals` decimal places (negative: to tens, hundreds, ...), as torch.round.

    >>> plast.round(plast.tensor([0.5, 1.5, 2.567])).tolist()
    [0.0, 2.0, 3.0]
    """
    if not isinstance(decimals, int) or isinstance(decimals, bool):
        raise TypeError(f"round: decimals must be an int, got {type(decimals).__name__}")
    return _rounding("round_decimals", input, (decimals,)) if decimals else _rounding("round", input)


# ---- unary float functions ----

_LN2, _LN10 = math.log(2.0), math.log(10.0)
EXP2 = register(
    "exp2",
    cpu=cpu.unary,
    chain="exp2",
    reads_output=True,
    backward=lambda n, g: (mul(g, mul(_out(n), _LN2)),),
)
LOG2 = register("log2", cpu=cpu.unary, chain="log2", backward=lambda n, g: (div(g, mul(n.inputs[0], _LN2)),))
LOG10 = register(
    "log10", cpu=cpu.unary, chain="log10", backward=lambda n, g: (div(g, mul(n.inputs[0], _LN10)),)
)
EXPM1 = register(
    "expm1",
    cpu=cpu.unary,
    chain="expm1",
    reads_output=True,
    backward=lambda n, g: (mul(g, add(_out(n), 1.0)),),
)


def _float_unary(op, x):
    _check_tensor(x, op.name)
    if not x.dtype.is_floating_point:
        x = movement.cast(x, dtypes.default_float)
    return record(op, (x,), (), [(x.shape, x.dtype)], x.device)[0]


def exp2(input: TensorBase) -> TensorBase:
    """2 ** input (integers give float32).

    >>> plast.exp2(plast.tensor([0.0, 3.0])).tolist()
    [1.0, 8.0]
    """
    return _float_unary(EXP2, input)


def log2(input: TensorBase) -> TensorBase:
    """Base-2 logarithm."""
    return _float_unary(LOG2, input)


def log10(input: TensorBase) -> TensorBase:
    """Base-10 logarithm.

    >>> plast.log10(plast.tensor([100.0])).tolist()
    [2.0]
    """
    return _float_unary(LOG10, input)


def expm1(input: TensorBase) -> TensorBase:
    """exp(input) - 1, accurate near zero."""
    return _float_unary(EXPM1, input)


def reciprocal(input: TensorBase) -> TensorBase:
    """1 / input (integers give float32).

    >>> plast.reciprocal(plast.tensor([2.0, 4.0])).tolist()
    [0.5, 0.25]
    """
    return div(1.0, _check_tensor(input, "reciprocal"))


def square(input: TensorBase) -> TensorBase:
    """input * input (bool gives int64, as in torch).

    >>> plast.square(plast.tensor([-3, 2])).tolist()
    [9, 4]
    """
    if _check_tensor(input, "square").dtype is dtypes.bool_:
        input = movement.cast(input, dtypes.int64)
    return mul(input, input)


# ---- activations and fused arithmetic, as composites ----


def _floating(x, opname):
    _check_tensor(x, opname)
    return x if x.dtype.is_floating_point else movement.cast(x, dtypes.default_float)


def _no_inplace(inplace, opname):
    if inplace:
        raise NotImplementedError(f"{opname}(inplace=True) is not implemented; use the out-of-place form")


def softplus(input: TensorBase, beta: float = 1.0, threshold: float = 20.0) -> TensorBase:
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (torch.nn.functional.softplus).

    >>> plast.softplus(plast.tensor([30.0])).tolist()
    [30.0]
    """
    x = _floating(input, "softplus")
    bx = mul(x, beta) if beta != 1 else x
    # NOTE: exp sees min(bx, threshold), so the branch where() discards can't overflow into inf * 0 = nan grads.
    # The min is a where(), not clamp_max: clamp's gradient is 0 at nan, which turned a nan input's gradient
    # into 0 (torch's is nan)
    soft = log1p(exp(where(gt(bx, threshold), threshold, bx)))
    if beta != 1:
        soft = div(soft, beta)
    return where(gt(bx, threshold), x, soft)


def leaky_relu(input: TensorBase, negative_slope: float = 0.01, inplace: bool = False) -> TensorBase:
    """x where x > 0, else negative_slope * x.

    >>> plast.leaky_relu(plast.tensor([-2.0, 3.0]), 0.25).tolist()
    [-0.5, 3.0]
    """
    _no_inplace(inplace, "leaky_relu")
    x = _floating(input, "leaky_relu")
    return where(gt(x, 0), x, mul(x, negative_slope))


def elu(input: TensorBase, alpha: float = 1.0, inplace: bool = False) -> TensorBase:
    """x where x > 0, else alpha * (exp(x) - 1).

    >>> plast.elu(plast.tensor([0.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    _no_inplace(inplace, "elu")
    x = _floating(input, "elu")
    # NOTE: expm1 sees min(x, 0), so large positive x can't overflow in the discarded branch
    return where(gt(x, 0), x, mul(expm1(clamp_max(x, 0.0)), alpha))


def hardtanh(
    input: TensorBase, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> TensorBase:
    """clamp(x, min_val, max_val), with torch's gradient: zero at the bounds themselves.

    >>> plast.hardtanh(plast.tensor([-3.0, 0.5, 3.0])).tolist()
    [-1.0, 0.5, 1.0]
    """
    _no_inplace(inplace, "hardtanh")
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    if not _check_tensor(input, "hardtanh").dtype.is_floating_point:
        min_val, max_val = int(min_val), int(max_val)
        return where(le(input, min_val), min_val, where(ge(input, max_val), max_val, input))
    # the gradient flows only strictly inside (min_val, max_val): 0 at the bounds and at nan, as torch's vector
    # kernel and clamp's gradient give (torch's scalar tail gives 1 at nan); nan stays nan forward
    inside = logical_and(gt(input, min_val), lt(input, max_val))
    return where(inside, input, clamp(input.detach(), min_val, max_val))


def lerp(input: TensorBase, end: TensorBase, weight: TensorOrNumber) -> TensorBase:
    """input + weight * (end - input); weight is a number or a tensor (all broadcast).

    >>> plast.lerp(plast.tensor([0.0, 10.0]), plast.tensor([10.0, 20.0]), 0.25).tolist()
    [2.5, 12.5]
    """
    _, dt, _ = _operands((input, end), "lerp")
    if not dt.is_floating_point:
        raise DTypeError(f"lerp needs floating point tensors, got {dt}")
    return add(input, mul(weight, sub(end, input)))


def addcmul(input: TensorBase, tensor1: TensorBase, tensor2: TensorBase, *, value: Number = 1) -> TensorBase:
    """input + value * tensor1 * tensor2.

    >>> plast.addcmul(plast.tensor([1.0]), plast.tensor([2.0]), plast.tensor([3.0]), value=0.5).tolist()
    [4.0]
    """
    prod = mul(tensor1, tensor2)
    return add(input, prod if value == 1 else mul(prod, value))


def addcdiv(input: TensorBase, tensor1: TensorBase, tensor2: TensorBase, *, value: Number = 1) -> TensorBase:
    """input + value * tensor1 / tensor2 (floating point tensors; integer division is refused, as in torch).

    >>> plast.addcdiv(plast.tensor([1.0]), plast.tensor([3.0]), plast.tensor([2.0]), value=2).tolist()
    [4.0]
    """
    if all(isinstance(t, TensorBase) and not t.dtype.is_floating_point for t in (tensor1, tensor2)):
        raise DTypeError(
            f"addcdiv: integer division is not supported (tensor1 is {tensor1.dtype}, tensor2 is {tensor2.dtype}); "
            "use input + value * tensor1 / tensor2, or convert with .float()"
        )
    q = div(tensor1, tensor2)
    return add(input, q if value == 1 else mul(q, value))


__all__ = [
    "nonzero",
    "pow", "floor_divide", "remainder", "fmod", "maximum", "minimum", "clamp", "clip", "clamp_min", "clamp_max",
    "where", "masked_fill", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "gcd", "lcm", "bitwise_left_shift",
    "bitwise_right_shift", "isfinite", "isnan", "isinf",
    "floor", "ceil", "trunc", "round", "exp2", "log2", "log10", "expm1", "reciprocal", "square", "softplus",
    "leaky_relu", "elu", "hardtanh", "lerp", "addcmul", "addcdiv",
]  # fmt: skip
