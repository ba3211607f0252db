"""Conv2d (torch.nn.Conv2d): weight (out_channels, in_channels / groups, kH, kW), torch's init."""

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
