"""torch's elementwise functions written in plast primitives (STYLE §3): forward and backward come from the
primitives' rules, so they need no kernel or backward rule of their own. Plus torch's alias names.

>>> import plast
>>> round(plast.tan(plast.tensor(0.5)).item(), 5)
0.5463
"""

from __future__ import annotations

import math

from .._core.hints import TensorBase, TensorOrNumber
from . import creation, pointwise, unary
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
        p = pointwise.clamp(p, eps, 1.0 - eps)
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
    "cosh",
    "deg2rad",
    "divide",
    "fix",
    "frac",
    "greater",
    "greater_equal",
    "hypot",
    "isneginf",
    "isposinf",
    "less",
    "less_equal",
    "logaddexp",
    "logaddexp2",
    "logit",
    "multiply",
    "negative",
    "not_equal",
    "positive",
    "rad2deg",
    "sgn",
    "sinh",
    "subtract",
    "tan",
    "true_divide",
    "xlogy",
]
