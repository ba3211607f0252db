"""Unary elementwise ops: rows of the op table with their backward rules."""

from __future__ import annotations

import math

from .._core import dtypes
from .._core.hints import TensorBase
from ..graph._graph import convert, record
from ..kernels.cpu import kernels as cpu
from . import elementwise
from .elementwise import add, div, mul, sub
from .factory import scalar_tensor
from .registry import OPS, register

_unary = elementwise.unary  # compiled (ops/elementwise.pyx): dtype rule and record


def _out(node):
    """The op's own output (to reuse in backward, e.g. exp' = exp); recomputed if the caller dropped it."""
    t = node.outputs[0]()
    if t is None:
        t = record(node.op, node.inputs, node.args, node.specs, node.inputs[0].device)[0]
    return t


def _bw(fn):
    return lambda node, g: (fn(node, node.inputs[0], g),)


EXP = register(
    "exp",
    cpu=cpu.unary,
    chain="exp",
    reads_output=True,
    saves_inputs=False,
    backward=_bw(lambda n, x, g: mul(g, _out(n))),
)
LOG = register("log", cpu=cpu.unary, chain="log", backward=_bw(lambda n, x, g: div(g, x)))
LOG1P = register("log1p", cpu=cpu.unary, chain="log1p", backward=_bw(lambda n, x, g: div(g, add(x, 1.0))))
SQRT = register(
    "sqrt",
    cpu=cpu.unary,
    chain="sqrt",
    reads_output=True,
    saves_inputs=False,
    backward=_bw(lambda n, x, g: div(g, mul(_out(n), 2.0))),
)
SIN = register("sin", cpu=cpu.unary, chain="sin", backward=_bw(lambda n, x, g: mul(g, cos(x))))
COS = register("cos", cpu=cpu.unary, chain="cos", backward=_bw(lambda n, x, g: mul(g, mul(sin(x), -1.0))))
TANH = register(
    "tanh",
    cpu=cpu.unary,
    chain="tanh",
    reads_output=True,
    saves_inputs=False,
    backward=_bw(lambda n, x, g: mul(g, sub(1.0, mul(_out(n), _out(n))))),
)
SIGMOID = register(
    "sigmoid",
    cpu=cpu.unary,
    chain="sigmoid",
    reads_output=True,
    saves_inputs=False,
    backward=_bw(lambda n, x, g: mul(g, mul(_out(n), sub(1.0, _out(n))))),
)


def _abs_bw(node, x, g):
    # torch's rule is g * sgn(x) with sgn(nan) = 0, where plast's sign(nan) is nan: g * where(isnan(x), 0, sign(x)).
    # isnan and where are rows of ops/pointwise, a layer up: recorded here through the op table, as the op layer
    # would record them (x, its sign and g share one shape and dtype)
    s = sign(x)
    nan = record(OPS["isnan"], (x,), (), [(x.shape, dtypes.bool_)], x.device)[0]
    zero = scalar_tensor(0.0, s.dtype, x.device)
    return mul(g, record(OPS["where"], (nan, zero, s), (), [(x.shape, s.dtype)], x.device)[0])


ABS = register("abs", cpu=cpu.unary, chain="abs", backward=_bw(_abs_bw))
SIGN = register("sign", cpu=cpu.unary, chain="sign", backward=_bw(lambda n, x, g: None))
RELU = register(
    "relu",
    cpu=cpu.unary,
    chain="relu",
    reads_output=True,
    saves_inputs=False,
    # g * sign(out): one fused chain with its neighbours. At a nan input this gives nan where torch gives g
    # (threshold_backward); matching torch needs a comparison, which is no chain op: where(le(out, 0), 0, g)
    # made the eager xor step 13% more instructions (bench/count_instructions.py), so relu keeps this rule
    backward=_bw(lambda n, x, g: mul(g, sign(_out(n)))),
)
ERF = register(
    "erf",
    cpu=cpu.unary,
    chain="erf",
    backward=_bw(lambda n, x, g: mul(g, mul(exp(mul(mul(x, x), -1.0)), 2.0 / math.sqrt(math.pi)))),
)


