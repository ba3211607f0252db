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


def linear(input, weight, bias=None):
    """input @ weight.T + bias (weight is [out_features, in_features]).

    >>> plast.nn.functional.linear(plast.ones(1, 2), plast.ones(3, 2)).tolist()
    [[2.0, 2.0, 2.0]]
    """
    return plast.linear(input, weight, bias)


# Torch names that map to a plast-core function of the same name and signature.
_SAME = (
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
    "batch_norm",
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
    """The torch.nn.functional names known here that plast-core does not provide yet."""
    return sorted(n for n in _SAME if not hasattr(plast, n))


def __dir__():
    return sorted(set(globals()) | {n for n in _SAME if hasattr(plast, n)})
