"""In-place variants (``add_``, ``mul_``, ``x += y``, ``zero_``, ``fill_``, ``copy_``, ``uniform_``, ``normal_``).

The mechanism is graph/inplace.py: each op here only says how the new value is computed from the old one.
"""

from __future__ import annotations

import numbers

from .._core import dtypes
from .._core import grad_mode as autograd_state
from .._core._structs import TensorBase
from .._core.errors import ShapeError
from .._core.hints import Number, TensorOrNumber
from .._core.shapes import broadcast_shapes
from ..graph import inplace as _engine
from ..graph.inplace import write_inplace
from ..kernels.cpu.kernels import np_view
from ..kernels.host import host_array, write_host
from . import composites, movement, pointwise, random, special, view_writes
from .creation import _fill_random_cuda, empty
from .device import to_device
from .elementwise import add, div, mul, sub
from .factory import scalar_tensor
from .pointwise import clamp, masked_fill
from .pointwise import pow as _pow


def apply_inplace(t, fn, opname):
    """Make `t` hold ``fn(old value of t)``, cast to t's dtype (``x += 0.5`` on an int tensor stays int, as in
    torch), and return t (the mechanism: graph/inplace.py)."""
    return _engine.apply_inplace(t, lambda old: movement.cast(fn(old), t.dtype), opname, view_writes)


def add_(t: TensorBase, other: TensorOrNumber, *, alpha: Number = 1) -> TensorBase:
    return apply_inplace(t, lambda old: add(old, other, alpha=alpha), "add_")


def sub_(t: TensorBase, other: TensorOrNumber, *, alpha: Number = 1) -> TensorBase:
    return apply_inplace(t, lambda old: sub(old, other, alpha=alpha), "sub_")


def mul_(t: TensorBase, other: TensorOrNumber) -> TensorBase:
    return apply_inplace(t, lambda old: mul(old, other), "mul_")


def div_(t: TensorBase, other: TensorOrNumber) -> TensorBase:
    if not t.dtype.is_floating_point:
        raise RuntimeError(
            f"div_: the result of true division is float, which can't be stored in {t.dtype} in place"
        )
    return apply_inplace(t, lambda old: div(old, other), "div_")


def clamp_(t: TensorBase, min: TensorOrNumber | None = None, max: TensorOrNumber | None = None) -> TensorBase:  # noqa: A002

    return apply_inplace(t, lambda old: clamp(old, min, max), "clamp_")


def masked_fill_(t: TensorBase, mask: TensorBase, value: TensorOrNumber) -> TensorBase:
    return apply_inplace(t, lambda old: masked_fill(old, mask, value), "masked_fill_")


def pow_(t: TensorBase, exponent: TensorOrNumber) -> TensorBase:
    return apply_inplace(t, lambda old: _pow(old, exponent), "pow_")


def _float_inplace(t, fn, opname, *args):
    """t = fn(t, *args) for a function whose result is float: an integer or bool t can't hold it, and torch
    raises rather than truncate."""
    if not t.dtype.is_floating_point:
        raise RuntimeError(f"{opname}: the result is float, which can't be stored in {t.dtype} in place")
    return apply_inplace(t, lambda old: fn(old, *args), opname)


def asin_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.asin, "asin_")


def acos_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.acos, "acos_")


def atan_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.atan, "atan_")


def asinh_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.asinh, "asinh_")


def acosh_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.acosh, "acosh_")


def atanh_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.atanh, "atanh_")


def atan2_(t: TensorBase, other: TensorOrNumber) -> TensorBase:
    return _float_inplace(t, special.atan2, "atan2_", other)


def erfc_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.erfc, "erfc_")


def erfinv_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.erfinv, "erfinv_")


def lgamma_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.lgamma, "lgamma_")


def digamma_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.digamma, "digamma_")


def i0_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, special.i0, "i0_")


def igamma_(t: TensorBase, other: TensorBase) -> TensorBase:
    return _float_inplace(t, special.igamma, "igamma_", other)


def igammac_(t: TensorBase, other: TensorBase) -> TensorBase:
    return _float_inplace(t, special.igammac, "igammac_", other)


def polygamma_(t: TensorBase, n: int) -> TensorBase:
    return _float_inplace(t, lambda old: special.polygamma(n, old), "polygamma_")


def copysign_(t: TensorBase, other: TensorOrNumber) -> TensorBase:
    return _float_inplace(t, special.copysign, "copysign_", other)


def nextafter_(t: TensorBase, other: TensorBase) -> TensorBase:
    return _float_inplace(t, special.nextafter, "nextafter_", other)


