"""CPU kernels for the pointwise family (ops/pointwise.py): pow, integer-safe division, min/max, clamp, where,
comparisons, logical and bitwise ops, rounding and the extra unary float functions.

maximum/minimum, and float32/float64 pow, floor_divide, remainder and fmod, run the C binary kernel; the
roundings and exp2/log2/log10/expm1 the C unary kernel for float32/float64; the rest are numpy over views of
arena memory (the correctness baseline, see kernels.py). Integer division by zero is checked here, because the divisor's
value only exists once the graph runs: the kernel raises ZeroDivisionError before writing anything, and the
output is left unrealized so reading it again raises again instead of returning garbage.
"""

import numpy as np

from . import _fast, _kernels
from .kernels import address, bcast_strides, np_view

_C_DTYPES = {"int32", "int64", "float32", "float64"}
# the C binary kernel takes pow and the division family for these (integers keep numpy, which checks zeros)
_C_FLOATS = {"float32", "float64"}


def _fail(outputs, exc):
    # NOTE: the scheduler allocates outputs before the kernel runs; dropping the storage again keeps a failed
    # op's output unrealized (otherwise a second read would return uninitialized memory).
    for o in outputs:
        o._storage = None
    raise exc


def _binary_c(name, a, b, out):
    """out = a <name> b through the C binary kernel (broadcasting, any strides); out is not empty."""
    shape = out._shape
    _kernels.binary_nd(
        _kernels.BINARY_CODES[name],
        out.dtype.code,
        shape,
        address(a),
        bcast_strides(a, shape),
        address(b),
        bcast_strides(b, shape),
        address(out),
        out._strides,
    )


def minmax(node, inputs, outputs):
    """maximum/minimum, NaN-propagating (the C binary kernel; numpy for bool)."""
    a, b = inputs
    out = outputs[0]
    if out.numel() == 0:
        return
    if out.dtype.name in _C_DTYPES:
        _binary_c(node.op.name, a, b, out)
        return
    fn = np.maximum if node.op.name == "maximum" else np.minimum
    fn(np_view(a), np_view(b), out=np_view(out))


def _int_pow(base, exp):
    """Integer power with torch's rule for negative exponents: 1 ** -n == 1, (-1) ** -n == +-1, else 0."""
    neg = exp < 0
    r = np.power(base, np.where(neg, 0, exp))
    if neg.any():
        neg_val = np.where(base == 1, 1, np.where(base == -1, np.where(exp % 2 == 0, 1, -1), 0))
        r = np.where(neg, neg_val, r)
    return r


def pow_(node, inputs, outputs):
    if outputs[0].numel() == 0:
        return
    if outputs[0].dtype.name in _C_FLOATS:
        _binary_c("pow", inputs[0], inputs[1], outputs[0])
        return
    np_view(outputs[0])[...] = _int_pow(np_view(inputs[0]), np_view(inputs[1]))


_INT_DIVISION = {"floor_divide": np.floor_divide, "remainder": np.remainder, "fmod": np.fmod}


def division(node, inputs, outputs):
    """floor_divide / remainder / fmod: the C kernel for floats (torch's rules, csrc/elementwise.c), numpy for
    integers, where division by zero raises ZeroDivisionError (as torch does)."""
    if outputs[0].numel() == 0:
        return
    if outputs[0].dtype.name in _C_FLOATS:
        _binary_c(node.op.name, inputs[0], inputs[1], outputs[0])
        return
    out = np_view(outputs[0])
    a, b = np_view(inputs[0]), np_view(inputs[1])
    if (b == 0).any():
        _fail(outputs, ZeroDivisionError(f"{node.op.name}: integer division by zero"))
    with np.errstate(all="ignore"):  # INT_MIN // -1 wraps around, as in torch
        out[...] = _INT_DIVISION[node.op.name](a, b)


def clamp(node, inputs, outputs):
    has_min, has_max = node.args
    out = np_view(outputs[0])
    if out.size == 0:
        return
    x = np_view(inputs[0])
    i = 1
    if has_min:
        x = np.maximum(x, np_view(inputs[i]))
        i += 1
    if has_max:
        x = np.minimum(x, np_view(inputs[i]))
    out[...] = x


