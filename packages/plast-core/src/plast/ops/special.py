"""Inverse trigonometric and hyperbolic functions, atan2, the special functions erfc, erfinv, lgamma, digamma,
polygamma, i0, igamma and igammac, and the float bit-level ops copysign, nextafter, signbit and frexp: rows of the op table with
their backward rules.

Each is a primitive: none has a composite of plast's ops that is exact at its edges (atan of large x, asin near
+-1, lgamma at its poles, erfc in the tail where 1 - erf(x) is 0). The kernels are csrc/unary.c's and
csrc/elementwise.c's (libm, and _core/special.h for the rest, which CUDA's cu/elementwise.cu shares), so the
rows fuse into elementwise chains like exp or pow. Integer and bool inputs give float32, as in torch (but
nextafter, igamma and igammac, which torch refuses for them too); 16-bit inputs are computed in float32 and
rounded once (the rows are not ``half``).
"""

from __future__ import annotations

import collections
import math

from .._core import dtypes
from .._core.errors import DTypeError
from .._core.hints import TensorBase, TensorOrNumber
from .._core.shapes import broadcast_shapes
from ..graph._graph import record
from ..kernels.cpu import kernels as cpu
from ..kernels.cpu import kernels_pointwise as cpu_pointwise
from . import movement
from .creation import zeros_like
from .elementwise import add, div, mul, neg, sub
from .factory import scalar_tensor
from .pointwise import _check_tensor, _operands, eq, exp2, lt, where
from .registry import register
from .unary import _out, exp, log, sqrt

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _bw(fn):
    return lambda node, g: (fn(node, node.inputs[0], g),)


# NOTE: the derivatives are torch's formulas (tools/autograd's), so the values at the domain edges agree too:
# asin'(+-1) = inf, atanh'(+-1) = inf, acosh'(1) = inf, and nan outside the domain
ASIN = register(
    "asin",
    cpu=cpu_pointwise.unary,
    chain="asin",
    backward=_bw(lambda n, x, g: div(g, sqrt(sub(1.0, mul(x, x))))),
)
ACOS = register(
    "acos",
    cpu=cpu_pointwise.unary,
    chain="acos",
    backward=_bw(lambda n, x, g: neg(div(g, sqrt(sub(1.0, mul(x, x)))))),
)
ATAN = register(
    "atan", cpu=cpu_pointwise.unary, chain="atan", backward=_bw(lambda n, x, g: div(g, add(mul(x, x), 1.0)))
)
ASINH = register(
    "asinh",
    cpu=cpu_pointwise.unary,
    chain="asinh",
    backward=_bw(lambda n, x, g: div(g, sqrt(add(mul(x, x), 1.0)))),
)
ACOSH = register(
    "acosh",
    cpu=cpu_pointwise.unary,
    chain="acosh",
    backward=_bw(lambda n, x, g: div(g, sqrt(sub(mul(x, x), 1.0)))),
)
ATANH = register(
    "atanh", cpu=cpu_pointwise.unary, chain="atanh", backward=_bw(lambda n, x, g: div(g, sub(1.0, mul(x, x))))
)
ERFC = register(
    "erfc",
    cpu=cpu_pointwise.unary,
    chain="erfc",
    backward=_bw(lambda n, x, g: mul(g, mul(exp(neg(mul(x, x))), -_TWO_OVER_SQRT_PI))),
)
# erfinv'(x) = sqrt(pi) / 2 * exp(erfinv(x)^2): read from the output
ERFINV = register(
    "erfinv",
    cpu=cpu_pointwise.unary,
    chain="erfinv",
    reads_output=True,
    saves_inputs=False,
    backward=_bw(lambda n, x, g: mul(g, mul(exp(mul(_out(n), _out(n))), 1.0 / _TWO_OVER_SQRT_PI))),
)
LGAMMA = register(
    "lgamma", cpu=cpu_pointwise.unary, chain="lgamma", backward=_bw(lambda n, x, g: mul(g, digamma(x)))
)
DIGAMMA = register(
    "digamma", cpu=cpu_pointwise.unary, chain="digamma", backward=_bw(lambda n, x, g: mul(g, _trigamma(x)))
)