# GELU: one pass forward (the tanh form or torch's exact erf form) and one pass backward, grad * gelu'(x), with
# gelu' its own unary op (torch's gelu_backward formulas): as a composite of mul/add/tanh, autograd made five to
# seven kernels over the activation for the backward alone. The derivatives' own backward (double backward) is
# gelu'' composed of other ops.
_B, _K = math.sqrt(2.0 / math.pi), 0.044715


def _gelu_tanh_grad2(node, x, g):
    # with u' = b (1 + 3 k x^2) and t = tanh(u): gelu'' = (1 - t^2) (u' - x t u'^2 + 3 b k x^2)
    x2 = mul(x, x)
    t = tanh(mul(add(x, mul(mul(x2, x), _K)), _B))
    du = mul(add(mul(x2, 3 * _K), 1.0), _B)
    inner = add(sub(du, mul(mul(x, t), mul(du, du))), mul(x2, 3 * _B * _K))
    return mul(g, mul(sub(1.0, mul(t, t)), inner))


def _gelu_erf_grad2(node, x, g):
    # gelu'' = phi(x) (2 - x^2), phi the standard normal density
    phi = mul(exp(mul(mul(x, x), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
    return mul(g, mul(phi, sub(2.0, mul(x, x))))


GELU_TANH_GRAD = register(
    "gelu_tanh_grad", cpu=cpu.unary, chain="gelu_tanh_grad", backward=_bw(_gelu_tanh_grad2)
)
GELU_ERF_GRAD = register("gelu_erf_grad", cpu=cpu.unary, chain="gelu_erf_grad", backward=_bw(_gelu_erf_grad2))
GELU_TANH = register(
    "gelu_tanh",
    cpu=cpu.unary,
    chain="gelu_tanh",
    backward=_bw(lambda n, x, g: mul(g, _unary(GELU_TANH_GRAD, x))),
)
GELU_ERF = register(
    "gelu_erf",
    cpu=cpu.unary,
    chain="gelu_erf",
    backward=_bw(lambda n, x, g: mul(g, _unary(GELU_ERF_GRAD, x))),
)


def exp(x: TensorBase) -> TensorBase:
    return _unary(EXP, x)


def log(x: TensorBase) -> TensorBase:
    return _unary(LOG, x)


def log1p(x: TensorBase) -> TensorBase:
    return _unary(LOG1P, x)


def sqrt(x: TensorBase) -> TensorBase:
    return _unary(SQRT, x)


def rsqrt(x: TensorBase) -> TensorBase:
    return div(1.0, sqrt(x))


def sin(x: TensorBase) -> TensorBase:
    return _unary(SIN, x)


def cos(x: TensorBase) -> TensorBase:
    return _unary(COS, x)


def tanh(x: TensorBase) -> TensorBase:
    return _unary(TANH, x)


def sigmoid(x: TensorBase) -> TensorBase:
    return _unary(SIGMOID, x)


def abs(x: TensorBase) -> TensorBase:  # noqa: A001
    return _unary(ABS, x)


def sign(x: TensorBase) -> TensorBase:
    return _unary(SIGN, x)


def relu(x: TensorBase) -> TensorBase:
    return _unary(RELU, x)


def erf(x: TensorBase) -> TensorBase:
    return _unary(ERF, x)


def silu(x: TensorBase) -> TensorBase:
    if dtypes.is_16bit(x.dtype):  # a composite: in float32, rounded once (as torch), not after each row
        return convert(silu(convert(x, dtypes.float32)), x.dtype)
    return mul(x, sigmoid(x))


def gelu(x: TensorBase, approximate: str = "none") -> TensorBase:
    """GELU with the exact erf form (default) or torch's tanh approximation (approximate="tanh")."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if dtypes.is_16bit(x.dtype):  # in float32, rounded once (as torch)
        return convert(gelu(convert(x, dtypes.float32), approximate), x.dtype)
    return _unary(GELU_TANH if approximate == "tanh" else GELU_ERF, x)


__all__ = [
    "exp",
    "log",
    "log1p",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "abs",
    "sign",
    "relu",
    "erf",
    "silu",
    "gelu",
]
