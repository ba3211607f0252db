"""MaxPool2d and AvgPool2d (torch's arguments, over (N, C, H, W) or (C, H, W) inputs)."""

from plast.errors import ShapeError

from . import functional as F
from .module import Module


class _Pool2d(Module):
    def _check(self, input):
        if input.ndim not in (3, 4):
            raise ShapeError(
                f"{self!r}: expected an input of shape (N, C, H, W) or (C, H, W), got {tuple(input.shape)}"
            )


class MaxPool2d(_Pool2d):
    """Max over sliding windows (kernel_size, stride (default: kernel_size), padding, dilation, ceil_mode,
    return_indices).

    >>> plast.nn.MaxPool2d(2)(plast.ones(1, 1, 4, 4)).shape
    plast.Size([1, 1, 2, 2])
    """

    def __init__(
        self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        self._check(input)
        return F.max_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self):
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
            f"ceil_mode={self.ceil_mode}"
        )


class AvgPool2d(_Pool2d):
    """Mean over sliding windows (kernel_size, stride (default: kernel_size), padding, ceil_mode,
    count_include_pad, divisor_override).

    >>> plast.nn.AvgPool2d(2)(plast.ones(1, 1, 4, 4)).tolist()
    [[[[1.0, 1.0], [1.0, 1.0]]]]
    """

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode=False,
        count_include_pad=True,
        divisor_override=None,
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        self._check(input)
        return F.avg_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
