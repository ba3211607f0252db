"""Resampling (torch.nn.functional.interpolate and the Upsample modules), written in plast ops.

Each spatial dim is resampled separately (every mode torch has without antialiasing is separable): the source
indices and their weights are computed once in numpy with torch's formulas, in single precision for float32
inputs, then applied with index_select (nearest: one tap; linear: two; cubic: four, Keys' kernel with
a = -0.75 and indices clamped at the borders as torch's) or, for 'area', as a (out, in) averaging matrix over
torch's adaptive-pooling windows; gradients come from autograd. Modes: 'nearest', 'nearest-exact', 'linear'
(3-D input), 'bilinear' and 'bicubic' (4-D), 'trilinear' (5-D), 'area' (3- to 5-D), with ``align_corners``
both ways where torch takes it. ``antialias=True`` raises NotImplementedError.
"""

import math

import numpy as np

import plast
from plast.errors import ShapeError

from .module import Module

_INTERPOLATING = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}  # mode -> the input's ndim
_NEAREST = ("nearest", "nearest-exact")
_MODES = "'nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic', 'trilinear', 'area'"
_CUBIC_A = -0.75  # torch's (and OpenCV's) Keys kernel parameter


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


def _source_coords(in_size, out_size, scale, align_corners, ft, cubic):
    """torch's area_pixel_compute_source_index over every output index (cubic: no clamp at 0)."""
    if align_corners:
        s = ft(in_size - 1) / ft(out_size - 1) if out_size > 1 else ft(0)
        return np.arange(out_size, dtype=ft) * s
    s = ft(1.0 / scale) if scale is not None and scale > 0 else ft(in_size) / ft(out_size)
    src = s * (np.arange(out_size, dtype=ft) + ft(0.5)) - ft(0.5)
    return src if cubic else np.maximum(src, ft(0))


def _linear_taps(in_size, out_size, scale, align_corners, ft):
    """[(source indices, weights)] of the two linear taps of every output index."""
    src = _source_coords(in_size, out_size, scale, align_corners, ft, cubic=False)
    i0 = np.floor(src).astype(np.int64)
    i0 = np.minimum(i0, in_size - 1)
    i1 = np.where(i0 < in_size - 1, i0 + 1, i0)
    l1 = (src - i0.astype(ft)).astype(ft)
    return [(i0, (ft(1) - l1).astype(ft)), (i1, l1)]


def _cubic_taps(in_size, out_size, scale, align_corners, ft):
    """[(source indices, weights)] of the four cubic taps (at floor(src) - 1 .. + 2, clamped to the input)."""
    src = _source_coords(in_size, out_size, scale, align_corners, ft, cubic=True)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    t = np.clip(src - i0.astype(ft), ft(0), ft(1)).astype(ft)
    a = ft(_CUBIC_A)

    def near(x):  # |x| <= 1
        return ((a + ft(2)) * x - (a + ft(3))) * x * x + ft(1)

    def far(x):  # 1 < |x| < 2
        return ((a * x - ft(5) * a) * x + ft(8) * a) * x - ft(4) * a

    weights = [far(t + ft(1)), near(t), near(ft(1) - t), far(ft(2) - t)]
    return [(np.clip(i0 - 1 + j, 0, in_size - 1), w.astype(ft)) for j, w in enumerate(weights)]


def _area_matrix(in_size, out_size, ft):
    """(out, in) matrix averaging torch's adaptive-pooling window of every output index."""
    i = np.arange(out_size)
    start = (i * in_size) // out_size
    end = -((-(i + 1) * in_size) // out_size)  # ceil
    m = np.zeros((out_size, in_size), dtype=ft)
    for o in range(out_size):
        m[o, start[o] : end[o]] = ft(1) / ft(end[o] - start[o])
    return m


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
    if mode not in _NEAREST and mode not in _INTERPOLATING and mode != "area":
        raise ValueError(f"interpolate: mode must be one of {_MODES}, got {mode!r}")
    if mode not in _INTERPOLATING and align_corners is not None:
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
            "trilinear"
        )
    if input.ndim < 3:
        raise ShapeError(
            f"interpolate: expected an input of shape (N, C, *spatial), got {tuple(input.shape)}"
        )
    if mode in _INTERPOLATING and input.ndim != _INTERPOLATING[mode]:
        raise NotImplementedError(
            f"interpolate: mode {mode!r} needs a {_INTERPOLATING[mode]}-D input, got {input.ndim}-D "
            f"{tuple(input.shape)}"
        )
    if mode == "area" and input.ndim > 5:
        raise NotImplementedError(f"interpolate: mode 'area' takes 3-D to 5-D input, got {input.ndim}-D")
    n = input.ndim - 2
    sizes, scales = _out_sizes(input, size, scale_factor, n, "interpolate")
    if recompute_scale_factor or mode == "area":  # area is adaptive pooling to the output size: no scale
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
        if mode == "area":
            if out_size != in_size:
                m = plast.tensor(_area_matrix(in_size, out_size, ft), dtype=x.dtype, device=x.device)
                x = (x.movedim(dim, -1) @ m.T).movedim(-1, dim)
            continue
        taps = _cubic_taps if mode == "bicubic" else _linear_taps
        bshape = (out_size,) + (1,) * (input.ndim - dim - 1)
        out = None
        for idx, w in taps(in_size, out_size, scales[k], bool(align_corners), ft):
            term = x.index_select(dim, plast.tensor(idx, device=x.device)) * plast.tensor(
                w.reshape(bshape), dtype=x.dtype, device=x.device
            )
            out = term if out is None else out + term
        x = out
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
