"""torch's elementwise functions written in plast primitives (STYLE §3): forward and backward come from the
primitives' rules, so they need no kernel or backward rule of their own. Plus torch's alias names.

>>> import plast
>>> round(plast.tan(plast.tensor(0.5)).item(), 5)
0.5463
"""

from __future__ import annotations

import math

import ml_dtypes

from .._core import dtypes
from .._core.errors import DTypeError
from .._core.hints import TensorBase, TensorOrNumber
from . import creation, movement, pointwise, reduce, special, unary
from .elementwise import add, div, mul, neg, sub


def _float(x):
    return x if x.dtype.is_floating_point else x.float()


def tan(input: TensorBase) -> TensorBase:
    """sin(x) / cos(x)."""
    x = _float(input)
    return div(unary.sin(x), unary.cos(x))


def sinh(input: TensorBase) -> TensorBase:
    """(e^x - e^-x) / 2, written as (expm1(x) - expm1(-x)) / 2 so that it is exact near 0."""
    x = _float(input)
    return mul(sub(pointwise.expm1(x), pointwise.expm1(neg(x))), 0.5)


def cosh(input: TensorBase) -> TensorBase:
    """(e^x + e^-x) / 2."""
    x = _float(input)
    return mul(add(unary.exp(x), unary.exp(neg(x))), 0.5)


def frac(input: TensorBase) -> TensorBase:
    """x - trunc(x) (the fractional part, with x's sign)."""
    return sub(input, pointwise.trunc(input))


def deg2rad(input: TensorBase) -> TensorBase:
    return mul(_float(input), math.pi / 180.0)


def rad2deg(input: TensorBase) -> TensorBase:
    return mul(_float(input), 180.0 / math.pi)


def logaddexp(input: TensorBase, other: TensorBase) -> TensorBase:
    """log(e^a + e^b) = max(a, b) + log1p(e^-|a - b|), stable for large inputs."""
    m = pointwise.maximum(input, other)
    return add(m, unary.log1p(unary.exp(neg(unary.abs(sub(input, other))))))


def logaddexp2(input: TensorBase, other: TensorBase) -> TensorBase:
    """log2(2^a + 2^b) = max(a, b) + log2(1 + 2^-|a - b|)."""
    m = pointwise.maximum(input, other)
    return add(m, mul(unary.log1p(pointwise.exp2(neg(unary.abs(sub(input, other))))), 1.0 / math.log(2.0)))


def logit(input: TensorBase, eps: float | None = None) -> TensorBase:
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given."""
    p = _float(input)
    if eps is not None:
        # clamp as torch's logit does: a nan input passes, and so does its gradient (clamp's rule gives it 0)
        p = pointwise.where(
            pointwise.lt(p, eps), eps, pointwise.where(pointwise.gt(p, 1.0 - eps), 1.0 - eps, p)
        )
    else:
        # outside [0, 1] the value is nan, and so is the gradient, as torch's (log's own rule, g / p, would give
        # a finite one): adding a constant nan there makes both nan
        outside = pointwise.logical_or(pointwise.lt(p, 0.0), pointwise.gt(p, 1.0))
        p = add(p, pointwise.where(outside, math.nan, 0.0))
    return sub(unary.log(p), unary.log1p(neg(p)))


def xlogy(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """x * log(y), and 0 where x is 0 (unless y is nan). Where x is 0 and y is 0 or inf, y is read as 1, so the
    value is 0 and the gradients are torch's (d/dx = log(y) elsewhere, d/dy = x / y)."""
    x = input if isinstance(input, TensorBase) else creation.as_tensor(input)
    y = other if isinstance(other, TensorBase) else creation.as_tensor(other)
    y = _float(y)
    bad = pointwise.logical_and(
        pointwise.eq(x, 0), pointwise.logical_or(pointwise.eq(y, 0), pointwise.isinf(y))
    )
    return mul(x, unary.log(pointwise.where(bad, 1.0, y)))


def hypot(input: TensorBase, other: TensorBase) -> TensorBase:
    """sqrt(a^2 + b^2)."""
    return unary.sqrt(add(mul(input, input), mul(other, other)))


def positive(input: TensorBase) -> TensorBase:
    """The input itself (torch.positive returns it, not a copy)."""
    return input


def isposinf(input: TensorBase) -> TensorBase:
    return pointwise.logical_and(pointwise.isinf(input), pointwise.gt(input, 0))


def isneginf(input: TensorBase) -> TensorBase:
    return pointwise.logical_and(pointwise.isinf(input), pointwise.lt(input, 0))


