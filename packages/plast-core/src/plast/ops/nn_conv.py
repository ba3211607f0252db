"""conv2d, max_pool2d and avg_pool2d on NCHW tensors, with torch's arguments and output sizes.

Every backward row is linear in its gradient input, so its own backward is another row of this family
(conv's input/weight backward are each other's adjoints; max pooling's scatter and gather likewise; average
pooling's backward is undone by average pooling): double backward works without special cases.
"""

from __future__ import annotations

from .._core import autocast_state as _ac
from .._core import dtypes
from .._core.errors import DTypeError, ShapeError
from .._core.hints import TensorBase
from ..graph._graph import record
from ..kernels.cpu import kernels_nn as K
from . import autocast as _autocast
from . import movement
from . import reduce as R
from .nn import _same_device, _tensor_check
from .registry import register


def _pair(v, name, op, allow_zero=False):
    if isinstance(v, int) and not isinstance(v, bool):
        v = (v, v)
    v = tuple(v)
    if len(v) == 1:
        v = (v[0], v[0])
    if len(v) != 2 or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {v!r}")
    if any(i < 0 or (i == 0 and not allow_zero) for i in v):
        raise ValueError(f"{op}: {name} must be {'non-negative' if allow_zero else 'positive'}, got {v}")
    return v


def _batched(x, op):
    """(C, H, W) inputs are treated as a batch of one, as in torch."""
    _tensor_check(x, op)
    if x.ndim == 3:
        return movement.reshape(x, (1,) + tuple(x.shape)), True
    if x.ndim != 4:
        raise ShapeError(f"{op}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got {tuple(x.shape)}")
    return x, False


def _unbatch(out, unbatched):
    return movement.reshape(out, tuple(out.shape[1:])) if unbatched else out


# ---- conv2d ----


def _conv_bw(node, g):
    x, w = node.inputs[:2]
    stride, pads, dil, groups = node.args
    gx = _conv_input_grad(g, w, tuple(x.shape), node.args)
    gw = _conv_weight_grad(g, x, tuple(w.shape), node.args)
    gb = R.sum(g, (0, 2, 3)) if len(node.inputs) > 2 else None
    return (gx, gw) + ((gb,) if len(node.inputs) > 2 else ())


def _conv_input_grad(g, w, xshape, conv_args):
    return record(CONV_BW_INPUT, (g, w), (xshape,) + conv_args, [(xshape, g.dtype)], g.device)[0]


def _conv_weight_grad(g, x, wshape, conv_args):
    return record(CONV_BW_WEIGHT, (g, x), (wshape,) + conv_args, [(wshape, g.dtype)], g.device)[0]


def _conv_fwd(x, w, conv_args, oshape):
    return record(CONV, (x, w), conv_args, [(oshape, x.dtype)], x.device)[0]


def _conv_bw_input_bw(node, h):
    # gx = A^T(g, w) is bilinear: d/dg is the forward conv of h, d/dw is the weight gradient with h as input
    g, w = node.inputs
    conv_args = node.args[1:]
    return _conv_fwd(h, w, conv_args, tuple(g.shape)), _conv_weight_grad(g, h, tuple(w.shape), conv_args)


def _conv_bw_weight_bw(node, h):
    g, x = node.inputs
    conv_args = node.args[1:]
    return _conv_fwd(x, h, conv_args, tuple(g.shape)), _conv_input_grad(g, h, tuple(x.shape), conv_args)


CONV = register("conv2d", cpu=K.conv2d, backward=_conv_bw)
CONV_BW_INPUT = register("conv2d_backward_input", cpu=K.conv2d_backward_input, backward=_conv_bw_input_bw)
CONV_BW_WEIGHT = register("conv2d_backward_weight", cpu=K.conv2d_backward_weight, backward=_conv_bw_weight_bw)


