"""Resampling (torch.nn.functional.interpolate and the Upsample modules), written in plast ops.

Each spatial dim is resampled separately: the source indices (and, for linear modes, the two neighbours'
weights) are computed once in numpy with torch's formulas and single-precision arithmetic for float32 inputs,
then applied with index_select, so gradients come from autograd. Modes: 'nearest', 'nearest-exact', 'linear'
(3-D input), 'bilinear' (4-D input), with ``align_corners`` both ways; 'bicubic', 'trilinear' and 'area' raise
NotImplementedError, as does ``antialias=True``.
"""

import math

import numpy as np

import plast
from plast.errors import ShapeError

from .module import Module

_LINEAR = {"linear": 3, "bilinear": 4}
_NEAREST = ("nearest", "nearest-exact")


def _out_sizes(x, size, scale_factor, n, what):
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    spatial = tuple(x.shape[2:])
    if size is not None:
        sizes = [int(size)] * n if isinstance(size, (int, np.integer)) else [int(s) for s in size]
        if len(sizes) != n:
            raise ValueError(
                f"{what}: input with {n} spatial dims {spatial} needs {n} output sizes, got size={size}"
            )
        return sizes, [None] * n
    scales = [float(scale_factor)] * n if not isinstance(scale_factor, (tuple, list)) else list(scale_factor)
    if len(scales) != n:
        raise ValueError(
            f"{what}: input with {n} spatial dims {spatial} needs {n} scale factors, got scale_factor={scale_factor}"
        )
    return [math.floor(float(s) * f) for s, f in zip(spatial, scales)], scales


def _nearest_index(in_size, out_size, scale, exact, ft):
    if out_size == in_size:
        return np.arange(out_size)
    s = ft(1.0 / scale) if scale is not None and scale > 0 else ft(in_size) / ft(out_size)
    dst = np.arange(out_size, dtype=ft)
    src = np.floor(((dst + ft(0.5)) if exact else dst) * s).astype(np.int64)
    return np.minimum(src, in_size - 1)


def _linear_weights(in_size, out_size, scale, align_corners, ft):
    if align_corners:
        s = ft(in_size - 1) / ft(out_size - 1) if out_size > 1 else ft(0)
        src = np.arange(out_size, dtype=ft) * s
    else:
        s = ft(1.0 / scale) if scale is not None and scale > 0 else ft(in_size) / ft(out_size)
        src = np.maximum(s * (np.arange(out_size, dtype=ft) + ft(0.5)) - ft(0.5), ft(0))
    i0 = np.floor(src).astype(np.int64)
    i0 = np.minimum(i0, in_size - 1)
    i1 = np.where(i0 < in_size - 1, i0 + 1, i0)
    l1 = (src - i0.astype(ft)).astype(ft)
    return i0, i1, (ft(1) - l1).astype(ft), l1


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    """Resample the spatial dims of an (N, C, *spatial) input to ``size`` or by ``scale_factor``, as
    torch.nn.functional.interpolate.

    >>> from plast.nn.functional import interpolate
    >>> interpolate(plast.tensor([[[1.0, 2.0]]]), scale_factor=2).tolist()
    [[[1.0, 1.0, 2.0, 2.0]]]
    >>> interpolate(plast.tensor([[[1.0, 2.0]]]), size=3, mode="linear", align_corners=True).tolist()
    [[[1.0, 1.5, 2.0]]]
    """
    if antialias:
        raise NotImplementedError("interpolate(antialias=True) is not implemented in plast")
    if mode in ("bicubic", "trilinear", "area"):
        raise NotImplementedError(
            f"interpolate: mode {mode!r} is not implemented in plast (nearest, nearest-exact, linear, bilinear)"
        )
    if mode not in _NEAREST and mode not in _LINEAR:
        raise ValueError(
            f"interpolate: mode must be one of 'nearest', 'nearest-exact', 'linear', 'bilinear', got {mode!r}"
        )
    if mode in _NEAREST and align_corners is not None:
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
            "trilinear"
        )
    if input.ndim < 3:
        raise ShapeError(
            f"interpolate: expected an input of shape (N, C, *spatial), got {tuple(input.shape)}"
        )
    if mode in _LINEAR and input.ndim != _LINEAR[mode]:
        raise NotImplementedError(
            f"interpolate: mode {mode!r} needs a {_LINEAR[mode]}-D input, got {input.ndim}-D "
            f"{tuple(input.shape)}"
        )
    n = input.ndim - 2
    sizes, scales = _out_sizes(input, size, scale_factor, n, "interpolate")
    if recompute_scale_factor:
        scales = [None] * n
    ft = np.float64 if input.dtype == plast.float64 else np.float32
    x = input
    for k in range(n):
        dim = 2 + k
        in_size, out_size = input.shape[dim], sizes[k]
        if out_size <= 0:
            raise ValueError(f"interpolate: output sizes must be positive, got {sizes}")
        if mode in _NEAREST:
            idx = _nearest_index(in_size, out_size, scales[k], mode == "nearest-exact", ft)
            if not (out_size == in_size):
                x = x.index_select(dim, plast.tensor(idx, device=x.device))
            continue
        i0, i1, l0, l1 = _linear_weights(in_size, out_size, scales[k], bool(align_corners), ft)
        bshape = (out_size,) + (1,) * (input.ndim - dim - 1)
        w0 = plast.tensor(l0.reshape(bshape), dtype=x.dtype, device=x.device)
        w1 = plast.tensor(l1.reshape(bshape), dtype=x.dtype, device=x.device)
        x0 = x.index_select(dim, plast.tensor(i0, device=x.device))
        x1 = x.index_select(dim, plast.tensor(i1, device=x.device))
        x = x0 * w0 + x1 * w1
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """interpolate under its older name (torch.nn.functional.upsample)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


class Upsample(Module):
    """interpolate as a module (torch.nn.Upsample).

    >>> plast.nn.Upsample(scale_factor=2, mode="nearest")(plast.ones(1, 1, 2, 2)).shape
    plast.Size([1, 1, 4, 4])
    """

    def __init__(
        self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None
    ):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )

    def extra_repr(self):
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode='nearest' (torch.nn.UpsamplingNearest2d).

    >>> plast.nn.UpsamplingNearest2d(scale_factor=2)(plast.ones(1, 1, 2, 2)).shape
    plast.Size([1, 1, 4, 4])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode='bilinear', align_corners=True (torch.nn.UpsamplingBilinear2d).

    >>> plast.nn.UpsamplingBilinear2d(size=3)(plast.ones(1, 1, 2, 2)).shape
    plast.Size([1, 1, 3, 3])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
