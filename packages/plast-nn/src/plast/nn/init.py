"""plast.nn.init: in-place initializers with torch's formulas, drawing from plast's generator (Philox).

Every function fills its tensor in place under no_grad and returns it. The distributions are torch's; the
numbers differ from torch's for the same seed (plast's generator is counter-based Philox, not torch's).
"""

import math
import warnings

import numpy as np

import plast


def _no_grad_fill(tensor, fn):
    with plast.no_grad():
        return fn(tensor)


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for an activation (torch's table): 1 for linear/conv/sigmoid, 5/3 for tanh,
    sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu, 3/4 for selu.

    >>> round(plast.nn.init.calculate_gain("relu"), 4)
    1.4142
    """
    linear_fns = [
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    ]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight laid out as torch lays them: [out, in, *kernel]."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b).

    >>> w = plast.nn.init.uniform_(plast.empty(3, 5), -0.1, 0.1)
    >>> bool((w.abs() <= 0.1).all())
    True
    """
    return _no_grad_fill(tensor, lambda t: t.uniform_(a, b, generator=generator))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2).

    >>> plast.nn.init.normal_(plast.empty(2, 2), 0.0, 0.02).shape
    plast.Size([2, 2])
    """
    return _no_grad_fill(tensor, lambda t: t.normal_(mean, std, generator=generator))


def constant_(tensor, val):
    """Fill with `val`.

    >>> plast.nn.init.constant_(plast.empty(2), 0.5).tolist()
    [0.5, 0.5]
    """
    return _no_grad_fill(tensor, lambda t: t.fill_(val))


def zeros_(tensor):
    """Fill with zeros.

    >>> plast.nn.init.zeros_(plast.empty(2)).tolist()
    [0.0, 0.0]
    """
    return constant_(tensor, 0.0)


def ones_(tensor):
    """Fill with ones.

    >>> plast.nn.init.ones_(plast.empty(2)).tolist()
    [1.0, 1.0]
    """
    return constant_(tensor, 1.0)


def _ndtri(p):
    """Inverse of the standard normal CDF (Acklam's rational approximation, relative error < 1.2e-9)."""
    a = (
        -3.969683028665376e01,
        2.209460984245205e02,
        -2.759285104469687e02,
        1.383577518672690e02,
        -3.066479806614716e01,
        2.506628277459239e00,
    )
    b = (
        -5.447609879822406e01,
        1.615858368580409e02,
        -1.556989798598866e02,
        6.680131188771972e01,
        -1.328068155288572e01,
    )
    c = (
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e00,
        -2.549732539343734e00,
        4.374664141464968e00,
        2.938163982698783e00,
    )
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    p = np.clip(p, 1e-300, 1 - 1e-16)
    out = np.empty_like(p)
    lo, hi = p < 0.02425, p > 1 - 0.02425
    mid = ~(lo | hi)
    q = p[mid] - 0.5
    r = q * q
    out[mid] = (
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
        * q
        / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    )
    for mask, sign, pp in ((lo, 1.0, p[lo]), (hi, -1.0, 1 - p[hi])):
        q = np.sqrt(-2 * np.log(pp))
        out[mask] = (
            sign
            * (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
            / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
        )
    return out


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) truncated to [a, b] (inverse-CDF sampling, as torch does).

    >>> w = plast.nn.init.trunc_normal_(plast.empty(100), std=1.0, a=-0.5, b=0.5)
    >>> bool((w.abs() <= 0.5).all())
    True
    """
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may be "
            "incorrect.",
            stacklevel=2,
        )

    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    with plast.no_grad():
        u = plast.empty(tensor.shape, dtype=plast.float64)
        if u.numel():
            u.uniform_(lo, hi, generator=generator)
        vals = np.clip(mean + std * _ndtri(u.numpy()), a, b)
        tensor.copy_(plast.tensor(vals, dtype=plast.float64, device=tensor.device))
    return tensor


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-r, r) with r = gain * sqrt(6 / (fan_in + fan_out)).

    >>> plast.nn.init.xavier_uniform_(plast.empty(3, 5)).shape
    plast.Size([3, 5])
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).

    >>> plast.nn.init.xavier_normal_(plast.empty(3, 5)).shape
    plast.Size([3, 5])
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan). Linear's default is ``a=sqrt(5)``, i.e.
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

    >>> plast.nn.init.kaiming_uniform_(plast.empty(8, 2), a=5 ** 0.5).shape
    plast.Size([8, 2])
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std^2) with std = gain / sqrt(fan).

    >>> plast.nn.init.kaiming_normal_(plast.empty(8, 2), nonlinearity="relu").shape
    plast.Size([8, 2])
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "constant_",
    "zeros_",
    "ones_",
    "trunc_normal_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
]