def _conv_padding(padding, k, dil, stride, op):
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding == "same":
            if stride != (1, 1):
                raise ValueError(
                    f"{op}: padding='same' is not supported for strided convolutions (stride={stride})"
                )
            pads = []
            for kk, d in zip(k, dil):
                total = d * (kk - 1)
                pads += [total // 2, total - total // 2]  # the extra one goes at the end, as in torch
            return tuple(pads)
        raise ValueError(f"{op}: padding must be 'valid', 'same', an int or a pair, got {padding!r}")
    ph, pw = _pair(padding, "padding", op, allow_zero=True)
    return (ph, ph, pw, pw)


def conv2d(
    input: TensorBase,
    weight: TensorBase,
    bias: TensorBase | None = None,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] | str = 0,
    dilation: int | tuple[int, int] = 1,
    groups: int = 1,
) -> TensorBase:
    """2-D cross-correlation over NCHW input with a weight of shape (out_channels, in_channels/groups, kH, kW),
    as torch.nn.functional.conv2d (stride, padding incl. 'same'/'valid', dilation, groups).

    >>> plast.conv2d(plast.ones(1, 1, 4, 4), plast.ones(2, 1, 3, 3), padding=1).shape
    plast.Size([1, 2, 4, 4])
    """
    if _ac.active:  # autocast: on its LOWER list
        input, weight, bias = _autocast.lower_args((input, weight, bias)) or (input, weight, bias)
    op = "conv2d"
    x, unbatched = _batched(input, op)
    _tensor_check(weight, op, "weight")
    _same_device(op, x, weight, bias)
    if weight.ndim != 4:
        raise ShapeError(
            f"{op}: weight must be 4-D (out_channels, in_channels/groups, kH, kW), got {tuple(weight.shape)}"
        )
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    if c != cg * groups:
        raise ShapeError(
            f"{op}: input {tuple(x.shape)} has {c} channels but weight {tuple(weight.shape)} with groups={groups} "
            f"expects {cg * groups} (= weight.shape[1] * groups)"
        )
    if o % groups:
        raise ShapeError(f"{op}: out_channels ({o}) must be divisible by groups ({groups})")
    stride = _pair(stride, "stride", op)
    dil = _pair(dilation, "dilation", op)
    pads = _conv_padding(padding, (kh, kw), dil, stride, op)
    ho = (h + pads[0] + pads[1] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w + pads[2] + pads[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    if ho <= 0 or wo <= 0 or kh == 0 or kw == 0:
        raise ShapeError(
            f"{op}: the output would be empty ({ho}x{wo}): input {h}x{w} (padding {pads}) is smaller than the "
            f"dilated kernel {dil[0] * (kh - 1) + 1}x{dil[1] * (kw - 1) + 1}"
        )
    dt = dtypes.promote(x.dtype, weight.dtype)
    if not dt.is_floating_point:
        dt = dtypes.default_float
    ins = (movement.cast(x, dt), movement.cast(weight, dt))
    if bias is not None:
        _tensor_check(bias, op, "bias")
        if tuple(bias.shape) != (o,):
            raise ShapeError(f"{op}: bias must have shape ({o},), got {tuple(bias.shape)}")
        ins += (movement.cast(bias, dt),)
    out = record(CONV, ins, (stride, pads, dil, groups), [((n, o, ho, wo), dt)], x.device)[0]
    return _unbatch(out, unbatched)


# ---- pooling ----


def _pool_size(size, k, s, p, d, ceil_mode):
    eff = d * (k - 1) + 1
    if ceil_mode:
        out = -(-(size + 2 * p - eff) // s) + 1
        if (out - 1) * s >= size + p:  # the last window must start inside the input or the left padding
            out -= 1
    else:
        out = (size + 2 * p - eff) // s + 1
    return out


def _pool_args(x, kernel_size, stride, padding, dilation, ceil_mode, op):
    k = _pair(kernel_size, "kernel_size", op)
    empty = stride is None or (not isinstance(stride, int) and len(tuple(stride)) == 0)
    s = k if empty else _pair(stride, "stride", op)
    p = _pair(padding, "padding", op, allow_zero=True)
    d = _pair(dilation, "dilation", op)
    for i in range(2):
        if p[i] > k[i] // 2:
            raise ValueError(f"{op}: padding {p} should be at most half of the kernel size {k}")
    h, w = x.shape[2:]
    ho = _pool_size(h, k[0], s[0], p[0], d[0], ceil_mode)
    wo = _pool_size(w, k[1], s[1], p[1], d[1], ceil_mode)
    if ho <= 0 or wo <= 0:
        raise ShapeError(
            f"{op}: the output would be empty ({ho}x{wo}) for input {tuple(x.shape)} with kernel {k}, stride {s}, "
            f"padding {p}, dilation {d}"
        )
    return k, s, p, d, (ho, wo)


def _pool_input(input, op):
    x, unbatched = _batched(input, op)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point input, got {x.dtype}")
    return x, unbatched


def _max_pool_bw(node, g, g_idx=None):
    x = node.inputs[0]
    idx = _max_pool_indices(node)
    return (_max_pool_scatter(g, idx, tuple(x.shape)),)


def _max_pool_indices(node):
    t = node.outputs[1]()
    if t is None:
        t = record(node.op, node.inputs, node.args, node.specs, node.inputs[0].device)[1]
    return t


def _max_pool_scatter(g, idx, xshape):
    return record(MAX_POOL_BW, (g, idx), (xshape,), [(xshape, g.dtype)], g.device)[0]


def _max_pool_scatter_bw(node, h):
    g, idx = node.inputs
    return record(POOL_GATHER, (h, idx), (), [(tuple(g.shape), h.dtype)], h.device)[0], None


def _pool_gather_bw(node, h):
    src, idx = node.inputs
    return _max_pool_scatter(h, idx, tuple(src.shape)), None


MAX_POOL = register("max_pool2d", cpu=K.max_pool2d, backward=_max_pool_bw, n_outputs=2, saves_inputs=False)
MAX_POOL_BW = register("max_pool2d_backward", cpu=K.max_pool2d_backward, backward=_max_pool_scatter_bw)
POOL_GATHER = register("max_pool2d_gather", cpu=K.pool_gather, backward=_pool_gather_bw)


def max_pool2d(
    input: TensorBase,
    kernel_size: int | tuple[int, int],
    stride: int | tuple[int, int] | None = None,
    padding: int | tuple[int, int] = 0,
    dilation: int | tuple[int, int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> TensorBase | tuple[TensorBase, TensorBase]:
    """2-D max pooling over NCHW input, as torch.nn.functional.max_pool2d; with return_indices=True also the
    flat index (into each H*W plane) of every maximum.

    >>> plast.max_pool2d(plast.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    op = "max_pool2d"
    x, unbatched = _pool_input(input, op)
    k, s, p, d, (ho, wo) = _pool_args(x, kernel_size, stride, padding, dilation, ceil_mode, op)
    oshape = tuple(x.shape[:2]) + (ho, wo)
    out, idx = record(MAX_POOL, (x,), (k, s, p, d), [(oshape, x.dtype), (oshape, dtypes.int64)], x.device)
    out, idx = _unbatch(out, unbatched), _unbatch(idx, unbatched)
    return (out, idx) if return_indices else out


def _avg_pool_bw(node, g):
    x = node.inputs[0]
    return (_avg_pool_adjoint(g, tuple(x.shape), node.args),)


def _avg_pool_adjoint(g, xshape, pool_args):
    return record(AVG_POOL_BW, (g,), (xshape,) + pool_args, [(xshape, g.dtype)], g.device)[0]


def _avg_pool_bw_bw(node, h):
    g = node.inputs[0]
    return (record(AVG_POOL, (h,), node.args[1:], [(tuple(g.shape), h.dtype)], h.device)[0],)


AVG_POOL = register("avg_pool2d", cpu=K.avg_pool2d, backward=_avg_pool_bw, saves_inputs=False)
AVG_POOL_BW = register(
    "avg_pool2d_backward", cpu=K.avg_pool2d_backward, backward=_avg_pool_bw_bw, saves_inputs=False
)


def avg_pool2d(
    input: TensorBase,
    kernel_size: int | tuple[int, int],
    stride: int | tuple[int, int] | None = None,
    padding: int | tuple[int, int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> TensorBase:
    """2-D average pooling over NCHW input, as torch.nn.functional.avg_pool2d.

    >>> plast.avg_pool2d(plast.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
    [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    op = "avg_pool2d"
    x, unbatched = _pool_input(input, op)
    if divisor_override is not None and (not isinstance(divisor_override, int) or divisor_override <= 0):
        raise ValueError(f"{op}: divisor_override must be a positive int, got {divisor_override!r}")
    k, s, p, _, (ho, wo) = _pool_args(x, kernel_size, stride, padding, 1, ceil_mode, op)
    oshape = tuple(x.shape[:2]) + (ho, wo)
    args = (k, s, p, bool(count_include_pad), divisor_override)
    out = record(AVG_POOL, (x,), args, [(oshape, x.dtype)], x.device)[0]
    return _unbatch(out, unbatched)


__all__ = ["conv2d", "max_pool2d", "avg_pool2d"]