def fmax(input: TensorBase, other: TensorBase) -> TensorBase:
    """The larger of the two, ignoring nan (nan only where both are): where(a >= b or b is nan, a, b). The
    gradient goes to the side taken, all of it to input on ties (torch's rule; maximum splits ties).

    >>> plast.fmax(plast.tensor([1.0, float("nan")]), plast.tensor([float("nan"), 2.0])).tolist()
    [1.0, 2.0]
    """
    take = pointwise.logical_or(pointwise.ge(input, other), pointwise.isnan(_tensor(other)))
    return pointwise.where(take, input, other)


def fmin(input: TensorBase, other: TensorBase) -> TensorBase:
    """The smaller of the two, ignoring nan (see fmax)."""
    take = pointwise.logical_or(pointwise.le(input, other), pointwise.isnan(_tensor(other)))
    return pointwise.where(take, input, other)


def _tensor(v):
    return v if isinstance(v, TensorBase) else creation.as_tensor(v)


def nan_to_num(
    input: TensorBase, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> TensorBase:
    """nan, +inf and -inf replaced by `nan`, `posinf` and `neginf` (by default 0 and the dtype's largest and
    lowest finite values); integer and bool tensors come back unchanged (a copy). The gradient is zero at the
    replaced elements, as torch.

    >>> plast.nan_to_num(plast.tensor([float("nan"), float("inf"), 1.0]), posinf=9.0).tolist()
    [0.0, 9.0, 1.0]
    """
    x = _tensor(input)
    if not x.dtype.is_floating_point:
        return movement.clone(x)
    info = ml_dtypes.finfo(x.dtype.np)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    out = pointwise.where(pointwise.isnan(x), nan, x)
    out = pointwise.where(isposinf(x), hi, out)
    return pointwise.where(isneginf(x), lo, out)


def heaviside(input: TensorBase, values: TensorOrNumber) -> TensorBase:
    """0 where input < 0, `values` where input == 0, 1 where input > 0 (and 0 at nan, as torch); input and a
    tensor `values` must share a dtype, as torch. No gradient (torch has none either: its backward raises).

    >>> plast.heaviside(plast.tensor([-1.0, 0.0, 2.0]), plast.tensor(0.5)).tolist()
    [0.0, 0.5, 1.0]
    """
    x = _tensor(input)
    if isinstance(values, TensorBase) and values.dtype is not x.dtype:
        raise DTypeError(
            f"heaviside is not implemented for tensors of different dtypes ({x.dtype} and {values.dtype})"
        )
    v = values.detach() if isinstance(values, TensorBase) else values
    x = x.detach()
    step = movement.cast(pointwise.gt(x, 0), x.dtype)
    return pointwise.where(pointwise.eq(x, 0), movement.cast(_tensor(v), x.dtype), step)


def isreal(input: TensorBase) -> TensorBase:
    """True everywhere: plast's tensors are real (torch's answer for a real tensor)."""
    x = _tensor(input)
    return creation.ones_like(x, dtype=dtypes.bool_)


def float_power(input: TensorOrNumber, exponent: TensorOrNumber) -> TensorBase:
    """pow computed in float64, whatever the inputs' dtypes (torch's float_power); the gradients come back in
    the inputs' dtypes.

    >>> plast.float_power(plast.tensor([2]), 0.5).dtype
    plast.float64
    """

    def wide(v):
        return movement.cast(v, dtypes.float64) if isinstance(v, TensorBase) else float(v)

    return pointwise.pow(wide(input), wide(exponent))


def sinc(input: TensorBase) -> TensorBase:
    """sin(pi x) / (pi x), and 1 at 0 (the limit); integers give float32. The gradient at 0 is 0, as torch: the
    quotient is taken of a denominator that is 1 there, so the branch where() drops can't make nan gradients."""
    x = _float(input)
    zero = pointwise.eq(x, 0)
    px = mul(pointwise.where(zero, 1.0, x), math.pi)
    return pointwise.where(zero, 1.0, div(unary.sin(px), px))


def ldexp(input: TensorBase, other: TensorBase) -> TensorBase:
    """input * 2 ** other; integers give float32. An integer exponent is exact as torch's is (input * 2**e in
    float64, 2**e in two halves, rounded once to the result dtype: 1e-30 * 2**200 is 1.6e30 in float32, not
    inf); a float exponent is 2 ** other in its own dtype, as torch computes it (so a 2 ** other that overflows
    gives inf, as torch)."""
    x, e = _float(_tensor(input)), _tensor(other)
    if e.dtype.is_floating_point:
        return mul(x, pointwise.exp2(e))
    ef = movement.cast(e, dtypes.float64)
    half = pointwise.floor(mul(ef, 0.5))
    wide = mul(mul(movement.cast(x, dtypes.float64), pointwise.exp2(half)), pointwise.exp2(sub(ef, half)))
    return movement.cast(wide, x.dtype)


def mvlgamma(input: TensorBase, p: int) -> TensorBase:
    """The multivariate log-gamma function of dimension p: p (p - 1) / 4 log(pi) + sum over j < p of
    lgamma(x - j / 2); integers give float32. Like torch, no domain check (below (p - 1) / 2 the value is what
    the sum gives, inf at the poles).

    >>> round(plast.mvlgamma(plast.tensor([2.5]), 3).item(), 4)
    1.881
    """
    if not isinstance(p, int) or isinstance(p, bool):
        raise TypeError(f"mvlgamma: p must be an int, got {type(p).__name__}")
    if p < 1:
        raise ValueError(f"mvlgamma: p has to be greater than or equal to 1, got {p}")
    x = _float(_tensor(input))
    out = special.lgamma(x)
    for j in range(1, p):
        out = add(out, special.lgamma(sub(x, 0.5 * j)))
    return add(out, p * (p - 1) / 4 * math.log(math.pi)) if p > 1 else out


def isclose(
    input: TensorBase, other: TensorBase, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> TensorBase:
    """Elementwise |input - other| <= atol + rtol |other| (or exactly equal, which covers infinities), as
    torch.isclose: both tensors of one dtype, broadcast; NaNs equal only with `equal_nan`.

    >>> plast.isclose(plast.tensor([1.0, 1.1]), plast.tensor([1.0 + 1e-6, 1.0])).tolist()
    [True, False]
    """
    a, b = _tensor(input), _tensor(other)
    if a.dtype != b.dtype:
        raise DTypeError(f"isclose: {a.dtype} did not match {b.dtype} (both tensors must have one dtype)")
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol and atol must be non-negative, got rtol={rtol}, atol={atol}")
    close = pointwise.eq(a, b)
    if a.dtype == dtypes.bool_ or (rtol == 0 and atol == 0):
        return close
    if equal_nan and a.dtype.is_floating_point:
        close = pointwise.logical_or(close, pointwise.logical_and(pointwise.isnan(a), pointwise.isnan(b)))
    fa, fb = _float(a), _float(b)  # integers compare their difference in the default float type, as torch
    err = unary.abs(sub(fa, fb))
    within = pointwise.le(err, add(unary.abs(mul(fb, rtol)), atol))
    return pointwise.logical_or(close, pointwise.logical_and(pointwise.isfinite(err), within))


def allclose(
    input: TensorBase, other: TensorBase, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> bool:
    """Whether isclose holds everywhere (torch.allclose), as a Python bool.

    >>> plast.allclose(plast.tensor([1.0, 2.0]), plast.tensor([1.0, 2.0 + 1e-7]))
    True
    """
    return bool(reduce.all(isclose(input, other, rtol, atol, equal_nan)).item())


def equal(input: TensorBase, other: TensorBase) -> bool:
    """Whether the two tensors have the same shape and equal elements (torch.equal; dtypes are promoted, and NaN
    equals nothing), as a Python bool.

    >>> plast.equal(plast.tensor([1, 2]), plast.tensor([1.0, 2.0])), plast.equal(plast.ones(2), plast.ones(1, 2))
    (True, False)
    """
    a, b = _tensor(input), _tensor(other)
    if tuple(a.shape) != tuple(b.shape):
        return False
    return bool(reduce.all(pointwise.eq(a, b)).item())


# torch's alias names: the same functions
absolute = unary.abs
divide = div
true_divide = div
multiply = mul
subtract = sub
negative = neg
sgn = unary.sign  # sgn is sign for real tensors
fix = pointwise.trunc
greater = pointwise.gt
greater_equal = pointwise.ge
less = pointwise.lt
less_equal = pointwise.le
not_equal = pointwise.ne

__all__ = [
    "absolute",
    "allclose",
    "equal",
    "isclose",
    "cosh",
    "deg2rad",
    "divide",
    "fix",
    "float_power",
    "fmax",
    "fmin",
    "frac",
    "greater",
    "greater_equal",
    "heaviside",
    "hypot",
    "isneginf",
    "isposinf",
    "isreal",
    "ldexp",
    "less",
    "less_equal",
    "logaddexp",
    "logaddexp2",
    "logit",
    "multiply",
    "mvlgamma",
    "nan_to_num",
    "negative",
    "not_equal",
    "positive",
    "rad2deg",
    "sgn",
    "sinc",
    "sinh",
    "subtract",
    "tan",
    "true_divide",
    "xlogy",
]
