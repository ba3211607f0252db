"""plast.nn.functional: torch.nn.functional's names and signatures over plast-core's ops.

The functions live in plast-core (``plast.relu``, ``plast.cross_entropy``, ...; DESIGN §4); this module
re-exports them under torch's names, adapting signatures where torch's differ. Names are looked up in core when
first used, so the module follows core as it grows; a torch name core does not provide yet raises
AttributeError saying so (``missing()`` lists them).

``inplace=True`` flags are accepted for drop-in compatibility and computed out of place: the result is the same,
the input is left unchanged (plast's lazy graph makes the in-place form no cheaper).

>>> import plast.nn.functional as F
>>> F.relu(plast.tensor([-1.0, 2.0])).tolist()
[0.0, 2.0]
"""

import plast


def relu(input, inplace=False):
    """max(x, 0).

    >>> plast.nn.functional.relu(plast.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    return plast.relu(input)


def gelu(input, approximate="none"):
    """GELU, exact (erf) or ``approximate="tanh"``.

    >>> round(plast.nn.functional.gelu(plast.tensor([1.0])).item(), 4)
    0.8413
    """
    return plast.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    """x * sigmoid(x).

    >>> round(plast.nn.functional.silu(plast.tensor([1.0])).item(), 4)
    0.7311
    """
    return plast.silu(input)


def sigmoid(input):
    """1 / (1 + exp(-x)).

    >>> plast.nn.functional.sigmoid(plast.tensor([0.0])).tolist()
    [0.5]
    """
    return plast.sigmoid(input)


def tanh(input):
    """tanh(x).

    >>> plast.nn.functional.tanh(plast.tensor([0.0])).tolist()
    [0.0]
    """
    return plast.tanh(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x.

    >>> plast.nn.functional.leaky_relu(plast.tensor([-1.0]), 0.5).tolist()
    [-0.5]
    """
    return plast.leaky_relu(input, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x) - 1).

    >>> plast.nn.functional.elu(plast.tensor([1.0])).tolist()
    [1.0]
    """
    return plast.elu(input, alpha)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """clamp(x, min_val, max_val).

    >>> plast.nn.functional.hardtanh(plast.tensor([3.0])).tolist()
    [1.0]
    """
    return plast.hardtanh(input, min_val, max_val)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along `dim`.

    >>> plast.nn.functional.softmax(plast.tensor([0.0, 0.0]), dim=0).tolist()
    [0.5, 0.5]
    """
    return plast.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log(softmax(x)) along `dim`.

    >>> round(plast.nn.functional.log_softmax(plast.tensor([0.0, 0.0]), dim=0)[0].item(), 4)
    -0.6931
    """
    return plast.log_softmax(input, dim, dtype)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero elements with probability p while training, scaling the rest by 1/(1-p).

    >>> plast.nn.functional.dropout(plast.ones(3), training=False).tolist()
    [1.0, 1.0, 1.0]
    """
    return plast.dropout(input, p, training)


