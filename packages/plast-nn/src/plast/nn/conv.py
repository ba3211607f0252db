"""Convolutions with torch.nn's signatures, weights and init: Conv2d, Conv1d, ConvTranspose1d, ConvTranspose2d,
and the functional conv1d, conv_transpose1d, conv_transpose2d.

conv1d is plast-core's conv2d over a unit height. A transposed convolution is the convolution whose gradient
it is: the input is spread out by the stride (zeros between its elements), padded by
``dilation * (kernel - 1) - padding`` (cropped where that is negative) plus ``output_padding`` on the far side,
and convolved with stride 1 by the kernel flipped and with its in/out channels swapped per group. The zeros cost
multiplications a col2im kernel would skip (a fused core op is still to do); the result and its gradients are
exact."""

import math

import plast
from plast.errors import ShapeError

from . import functional as F
from . import init
from .linear import _factory_dtype
from .module import Module
from .parameter import Parameter


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _single(v):
    return (v,) if isinstance(v, int) else tuple(v)


class Conv2d(Module):
    """2-D cross-correlation over (N, C, H, W) or (C, H, W) inputs; stride, padding (int, pair, ``'same'``,
    ``'valid'``), dilation, groups and ``padding_mode`` ('zeros', 'reflect', 'replicate', 'circular') as torch.
    Init as torch: weight kaiming_uniform_(a=sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

    >>> conv = plast.nn.Conv2d(3, 8, 3, padding=1)
    >>> tuple(conv.weight.shape), conv(plast.ones(2, 3, 5, 5)).shape
    ((8, 3, 3, 3), plast.Size([2, 8, 5, 5]))
    """

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_modes = ("zeros", "reflect", "replicate", "circular")
        if padding_mode not in valid_modes:
            raise ValueError(
                f"padding_mode must be one of {valid_modes}, but got padding_mode='{padding_mode}'"
            )
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of ('valid', 'same')")
            if padding == "same" and any(s != 1 for s in _pair(stride)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.dilation = _pair(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(self.padding, str):
            # (left, right, top, bottom) for F.pad, as torch computes them for 'same'
            pads = [0, 0, 0, 0]
            if self.padding == "same":
                for d, k, i in zip(self.dilation, self.kernel_size, (1, 0)):
                    total = d * (k - 1)
                    left = total // 2
                    pads[2 * i], pads[2 * i + 1] = left, total - left
            self._reversed_padding_repeated_twice = tuple(pads)
        else:
            ph, pw = self.padding
            self._reversed_padding_repeated_twice = (pw, pw, ph, ph)
        self.weight = Parameter(plast.empty(out_channels, in_channels // groups, *self.kernel_size, dtype=dt))
        if bias:
            self.bias = Parameter(plast.empty(out_channels, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        if input.ndim not in (3, 4) or input.shape[-3] != self.in_channels:
            c = self.in_channels
            raise ShapeError(
                f"{self!r}: expected an input of shape (N, {c}, H, W) or ({c}, H, W), got {tuple(input.shape)}"
            )
        if self.padding_mode != "zeros":
            x = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return F.conv2d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation of (N, C_in, L) or (C_in, L) with weight (C_out, C_in / groups, K)
    (torch.nn.functional.conv1d); padding an int, a 1-tuple, 'same' or 'valid'.

    >>> plast.nn.functional.conv1d(plast.ones(1, 1, 4), plast.ones(1, 1, 2)).tolist()
    [[[2.0, 2.0, 2.0]]]
    """
    if input.ndim not in (2, 3) or weight.ndim != 3:
        raise ShapeError(
            f"conv1d: expected input (N, C, L) or (C, L) and weight (C_out, C_in / groups, K), got input "
            f"{tuple(input.shape)} and weight {tuple(weight.shape)}"
        )
    (s,), (d,) = _single(stride), _single(dilation)
    pad = padding if isinstance(padding, str) else (0, _single(padding)[0])
    y = F.conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, s), pad, (1, d), groups)
    return y.squeeze(-2)


def _spread(x, dim, s):
    """Insert s - 1 zeros between consecutive elements of x along dim (negative)."""
    if s == 1:
        return x
    n = x.shape[dim]
    xu = x.unsqueeze(dim)  # (..., n, 1, ...): the new axis right after dim
    zs = list(xu.shape)
    zs[dim] = s - 1
    spread = plast.cat([xu, plast.zeros(zs, dtype=x.dtype, device=x.device)], dim=dim)
    out = list(x.shape)
    out[dim] = n * s
    return spread.reshape(out).narrow(x.ndim + dim, 0, (n - 1) * s + 1)


def _pad_or_crop(x, dim, before, after):
    """Pad (positive) or crop (negative) x along dim (negative) by `before` and `after` elements."""
    n = x.shape[dim]
    lo, hi = max(-before, 0), n - max(-after, 0)
    if lo or hi != n:
        x = x.narrow(x.ndim + dim, lo, hi - lo)
    before, after = max(before, 0), max(after, 0)
    if before or after:
        pads = [0, 0] * (-dim - 1) + [before, after]
        x = F.pad(x, tuple(pads))
    return x


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 2-D convolution of (N, C_in, H, W) or (C_in, H, W) with weight
    (C_in, C_out / groups, kH, kW) (torch.nn.functional.conv_transpose2d); output size per dim
    ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    >>> plast.nn.functional.conv_transpose2d(plast.ones(1, 1, 2, 2), plast.ones(1, 1, 2, 2), stride=2).shape
    plast.Size([1, 1, 4, 4])
    """
    if input.ndim not in (3, 4) or weight.ndim != 4:
        raise ShapeError(
            f"conv_transpose2d: expected input (N, C_in, H, W) or (C_in, H, W) and weight "
            f"(C_in, C_out / groups, kH, kW), got input {tuple(input.shape)} and weight {tuple(weight.shape)}"
        )
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    cin, cout_g, kh, kw = weight.shape
    if x.shape[1] != cin or cin % groups:
        raise ShapeError(
            f"conv_transpose2d: input has {x.shape[1]} channels (shape {tuple(input.shape)}) but weight "
            f"{tuple(weight.shape)} expects {cin}, divisible by groups={groups}"
        )
    s, p, op, d = _pair(stride), _pair(padding), _pair(output_padding), _pair(dilation)
    for i in range(2):
        if op[i] >= max(s[i], d[i]):
            raise ValueError(
                f"conv_transpose2d: output_padding ({op}) must be smaller than either stride ({s}) or dilation "
                f"({d})"
            )
    k = (kh, kw)
    for i, dim in enumerate((-2, -1)):
        x = _spread(x, dim, s[i])
        edge = d[i] * (k[i] - 1) - p[i]
        x = _pad_or_crop(x, dim, edge, edge + op[i])
    w = weight.reshape(groups, cin // groups, cout_g, kh, kw).transpose(1, 2)
    w = w.reshape(groups * cout_g, cin // groups, kh, kw).flip((2, 3))
    y = F.conv2d(x, w, bias, 1, 0, d, groups)
    return y.squeeze(0) if unbatched else y


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 1-D convolution of (N, C_in, L) or (C_in, L) with weight (C_in, C_out / groups, K)
    (torch.nn.functional.conv_transpose1d).

    >>> plast.nn.functional.conv_transpose1d(plast.ones(1, 1, 3), plast.ones(1, 1, 2)).tolist()
    [[[1.0, 2.0, 2.0, 1.0]]]
    """
    if input.ndim not in (2, 3) or weight.ndim != 3:
        raise ShapeError(
            f"conv_transpose1d: expected input (N, C_in, L) or (C_in, L) and weight (C_in, C_out / groups, K), "
            f"got input {tuple(input.shape)} and weight {tuple(weight.shape)}"
        )
    y = conv_transpose2d(
        input.unsqueeze(-2),
        weight.unsqueeze(-2),
        bias,
        (1, _single(stride)[0]),
        (0, _single(padding)[0]),
        (0, _single(output_padding)[0]),
        groups,
        (1, _single(dilation)[0]),
    )
    return y.squeeze(-2)


class Conv1d(Module):
    """1-D cross-correlation over (N, C, L) or (C, L) inputs (torch.nn.Conv1d): weight
    (out_channels, in_channels / groups, kernel_size), stride, padding (int, ``'same'``, ``'valid'``),
    dilation, groups, ``padding_mode``; torch's init.

    >>> conv = plast.nn.Conv1d(3, 8, 3, padding=1)
    >>> tuple(conv.weight.shape), conv(plast.ones(2, 3, 5)).shape
    ((8, 3, 3), plast.Size([2, 8, 5]))
    """

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        _check_conv_args(in_channels, out_channels, groups, padding_mode)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride)
        self.dilation = _single(dilation)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of ('valid', 'same')")
            if padding == "same" and self.stride != (1,):
                raise ValueError("padding='same' is not supported for strided convolutions")
            total = self.dilation[0] * (self.kernel_size[0] - 1) if padding == "same" else 0
            self._reversed_padding_repeated_twice = (total // 2, total - total // 2)
            self.padding = padding
        else:
            self.padding = _single(padding)
            self._reversed_padding_repeated_twice = (self.padding[0], self.padding[0])
        self.groups = groups
        self.padding_mode = padding_mode
        self.output_padding = (0,)
        self.transposed = False
        self.weight = Parameter(plast.empty(out_channels, in_channels // groups, *self.kernel_size, dtype=dt))
        if bias:
            self.bias = Parameter(plast.empty(out_channels, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    reset_parameters = Conv2d.reset_parameters

    def forward(self, input):
        if input.ndim not in (2, 3) or input.shape[-2] != self.in_channels:
            c = self.in_channels
            raise ShapeError(
                f"{self!r}: expected an input of shape (N, {c}, L) or ({c}, L), got {tuple(input.shape)}"
            )
        if self.padding_mode != "zeros":
            x = input.unsqueeze(-2)
            x = F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode).squeeze(-2)
            return conv1d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        return _conv_repr(self, (0,), (1,))


def _check_conv_args(in_channels, out_channels, groups, padding_mode):
    if groups <= 0:
        raise ValueError("groups must be a positive integer")
    if in_channels % groups != 0:
        raise ValueError("in_channels must be divisible by groups")
    if out_channels % groups != 0:
        raise ValueError("out_channels must be divisible by groups")
    valid_modes = ("zeros", "reflect", "replicate", "circular")
    if padding_mode not in valid_modes:
        raise ValueError(f"padding_mode must be one of {valid_modes}, but got padding_mode='{padding_mode}'")


def _conv_repr(m, zero, one):
    s = f"{m.in_channels}, {m.out_channels}, kernel_size={m.kernel_size}, stride={m.stride}"
    if m.padding != zero:
        s += f", padding={m.padding}"
    if m.dilation != one:
        s += f", dilation={m.dilation}"
    if getattr(m, "output_padding", zero) != zero:
        s += f", output_padding={m.output_padding}"
    if m.groups != 1:
        s += f", groups={m.groups}"
    if m.bias is None:
        s += ", bias=False"
    if m.padding_mode != "zeros":
        s += f", padding_mode={m.padding_mode}"
    return s


class _ConvTransposeNd(Module):
    _n = 2

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        dt = _factory_dtype(device, dtype)
        _check_conv_args(in_channels, out_channels, groups, padding_mode)
        tup = _single if self._n == 1 else _pair
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = tup(kernel_size)
        self.stride = tup(stride)
        self.padding = tup(padding)
        self.output_padding = tup(output_padding)
        self.dilation = tup(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        self.transposed = True
        self.weight = Parameter(plast.empty(in_channels, out_channels // groups, *self.kernel_size, dtype=dt))
        if bias:
            self.bias = Parameter(plast.empty(out_channels, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    reset_parameters = Conv2d.reset_parameters

    def _output_padding(self, input, output_size):
        """output_padding that makes the output `output_size` (torch's rule), or the module's own."""
        if output_size is None:
            return self.output_padding
        n = self._n
        output_size = list(output_size)[-n:]
        if len(output_size) != n:
            raise ValueError(f"output_size must have {n} or {n + 2} elements (got {len(output_size)})")
        pads = []
        for i in range(n):
            dim_size = input.shape[input.ndim - n + i]
            lo = (
                (dim_size - 1) * self.stride[i]
                - 2 * self.padding[i]
                + self.dilation[i] * (self.kernel_size[i] - 1)
                + 1
            )
            hi = lo + self.stride[i] - 1
            if not lo <= output_size[i] <= hi:
                raise ValueError(
                    f"requested an output size of {output_size}, but valid sizes range from {lo} to {hi} (for an "
                    f"input of {tuple(input.shape[2:])})"
                )
            pads.append(output_size[i] - lo)
        return tuple(pads)

    def extra_repr(self):
        zero = (0,) * self._n
        return _conv_repr(self, zero, (1,) * self._n)


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution (torch.nn.ConvTranspose2d): weight (in_channels, out_channels / groups,
    kH, kW), stride, padding, output_padding, groups, dilation; ``forward(input, output_size=None)``.

    >>> up = plast.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
    >>> tuple(up.weight.shape), up(plast.ones(1, 4, 5, 5)).shape
    ((4, 2, 3, 3), plast.Size([1, 2, 10, 10]))
    """

    _n = 2

    def forward(self, input, output_size=None):
        if input.ndim not in (3, 4) or input.shape[-3] != self.in_channels:
            c = self.in_channels
            raise ShapeError(
                f"{self!r}: expected an input of shape (N, {c}, H, W) or ({c}, H, W), got {tuple(input.shape)}"
            )
        op = self._output_padding(input, output_size)
        return conv_transpose2d(
            input, self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation
        )


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution (torch.nn.ConvTranspose1d): weight (in_channels, out_channels / groups, K).

    >>> plast.nn.ConvTranspose1d(4, 2, 3, stride=2)(plast.ones(1, 4, 5)).shape
    plast.Size([1, 2, 11])
    """

    _n = 1

    def forward(self, input, output_size=None):
        if input.ndim not in (2, 3) or input.shape[-2] != self.in_channels:
            c = self.in_channels
            raise ShapeError(
                f"{self!r}: expected an input of shape (N, {c}, L) or ({c}, L), got {tuple(input.shape)}"
            )
        op = self._output_padding(input, output_size)
        return conv_transpose1d(
            input, self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation
        )


def _triple(v):
    return (v, v, v) if isinstance(v, int) else tuple(v)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation of (N, C_in, D, H, W) or (C_in, D, H, W) with weight
    (C_out, C_in / groups, kD, kH, kW) (torch.nn.functional.conv3d); padding an int, a triple, 'same' or
    'valid'. Written as one plast-core conv2d per kernel depth over the depth slices folded into the batch
    (a fused 3-D kernel is still to do).

    >>> plast.nn.functional.conv3d(plast.ones(1, 1, 3, 3, 3), plast.ones(1, 1, 2, 2, 2)).shape
    plast.Size([1, 1, 2, 2, 2])
    """
    if input.ndim not in (4, 5) or weight.ndim != 5:
        raise ShapeError(
            f"conv3d: expected input (N, C, D, H, W) or (C, D, H, W) and weight (C_out, C_in / groups, kD, kH, kW), "
            f"got input {tuple(input.shape)} and weight {tuple(weight.shape)}"
        )
    unbatched = input.ndim == 4
    x = input.unsqueeze(0) if unbatched else input
    (sd, sh, sw), (dd, dh, dw) = _triple(stride), _triple(dilation)
    kd, kh, kw = weight.shape[2:]
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of ('valid', 'same')")
        if padding == "same" and (sd, sh, sw) != (1, 1, 1):
            raise ValueError("padding='same' is not supported for strided convolutions")
        pads = [0] * 6
        if padding == "same":
            for i, (d, k) in enumerate(zip((dw, dh, dd), (kw, kh, kd))):
                total = d * (k - 1)
                pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
        x = F.pad(x, tuple(pads))
    else:
        pd, ph, pw = _triple(padding)
        if pd or ph or pw:
            x = F.pad(x, (pw, pw, ph, ph, pd, pd))
    n, c, D = x.shape[0], x.shape[1], x.shape[2]
    d_out = (D - dd * (kd - 1) - 1) // sd + 1
    if d_out <= 0:
        raise ShapeError(
            f"conv3d: the padded depth ({D}) is smaller than the dilated kernel depth ({dd * (kd - 1) + 1}) for "
            f"input {tuple(input.shape)}"
        )
    out = None
    for k in range(kd):
        start = k * dd
        sl = x[:, :, start : start + (d_out - 1) * sd + 1 : sd]  # (N, C, D_out, H, W)
        planes = sl.permute(0, 2, 1, 3, 4).reshape(n * d_out, c, x.shape[3], x.shape[4])
        y = F.conv2d(planes, weight[:, :, k], None, (sh, sw), 0, (dh, dw), groups)
        out = y if out is None else out + y
    out = out.reshape(n, d_out, out.shape[1], out.shape[2], out.shape[3]).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


class Conv3d(Module):
    """3-D cross-correlation over (N, C, D, H, W) or (C, D, H, W) inputs (torch.nn.Conv3d): weight
    (out_channels, in_channels / groups, kD, kH, kW), stride, padding (int, triple, 'same', 'valid'), dilation,
    groups; torch's init. ``padding_mode`` other than 'zeros' raises NotImplementedError.

    >>> plast.nn.Conv3d(2, 4, 3, padding=1)(plast.ones(1, 2, 4, 4, 4)).shape
    plast.Size([1, 4, 4, 4, 4])
    """

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        _check_conv_args(in_channels, out_channels, groups, padding_mode)
        if padding_mode != "zeros":
            raise NotImplementedError(
                f"Conv3d(padding_mode={padding_mode!r}) is not implemented in plast; use 'zeros' or pad the input "
                "with F.pad first"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _triple(kernel_size)
        self.stride = _triple(stride)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of ('valid', 'same')")
            if padding == "same" and self.stride != (1, 1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _triple(padding)
        self.dilation = _triple(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        self.output_padding = (0, 0, 0)
        self.transposed = False
        self.weight = Parameter(plast.empty(out_channels, in_channels // groups, *self.kernel_size, dtype=dt))
        if bias:
            self.bias = Parameter(plast.empty(out_channels, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    reset_parameters = Conv2d.reset_parameters

    def forward(self, input):
        if input.ndim not in (4, 5) or input.shape[-4] != self.in_channels:
            c = self.in_channels
            raise ShapeError(
                f"{self!r}: expected an input of shape (N, {c}, D, H, W) or ({c}, D, H, W), got {tuple(input.shape)}"
            )
        return conv3d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        return _conv_repr(self, (0, 0, 0), (1, 1, 1))
