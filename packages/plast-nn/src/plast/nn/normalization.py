"""Normalization layers: LayerNorm, RMSNorm, BatchNorm1d, BatchNorm2d (torch's arguments, init and state)."""

import numbers

import plast
from plast.errors import ShapeError

from . import functional as F
from . import init
from .linear import _factory_dtype
from .module import Module
from .parameter import Parameter


def _shape_tuple(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


class _TrailingNorm(Module):
    def _check(self, input):
        ns = self.normalized_shape
        k = len(ns)
        if input.ndim < k or tuple(input.shape[input.ndim - k :]) != ns:
            dims = ", ".join(str(s) for s in ns)
            raise ShapeError(f"{self!r}: expected an input of shape (*, {dims}), got {tuple(input.shape)}")


class LayerNorm(_TrailingNorm):
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing ``normalized_shape`` dims; weight starts
    at ones and bias at zeros, as torch's.

    >>> ln = plast.nn.LayerNorm(4)
    >>> ln(plast.randn(2, 4)).shape
    plast.Size([2, 4])
    """

    def __init__(
        self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None
    ):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(plast.empty(self.normalized_shape, dtype=dt))
            if bias:
                self.bias = Parameter(plast.empty(self.normalized_shape, dtype=dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        self._check(input)
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
            f"bias={self.bias is not None}"
        )


class RMSNorm(_TrailingNorm):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing ``normalized_shape`` dims (eps None: the dtype's
    machine epsilon, as torch); weight starts at ones.

    >>> plast.nn.RMSNorm(4)(plast.randn(2, 4)).shape
    plast.Size([2, 4])
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(plast.empty(self.normalized_shape, dtype=dt))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        self._check(input)
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class _BatchNorm(Module):
    _dims = ()  # accepted input ranks
    _shape_text = ""

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(plast.empty(num_features, dtype=dt))
            self.bias = Parameter(plast.empty(num_features, dtype=dt))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", plast.zeros(num_features, dtype=dt))
            self.register_buffer("running_var", plast.ones(num_features, dtype=dt))
            self.register_buffer("num_batches_tracked", plast.zeros((), dtype=plast.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with plast.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input):
        if input.ndim not in self._dims or input.shape[1] != self.num_features:
            raise ShapeError(
                f"{self!r}: expected an input of shape {self._shape_text.format(C=self.num_features)}, got "
                f"{tuple(input.shape)}"
            )

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with plast.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                # cumulative moving average: a tensor, so a replayed plan keeps counting
                factor = 1.0 / self.num_batches_tracked.to(plast.float64)
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if track else None,
            self.running_var if track else None,
            self.weight,
            self.bias,
            bn_training,
            factor,
            self.eps,
        )

    def _load_from_state_dict(self, state_dict, prefix, missing_keys, unexpected_keys, error_msgs):
        # checkpoints from before num_batches_tracked existed (torch's version < 2 state dicts) load with 0
        key = prefix + "num_batches_tracked"
        if self.num_batches_tracked is not None and key not in state_dict:
            state_dict = dict(state_dict)
            state_dict[key] = plast.zeros((), dtype=plast.int64, device=self.num_batches_tracked.device)
        super()._load_from_state_dict(state_dict, prefix, missing_keys, unexpected_keys, error_msgs)

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) inputs over N (and L), per channel, with running statistics
    (``momentum=None``: cumulative average) used in eval mode.

    >>> bn = plast.nn.BatchNorm1d(3)
    >>> bn(plast.randn(8, 3)).shape, bn.num_batches_tracked.item()
    (plast.Size([8, 3]), 1)
    """

    _dims = (2, 3)
    _shape_text = "(N, {C}) or (N, {C}, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) inputs over N, H and W, per channel, with running statistics.

    >>> plast.nn.BatchNorm2d(3)(plast.randn(2, 3, 4, 4)).shape
    plast.Size([2, 3, 4, 4])
    """

    _dims = (4,)
    _shape_text = "(N, {C}, H, W)"


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize each of ``num_groups`` groups of channels of an (N, C, *) input over its channels and spatial
    positions (biased variance), then scale and shift per channel (torch.nn.functional.group_norm).

    >>> x = plast.tensor([[[1.0], [3.0], [0.0], [4.0]]])  # (N=1, C=4, L=1)
    >>> [round(v, 3) for v in plast.nn.functional.group_norm(x, 2).reshape(4).tolist()]
    [-1.0, 1.0, -1.0, 1.0]
    """
    if input.ndim < 2:
        raise ShapeError(f"group_norm: expected an input of shape (N, C, *), got {tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if num_groups <= 0 or c % num_groups != 0:
        raise ValueError(
            f"group_norm: the number of channels ({c}, input {tuple(input.shape)}) must be divisible by "
            f"num_groups ({num_groups})"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(f"group_norm: {name} must have shape ({c},), got {tuple(t.shape)}")
    grouped = input.reshape(n, num_groups, -1)
    # the fused layer_norm over each group's values is the group's normalization
    y = F.layer_norm(grouped, (grouped.shape[-1],), None, None, eps).reshape(input.shape)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


class GroupNorm(Module):
    """group_norm with a learned per-channel ``weight`` (ones) and ``bias`` (zeros) when ``affine``
    (torch.nn.GroupNorm).

    >>> plast.nn.GroupNorm(2, 4)(plast.randn(3, 4, 5)).shape
    plast.Size([3, 4, 5])
    """

    def __init__(
        self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True
    ):
        super().__init__()
        dt = _factory_dtype(device, dtype)
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(plast.empty(num_channels, dtype=dt))
            if bias:
                self.bias = Parameter(plast.empty(num_channels, dtype=dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        if input.ndim < 2 or input.shape[1] != self.num_channels:
            raise ShapeError(
                f"{self!r}: expected an input of shape (N, {self.num_channels}, *), got {tuple(input.shape)}"
            )
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