def _no_second_derivative(node, g):
    # a backward that says so: without a rule the engine would record the derivative as a constant, and a second
    # backward through it would only report a tensor that does not require grad
    raise NotImplementedError("the second derivative of i0 (I1') is not implemented")


# polygamma(1, x): digamma's derivative, and polygamma(1, x) itself (tests/test_op_table.py checks a fusible row
# through a public function of its name, so it takes no chain opcode)
TRIGAMMA = register(
    "trigamma", cpu=cpu_pointwise.unary, backward=_bw(lambda n, x, g: mul(g, _polygamma_row(2, x)))
)
# polygamma(n, x) for n >= 2: input 0 is n as a constant of x's dtype, the kernel's first operand (args (n,) for
# the backward, polygamma(n + 1, x)); not fusible, for the same reason as trigamma
POLYGAMMA = register(
    "polygamma",
    cpu=cpu.binary,
    backward=lambda node, g: (None, mul(g, _polygamma_row(node.args[0] + 1, node.inputs[1]))),
)
# i0'(x) = I1(x): I1 is recorded only by i0's backward (torch names it torch.special.i1; plast has no special
# namespace yet), so, like trigamma, it takes no chain opcode
I0 = register("i0", cpu=cpu_pointwise.unary, chain="i0", backward=_bw(lambda n, x, g: mul(g, _i1(x))))
I1 = register("i1", cpu=cpu_pointwise.unary, backward=_no_second_derivative)


def _atan2_bw(node, g):
    # torch's rule: d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2) (nan at a = b = 0, as torch)
    a, b = node.inputs
    recip = div(1.0, add(mul(a, a), mul(b, b)))
    ga = mul(g, mul(b, recip)) if a.requires_grad else None
    gb = mul(g, mul(neg(a), recip)) if b.requires_grad else None
    return ga, gb


ATAN2 = register("atan2", cpu=cpu.binary, chain="atan2", backward=_atan2_bw)


def _copysign_bw(node, g):
    # torch's rule: d/da = copysign(a, b) / a (+-1), and 0 where a is 0; b gets a zero gradient
    a, b = node.inputs
    ga = None
    if a.requires_grad:
        ratio = div(_out(node), a)
        ga = mul(g, where(eq(a, 0), 0.0, ratio))
    return ga, (zeros_like(g) if b.requires_grad else None)


COPYSIGN = register("copysign", cpu=cpu.binary, chain="copysign", backward=_copysign_bw, reads_output=True)
# no backward, as torch (nextafter is not differentiable there either)
NEXTAFTER = register("nextafter", cpu=cpu.binary, chain="nextafter", saves_inputs=False)


def _frexp_bw(node, g, g_exponent=None):
    # torch's rule: the mantissa's gradient over 2^exponent (the exponent, an integer, has none)
    if g is None:
        return (None,)
    e = node.outputs[1]()
    if e is None:
        e = record(node.op, node.inputs, node.args, node.specs, node.inputs[0].device)[1]
    return (div(g, exp2(movement.cast(e, g.dtype))),)


# two outputs: the mantissa (x's dtype) and the exponent (int32)
FREXP = register("frexp", cpu=cpu_pointwise.frexp, backward=_frexp_bw, n_outputs=2)
_FrexpResult = collections.namedtuple("frexp", ["mantissa", "exponent"])


def _igamma_bw(node, g):
    # torch's rule: d/dx P(a, x) = x^(a - 1) e^-x / Gamma(a) (minus that for Q); none for a
    a, x = node.inputs
    if a.requires_grad:
        raise NotImplementedError(
            f"the derivative of {node.op.name} for its first input (a) is not implemented (nor in torch)"
        )
    d = exp(sub(sub(mul(sub(a, 1.0), log(x)), x), lgamma(a)))
    return None, mul(g, d if node.op.name == "igamma" else neg(d))


IGAMMA = register("igamma", cpu=cpu.binary, chain="igamma", backward=_igamma_bw)
IGAMMAC = register("igammac", cpu=cpu.binary, chain="igammac", backward=_igamma_bw)