def nan_to_num_(
    t: TensorBase, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> TensorBase:
    return apply_inplace(t, lambda old: composites.nan_to_num(old, nan, posinf, neginf), "nan_to_num_")


def sinc_(t: TensorBase) -> TensorBase:
    return _float_inplace(t, composites.sinc, "sinc_")


def ldexp_(t: TensorBase, other: TensorBase) -> TensorBase:
    return _float_inplace(t, composites.ldexp, "ldexp_", other)


def heaviside_(t: TensorBase, values: TensorOrNumber) -> TensorBase:
    return apply_inplace(t, lambda old: composites.heaviside(old, values), "heaviside_")


def float_power_(t: TensorBase, exponent: TensorOrNumber) -> TensorBase:
    # the result is float64: torch keeps it only in a float64 tensor
    if t.dtype is not dtypes.float64:
        raise RuntimeError(
            f"float_power_: the result is float64, which can't be stored in {t.dtype} in place"
        )
    return apply_inplace(t, lambda old: composites.float_power(old, exponent), "float_power_")


def mvlgamma_(t: TensorBase, p: int) -> TensorBase:
    return _float_inplace(t, composites.mvlgamma, "mvlgamma_", p)


def gcd_(t: TensorBase, other: TensorOrNumber) -> TensorBase:
    return apply_inplace(t, lambda old: pointwise.gcd(old, other), "gcd_")


def lcm_(t: TensorBase, other: TensorOrNumber) -> TensorBase:
    return apply_inplace(t, lambda old: pointwise.lcm(old, other), "lcm_")


def bitwise_left_shift_(t: TensorBase, other: TensorOrNumber) -> TensorBase:
    return apply_inplace(t, lambda old: pointwise.bitwise_left_shift(old, other), "bitwise_left_shift_")


def bitwise_right_shift_(t: TensorBase, other: TensorOrNumber) -> TensorBase:
    return apply_inplace(t, lambda old: pointwise.bitwise_right_shift(old, other), "bitwise_right_shift_")


def fill_(t: TensorBase, value: TensorOrNumber) -> TensorBase:
    if isinstance(value, TensorBase):
        if value.numel() != 1:
            raise ValueError(
                f"fill_ expects a number or a one-element tensor, got shape {tuple(value.shape)}"
            )
        src = movement.reshape(movement.cast(value, t.dtype), ())
    elif isinstance(value, numbers.Number):
        src = scalar_tensor(value, t.dtype, t.device)
    else:
        raise TypeError(f"fill_ expects a number, got {type(value).__name__}")
    return apply_inplace(t, lambda old: movement.expand(src, t.shape), "fill_")


def zero_(t: TensorBase) -> TensorBase:
    return fill_(t, 0)


def copy_(t: TensorBase, src: TensorBase) -> TensorBase:
    """Copy src's values into t (broadcasting src to t's shape, casting to t's dtype), from any device."""
    if not isinstance(src, TensorBase):
        raise TypeError(f"copy_ expects a tensor, got {type(src).__name__}")
    if src.device != t.device:
        return _copy_across(t, src)
    return apply_inplace(t, lambda old: movement.expand(movement.cast(src, t.dtype), t.shape), "copy_")


def _copy_across(t, src):
    """copy_ from another device. Outside a graph the values cross once, straight into t's memory (host values
    are broadcast and cast on the host); otherwise src moves by the ``to_device`` op, so the gradient goes back
    to src's device, and the copy is an ordinary in-place op on t's device."""
    if broadcast_shapes(tuple(src.shape), tuple(t.shape), op="copy_") != tuple(t.shape):
        raise ShapeError(
            f"copy_: src of shape {tuple(src.shape)} can't be broadcast to the destination's shape "
            f"{tuple(t.shape)}"
        )
    if not (src.requires_grad and autograd_state.is_grad_enabled()):
        if write_inplace(t, lambda dst: _write_across(dst, src), "copy_") is not None:
            return t
    # the cast runs on the CPU side: before the transfer to a GPU, after the transfer from one
    if t.device.type == "cpu":
        moved = to_device(src, t.device)
    else:
        moved = to_device(movement.cast(src, t.dtype), t.device)
    return apply_inplace(t, lambda old: movement.expand(movement.cast(moved, t.dtype), t.shape), "copy_")


def _write_across(dst, src):
    """dst[...] = src for realized tensors on two devices, one of them the CPU."""
    src._realized()
    if dst.device.type != "cpu":
        write_host(dst, host_array(src))  # broadcast and cast on the host, then one host-to-device copy
        return
    if not dst.numel():
        return
    view = np_view(dst)
    if src.dtype is dst.dtype and tuple(src.shape) == tuple(dst.shape) and view.flags.c_contiguous:
        from ..kernels.cuda import transfer

        transfer.to_host_array(src, out=view)  # device to host, straight into dst's memory
    else:
        view[...] = host_array(src)  # numpy's assignment broadcasts and casts, as the CPU cast kernel does


def _random_(t, kind, p1, p2, generator, opname):
    """Fill t from the Philox stream of `generator` on t's device (the CUDA kernel draws the CPU's numbers for the
    same seed). A contiguous t outside any graph is filled in its own memory; otherwise a fresh tensor is drawn
    and copied in."""
    if not t.dtype.is_floating_point:
        raise TypeError(f"{opname} needs a floating point tensor, got {t.dtype}")
    fill = _fill_random_cuda if t.device.type == "cuda" else random.fill_tensor
    if t.grad_fn is None:
        t._realized()  # its layout is final only once it has memory
        if t.is_contiguous():
            if write_inplace(t, lambda dst: fill(dst, kind, p1, p2, generator), opname) is not None:
                return t
    fresh = fill(empty(t.shape, dtype=t.dtype, device=t.device), kind, p1, p2, generator)
    return apply_inplace(t, lambda old: fresh, opname)


def uniform_(
    t: TensorBase, a: float = 0.0, b: float = 1.0, *, generator: random.Generator | None = None
) -> TensorBase:
    return _random_(t, "uniform", float(a), float(b), generator, "uniform_")


def normal_(
    t: TensorBase, mean: float = 0.0, std: float = 1.0, *, generator: random.Generator | None = None
) -> TensorBase:
    return _random_(t, "normal", float(mean), float(std), generator, "normal_")


__all__ = []