def batch_norm(
    input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5
):
    """Batch normalization over every dim but dim 1 (channels), torch.nn.functional.batch_norm's semantics.

    Training (or no running statistics): normalize with the batch's mean and biased variance, and, when
    ``running_mean`` / ``running_var`` are given, update them in place (no grad) with
    ``running = (1 - momentum) * running + momentum * batch_stat`` (the unbiased variance goes into
    ``running_var``, as torch). ``momentum`` may be a float or a 0-d tensor (BatchNorm's cumulative average
    passes ``1 / num_batches_tracked`` as one, so a replayed ``@plast.jit`` plan stays right). Eval: normalize
    with the running statistics. Written in plast ops, so gradients (and double backward) come from autograd.

    >>> x = plast.tensor([[1.0, 2.0], [3.0, 6.0]])
    >>> [round(v, 3) for v in plast.nn.functional.batch_norm(x, None, None, training=True)[0].tolist()]
    [-1.0, -1.0]
    """
    from plast.errors import ShapeError

    if input.ndim < 2:
        raise ShapeError(
            f"batch_norm: expected an input of shape (N, C, *) with at least 2 dims, got {tuple(input.shape)}"
        )
    c = input.shape[1]
    for name, t in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(
                f"batch_norm: {name} must have shape ({c},) for an input with {c} channels "
                f"(shape {tuple(input.shape)}), got {tuple(t.shape)}"
            )
    out_dt = input.dtype if input.dtype.is_floating_point else plast.get_default_dtype()
    # NOTE: float32 statistics and their gradients are computed in float64 (torch accumulates them in double):
    # float32 sums over N*H*W values drift by more than 1e-5 relative
    x = input.to(plast.float64)
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, c) + (1,) * (x.ndim - 2)
    use_batch = training or running_mean is None or running_var is None
    if use_batch:
        n = x.numel() // c if c else 0
        if n <= 1:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, got input size "
                f"{tuple(input.shape)}"
            )
        mean = plast.mean(x, dims, keepdim=True)
        var = plast.var(x, dims, keepdim=True, correction=0)
        if training and running_mean is not None and running_var is not None:
            with plast.no_grad():
                m = momentum
                bm = mean.detach().reshape(c)
                bv = var.detach().reshape(c) * (n / (n - 1))
                running_mean.copy_(bm * m + running_mean * (1 - m))
                running_var.copy_(bv * m + running_var * (1 - m))
    else:
        mean = running_mean.reshape(shape).to(plast.float64)
        var = running_var.reshape(shape).to(plast.float64)
    y = (x - mean) * plast.rsqrt(var + eps)
    if weight is not None:
        y = y * weight.reshape(shape).to(plast.float64)
    if bias is not None:
        y = y + bias.reshape(shape).to(plast.float64)
    return y.to(out_dt)


# Torch names plast-core lacks, written here in plast ops (a core name, when it appears, takes over below).

# Torch names plast-core lacks, written in plast ops in plast-nn (a core name of the same name, once core has
# it, takes over in the update below: core's are fused).
from .conv import conv1d, conv3d, conv_transpose1d, conv_transpose2d  # noqa: E402, F401
from .distance import cosine_similarity, pairwise_distance  # noqa: E402, F401
from .instancenorm import instance_norm  # noqa: E402, F401
from .linear import bilinear  # noqa: E402, F401
from .loss_functional import (  # noqa: E402, F401
    ctc_loss,
    huber_loss,
    kl_div,
    margin_ranking_loss,
    triplet_margin_loss,
)
from .normalization import group_norm  # noqa: E402, F401
from .pixelshuffle import pixel_shuffle, pixel_unshuffle  # noqa: E402, F401
from .upsampling import interpolate, upsample  # noqa: E402, F401

# Torch names that map to a plast-core function of the same name and signature.
_SAME = (
    "linear",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "cross_entropy",
    "nll_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "embedding",
    "one_hot",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "scaled_dot_product_attention",
    "softplus",
    "conv1d",
    "conv2d",
    "max_pool2d",
    "avg_pool2d",
    "adaptive_avg_pool2d",
    "pad",
    "normalize",
    "cosine_similarity",
    "interpolate",
    "unfold",
    "relu6",
    "selu",
    "celu",
    "mish",
    "hardswish",
    "hardsigmoid",
    "logsigmoid",
    "softsign",
    "softmin",
    "glu",
    "tanhshrink",
    "threshold",
    "pairwise_distance",
)


# Bound now (plast-core is fully imported before this module): a module attribute is a dict hit, where the
# module __getattr__ below is a failed lookup plus a Python call on every use (F.linear in each layer's forward).
globals().update({_n: getattr(plast, _n) for _n in _SAME if hasattr(plast, _n)})


def __getattr__(name):
    if name in _SAME:
        fn = getattr(plast, name, None)
        if fn is not None:
            return fn
        raise AttributeError(
            f"plast.nn.functional.{name} needs plast.{name}, which plast-core does not provide yet"
        )
    raise AttributeError(f"module 'plast.nn.functional' has no attribute {name!r}")


def missing():
    """The torch.nn.functional names known here that neither plast-core nor this module provides yet."""
    return sorted(n for n in _SAME if n not in globals())


def __dir__():
    return sorted(set(globals()) | {n for n in _SAME if hasattr(plast, n)})