def _float_binary(op, a, b, *, promote_ints):
    """Two operands promoted and broadcast; integer results become the default dtype (float32 unless set) when
    `promote_ints`, else raise."""
    (a, b), dt, dev = _operands((a, b), op.name)
    if not dt.is_floating_point:
        if not promote_ints:
            raise DTypeError(f"{op.name} is only defined for floating point tensors, got {dt}")
        dt = dtypes.default_float
        a, b = movement.cast(a, dt), movement.cast(b, dt)
    shape = broadcast_shapes(a.shape, b.shape, op=op.name)
    return record(op, (a, b), (), [(shape, dt)], dev)[0]


def _float_unary(op, x):
    _check_tensor(x, op.name)
    if not x.dtype.is_floating_point:
        x = movement.cast(x, dtypes.default_float)
    return record(op, (x,), (), [(x.shape, x.dtype)], x.device)[0]


def asin(input: TensorBase) -> TensorBase:
    """arcsin, on [-1, 1] (nan outside); integers give float32.

    >>> round(plast.asin(plast.tensor([1.0])).item(), 5)
    1.5708
    """
    return _float_unary(ASIN, input)


def acos(input: TensorBase) -> TensorBase:
    """arccos, on [-1, 1] (nan outside)."""
    return _float_unary(ACOS, input)


def atan(input: TensorBase) -> TensorBase:
    """arctan, in (-pi/2, pi/2)."""
    return _float_unary(ATAN, input)


def asinh(input: TensorBase) -> TensorBase:
    """Inverse hyperbolic sine."""
    return _float_unary(ASINH, input)


def acosh(input: TensorBase) -> TensorBase:
    """Inverse hyperbolic cosine, on [1, inf) (nan below)."""
    return _float_unary(ACOSH, input)


def atanh(input: TensorBase) -> TensorBase:
    """Inverse hyperbolic tangent, on [-1, 1]: +-inf at +-1, nan outside."""
    return _float_unary(ATANH, input)


def erfc(input: TensorBase) -> TensorBase:
    """1 - erf(x), without the cancellation: accurate where erf(x) rounds to 1.

    >>> plast.erfc(plast.tensor([10.0], dtype=plast.float64)).item() > 0
    True
    """
    return _float_unary(ERFC, input)


def erfinv(input: TensorBase) -> TensorBase:
    """The inverse of erf, on [-1, 1]: +-inf at +-1, nan outside."""
    return _float_unary(ERFINV, input)


def lgamma(input: TensorBase) -> TensorBase:
    """ln |Gamma(x)|; inf at 0 and the negative integers (its poles)."""
    return _float_unary(LGAMMA, input)


def digamma(input: TensorBase) -> TensorBase:
    """psi(x) = d/dx ln Gamma(x): -inf at 0 (+inf at -0), nan at the negative integers, as torch."""
    return _float_unary(DIGAMMA, input)


def i0(input: TensorBase) -> TensorBase:
    """The modified Bessel function of the first kind of order 0 (even; inf beyond |x| = 713.9).

    >>> round(plast.i0(plast.tensor([1.0])).item(), 5)
    1.26607
    """
    return _float_unary(I0, input)


def _i1(x):
    return record(I1, (x,), (), [(x.shape, x.dtype)], x.device)[0]


def _polygamma_row(n, x):
    nt = scalar_tensor(float(n), x.dtype, x.device)
    return record(POLYGAMMA, (nt, x), (n,), [(x.shape, x.dtype)], x.device)[0]


def polygamma(n: int, input: TensorBase) -> TensorBase:
    """The n-th derivative of digamma: digamma for n = 0, then (-1)^(n+1) n! zeta(n + 1, x); integers give
    float32. inf at the poles (0, -1, ...), as torch; at +inf the limit 0 (torch says nan).

    >>> round(plast.polygamma(1, plast.tensor([1.0])).item(), 5)
    1.64493
    """
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"polygamma: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise ValueError(f"polygamma(n, x) does not support negative n, got {n}")
    x = _check_tensor(input, "polygamma")
    if not x.dtype.is_floating_point:
        x = movement.cast(x, dtypes.default_float)
    if n == 0:
        return digamma(x)
    if n == 1:
        return _trigamma(x)
    return _polygamma_row(n, x)