def where(node, inputs, outputs):
    out = np_view(outputs[0])
    if out.size == 0:
        return
    c, a, b = (np_view(t) for t in inputs)
    out[...] = np.where(c, a, b)


_BINARY_NP = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    # numpy's rules are torch's: a shift by < 0 or >= the width gives 0 (left) or the sign (right)
    "bitwise_left_shift": np.left_shift,
    "bitwise_right_shift": np.right_shift,
}


def _magnitude(x):
    # |x| as uint64, exact for the most negative value too (np.abs leaves INT64_MIN negative; as uint64 it is 2^63)
    return np.abs(x.astype(np.int64)).astype(np.uint64)


def gcd_lcm(node, inputs, outputs):
    """gcd / lcm of integer tensors. gcd on the operands' magnitudes in uint64: numpy's signed gcd divides
    INT_MIN by -1 on the way (a SIGFPE that kills the process); the result wraps to the dtype, as the CUDA
    kernel's (gcd(INT_MIN, 0) is INT_MIN). lcm is torch's |a / gcd * b| in the dtype, wrapping where it
    overflows."""
    out = np_view(outputs[0])
    if out.size == 0:
        return
    a, b = np_view(inputs[0]), np_view(inputs[1])
    g = np.gcd(_magnitude(a), _magnitude(b)).astype(out.dtype)
    if node.op.name == "lcm":
        with np.errstate(all="ignore"):
            g = np.where(g == 0, 0, np.abs(a // np.where(g == 0, 1, g) * b))
    out[...] = g


def binary(node, inputs, outputs):
    """Comparisons, logical, bitwise and integer ops: one numpy ufunc writing into the output."""
    out = np_view(outputs[0])
    if out.size == 0:
        return
    _BINARY_NP[node.op.name](np_view(inputs[0]), np_view(inputs[1]), out=out)


_UNARY_NP = {
    "logical_not": np.logical_not,
    "bitwise_not": np.invert,
    "isfinite": np.isfinite,
    "isnan": np.isnan,
    "isinf": np.isinf,
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "round": np.rint,
    "exp2": np.exp2,
    "log2": np.log2,
    # NOTE: numpy's float32 log10 is an ulp off at powers of ten (log10(100) != 2); float64 then rounding isn't
    "log10": lambda x: np.log10(x, dtype=np.float64),
    "expm1": np.expm1,
}


# the rows the C unary kernel (csrc/unary.c) takes for float32/float64 ("round": to whole numbers); the inverse
# trig and special functions (ops/special.py) have no numpy form: their rows only ever see float32/float64
_C_UNARY = {
    name: _fast.UNARY_CODES[name]
    for name in (
        "floor ceil trunc round exp2 log2 log10 expm1 "
        "asin acos atan asinh acosh atanh erfc erfinv lgamma digamma trigamma i0 i1"
    ).split()
}


def unary(node, inputs, outputs):
    x, out = inputs[0], outputs[0]
    if out.numel() == 0:
        return
    code = _C_UNARY.get(node.op.name)
    if code is not None and x.dtype is out.dtype and x.dtype.code in (_fast.F32, _fast.F64):
        _fast.unary_nd(code, x.dtype.code, out._shape, address(x), x._strides, address(out), out._strides)
        return
    with np.errstate(all="ignore"):
        if node.op.name == "round_decimals":
            np_view(out)[...] = np.round(np_view(x), node.args[0])
        else:
            np_view(out)[...] = _UNARY_NP[node.op.name](np_view(x))


def frexp(node, inputs, outputs):
    """x = mantissa * 2^exponent (numpy's frexp: 0, inf and nan keep themselves with exponent 0, as torch)."""
    m, e = (np_view(o) for o in outputs)
    if m.size == 0:
        return
    mant, ex = np.frexp(np_view(inputs[0]))
    m[...] = mant
    e[...] = ex
