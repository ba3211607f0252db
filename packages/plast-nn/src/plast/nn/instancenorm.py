"""Instance normalization (torch.nn.InstanceNorm1d / InstanceNorm2d and functional.instance_norm): each
sample's channels normalized over their own spatial positions, with torch's optional affine parameters and
running statistics."""

import plast
from plast.errors import ShapeError

from . import functional as F
from . import init
from .normalization import _BatchNorm


def instance_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats=True,
    momentum=0.1,
    eps=1e-5,
):
    """Normalize each (sample, channel) of an (N, C, *) input over its spatial positions (biased variance),
    then scale and shift per channel. With ``use_input_stats`` and running statistics given, these are updated
    in place with the batch average of the per-instance mean and unbiased variance (as torch); without
    ``use_input_stats`` the running statistics normalize instead.

    >>> x = plast.tensor([[[1.0, 3.0]]])  # (N=1, C=1, L=2)
    >>> plast.nn.functional.instance_norm(x).tolist()  # doctest: +ELLIPSIS
    [[[-0.99..., 0.99...]]]
    """
    if input.ndim < 3:
        raise ShapeError(
            f"instance_norm: expected an input of shape (N, C, *spatial), got {tuple(input.shape)}"
        )
    n, c = input.shape[0], input.shape[1]
    shape = (1, c) + (1,) * (input.ndim - 2)
    if use_input_stats:
        flat = input.reshape(n, c, -1)
        k = flat.shape[-1]
        if k <= 1:
            raise ValueError(
                f"Expected more than 1 spatial element when training, got input size {tuple(input.shape)}"
            )
        y = F.layer_norm(flat, (k,), None, None, eps).reshape(input.shape)
        if running_mean is not None and running_var is not None:
            with plast.no_grad():
                f64 = flat.detach().to(plast.float64)
                m = momentum
                mean = f64.mean(dim=-1).mean(dim=0)
                var = f64.var(dim=-1, correction=1).mean(dim=0)
                running_mean.copy_(
                    (mean * m + running_mean.to(plast.float64) * (1 - m)).to(running_mean.dtype)
                )
                running_var.copy_((var * m + running_var.to(plast.float64) * (1 - m)).to(running_var.dtype))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: use_input_stats=False needs running_mean and running_var")
        y = (input - running_mean.reshape(shape)) * plast.rsqrt(running_var.reshape(shape) + eps)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


class _InstanceNorm(_BatchNorm):
    _no_batch_dim = 2
    _shape_text = ""

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=False,
        track_running_stats=False,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        if affine and not bias:
            self.register_parameter("bias", None)

    def reset_parameters(self):
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        nd = self._no_batch_dim
        if input.ndim not in (nd, nd + 1):
            raise ShapeError(
                f"{self!r}: expected an input of shape {self._shape_text.format(C=self.num_features)}, got "
                f"{tuple(input.shape)}"
            )
        unbatched = input.ndim == nd
        x = input.unsqueeze(0) if unbatched else input
        if x.shape[1] != self.num_features:
            if self.affine:
                raise ValueError(
                    f"expected input's size at dim={1 - int(unbatched)} to match num_features "
                    f"({self.num_features}), but got: {input.shape[1 - int(unbatched)]}."
                )
        y = instance_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or unbatched (C, L) inputs (torch.nn.InstanceNorm1d): no affine
    parameters and no running statistics by default.

    >>> plast.nn.InstanceNorm1d(3)(plast.randn(2, 3, 5)).shape
    plast.Size([2, 3, 5])
    """

    _no_batch_dim = 2
    _shape_text = "(N, {C}, L) or ({C}, L)"


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or unbatched (C, H, W) inputs (torch.nn.InstanceNorm2d).

    >>> plast.nn.InstanceNorm2d(3, affine=True)(plast.randn(2, 3, 4, 4)).shape
    plast.Size([2, 3, 4, 4])
    """

    _no_batch_dim = 3
    _shape_text = "(N, {C}, H, W) or ({C}, H, W)"