def _trigamma(x):
    return record(TRIGAMMA, (x,), (), [(x.shape, x.dtype)], x.device)[0]


def atan2(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """The angle of the point (other, input) in (-pi, pi], with broadcasting; integers give float32 (torch's
    rule: input is the y coordinate).

    >>> round(plast.atan2(plast.tensor([1.0]), plast.tensor([-1.0])).item(), 4)
    2.3562
    """
    return _float_binary(ATAN2, input, other, promote_ints=True)


def copysign(input: TensorOrNumber, other: TensorOrNumber) -> TensorBase:
    """|input| with the sign bit of other, broadcast (-0.0 and a negative nan count as negative); integers give
    float32. The gradient is +-1 toward input (0 where input is 0), none toward other, as torch.

    >>> plast.copysign(plast.tensor([1.0, 2.0]), plast.tensor([-0.0, 3.0])).tolist()
    [-1.0, 2.0]
    """
    return _float_binary(COPYSIGN, input, other, promote_ints=True)


def nextafter(input: TensorBase, other: TensorBase) -> TensorBase:
    """The next float after input toward other (floating point tensors only; no gradient)."""
    return _float_binary(NEXTAFTER, input, other, promote_ints=False)


def frexp(input: TensorBase) -> tuple[TensorBase, TensorBase]:
    """(mantissa, exponent) with input = mantissa * 2^exponent, |mantissa| in [0.5, 1) (0, inf and nan keep
    themselves, exponent 0); floating point tensors only, as torch. The exponent is int32.

    >>> m, e = plast.frexp(plast.tensor([8.0, -0.75]))
    >>> m.tolist(), e.tolist()
    ([0.5, -0.75], [4, 0])
    """
    x = _check_tensor(input, "frexp")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"frexp only supports floating point tensors, got {x.dtype}")
    m, e = record(FREXP, (x,), (), [(x.shape, x.dtype), (x.shape, dtypes.int32)], x.device)
    return _FrexpResult(m, e)


def igamma(input: TensorBase, other: TensorBase) -> TensorBase:
    """The regularized lower incomplete gamma function P(a, x) = gamma(a, x) / Gamma(a), a = input, x = other,
    broadcast; floating point tensors only, as torch. The gradient flows to x only (torch has none for a).

    >>> round(plast.igamma(plast.tensor([2.0]), plast.tensor([1.5])).item(), 4)
    0.4422
    """
    return _float_binary(IGAMMA, input, other, promote_ints=False)


def igammac(input: TensorBase, other: TensorBase) -> TensorBase:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x) (see igamma)."""
    return _float_binary(IGAMMAC, input, other, promote_ints=False)


def signbit(input: TensorBase) -> TensorBase:
    """True where the sign bit is set: negative numbers, -0.0 and a negative nan (bool result).

    >>> plast.signbit(plast.tensor([-0.0, 0.0, -2.0])).tolist()
    [True, False, True]
    """
    x = _check_tensor(input, "signbit")
    if not x.dtype.is_floating_point:
        return lt(x, 0) if x.dtype is not dtypes.bool_ else zeros_like(x, dtype=dtypes.bool_)
    # copysign(1, x) reads the sign bit itself, so -0.0 and -nan, which no comparison of x sees, count
    return lt(copysign(1.0, x.detach()), 0)


# torch's alias names
arcsin = asin
arccos = acos
arctan = atan
arcsinh = asinh
arccosh = acosh
arctanh = atanh
arctan2 = atan2

__all__ = [
    "acos",
    "acosh",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctan2",
    "arctanh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "copysign",
    "digamma",
    "erfc",
    "erfinv",
    "frexp",
    "i0",
    "igamma",
    "igammac",
    "lgamma",
    "nextafter",
    "polygamma",
    "signbit",
]
