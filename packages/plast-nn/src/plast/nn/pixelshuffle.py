"""PixelShuffle and PixelUnshuffle (torch.nn's), with their functional forms, as reshapes and a permute."""

import plast  # noqa: F401  (the docstrings' examples use it)
from plast.errors import ShapeError

from .module import Module


def pixel_shuffle(input, upscale_factor):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r) with r = upscale_factor.

    >>> from plast.nn.functional import pixel_shuffle
    >>> pixel_shuffle(plast.arange(4.0).reshape(1, 4, 1, 1), 2).reshape(2, 2).tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    r = int(upscale_factor)
    if input.ndim < 3 or r <= 0 or input.shape[-3] % (r * r) != 0:
        raise ShapeError(
            f"pixel_shuffle: expected an input of shape (*, C * {r}^2, H, W) (channels divisible by "
            f"upscale_factor^2 = {r * r}), got {tuple(input.shape)}"
        )
    *lead, c, h, w = input.shape
    oc = c // (r * r)
    nb = len(lead)
    x = input.reshape(*lead, oc, r, r, h, w)
    x = x.permute(*range(nb), nb, nb + 3, nb + 1, nb + 4, nb + 2)
    return x.reshape(*lead, oc, h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W) with r = downscale_factor (the inverse of pixel_shuffle).

    >>> from plast.nn.functional import pixel_unshuffle
    >>> pixel_unshuffle(plast.arange(4.0).reshape(1, 1, 2, 2), 2).reshape(4).tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    r = int(downscale_factor)
    if input.ndim < 3 or r <= 0 or input.shape[-2] % r or input.shape[-1] % r:
        raise ShapeError(
            f"pixel_unshuffle: expected an input of shape (*, C, H, W) with H and W divisible by "
            f"downscale_factor={r}, got {tuple(input.shape)}"
        )
    *lead, c, h, w = input.shape
    nb = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(nb), nb, nb + 2, nb + 4, nb + 1, nb + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


class PixelShuffle(Module):
    """pixel_shuffle as a module (torch.nn.PixelShuffle).

    >>> plast.nn.PixelShuffle(2)(plast.ones(1, 8, 3, 3)).shape
    plast.Size([1, 2, 6, 6])
    """

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """pixel_unshuffle as a module (torch.nn.PixelUnshuffle).

    >>> plast.nn.PixelUnshuffle(2)(plast.ones(1, 2, 6, 6)).shape
    plast.Size([1, 8, 3, 3])
    """

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"
