# ruff: noqa: E402 -- the namespace path and the sibling finder must be set up before the imports below
"""plast: a small, fast deep-learning engine with a PyTorch-compatible API.

>>> import plast
>>> (plast.ones(2, 3) * 2 + 1).tolist()
[[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]]
"""

# plast is one import name spread over several distributions (plast-core, plast-nn, plast-data,
# plast-experiment). plast-core owns this file; extend_path lets the others' subpackages join it.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"

from . import _siblings

_siblings.install()

from . import accelerator, amp, autograd, backends, compiler, cuda, distributed, errors, linalg, profiler
from ._config import show_config
from ._core._structs import Size
from ._core.devices import Device, device
from ._core.dtypes import (
    as_dtype,
    bfloat16,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    set_default_dtype,
    uint8,
)
from ._core.dtypes import bool_ as bool  # noqa: A001
from ._core.errors import (
    ArenaExhaustedError,
    CheckpointError,
    DeviceMismatchError,
    DTypeError,
    JitError,
    PlastError,
    ShapeError,
    StaleTensorError,
)
from ._jit.trace import jit
from ._tensor import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
    Tensor,
    is_tensor,
    mm,
    numel,
)
from .amp import autocast, get_autocast_dtype, is_autocast_enabled
from .autograd.api import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .compiler import compile  # noqa: A004 (torch.compile)
from .graph.realize import realize as _realize
from .kernels.cpu._runtime import get_num_threads, set_num_threads
from .memory.arenas import arena_scope, arena_stats, init_arenas, reset_transient_arenas

# the fusion rules (GEMM epilogues, log_softmax + nll) register themselves with graph/fusion.py
from .ops import fusion_rules  # noqa: F401

# every op family's public functions (each op module's __all__; tests/test_public_api.py checks the lists agree)
from .ops.attention import scaled_dot_product_attention
from .ops.composites import (
    absolute,
    allclose,
    cosh,
    deg2rad,
    divide,
    equal,
    fix,
    float_power,
    fmax,
    fmin,
    frac,
    greater,
    greater_equal,
    heaviside,
    hypot,
    isclose,
    isneginf,
    isposinf,
    isreal,
    ldexp,
    less,
    less_equal,
    logaddexp,
    logaddexp2,
    logit,
    multiply,
    mvlgamma,
    nan_to_num,
    negative,
    not_equal,
    positive,
    rad2deg,
    sgn,
    sinc,
    sinh,
    subtract,
    tan,
    true_divide,
    xlogy,
)
from .ops.creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    logspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    scalar_tensor,
    tensor,
    zeros,
    zeros_like,
)
from .ops.einsum import einsum
from .ops.elementwise import add, div, mul, neg, sub
from .ops.indexing import (
    gather,
    index_add,
    index_put,
    index_select,
    masked_select,
    scatter,
    scatter_add,
    scatter_reduce,
    take_along_dim,
)
from .ops.linalg import matmul
from .ops.movement import cast, clone, contiguous, expand, permute, reshape, t, transpose, view
from .ops.nn import (
    addmm,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    dropout,
    embedding,
    l1_loss,
    layer_norm,
    linear,
    log_softmax,
    logsumexp,
    mse_loss,
    nll_loss,
    one_hot,
    pad,
    rms_norm,
    smooth_l1_loss,
    softmax,
)
from .ops.nn_conv import avg_pool2d, conv2d, max_pool2d
from .ops.optim import adam_update_, sgd_update_
from .ops.optim_adadelta import adadelta_update_
from .ops.optim_adagrad import adagrad_update_
from .ops.optim_adamax import adamax_update_
from .ops.optim_nadam import nadam_update_
from .ops.optim_rmsprop import rmsprop_update_
from .ops.pointwise import (
    addcdiv,
    addcmul,
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    clamp,
    clamp_max,
    clamp_min,
    clip,
    elu,
    eq,
    exp2,
    expm1,
    floor,
    floor_divide,
    fmod,
    gcd,
    ge,
    gt,
    hardtanh,
    isfinite,
    isinf,
    isnan,
    lcm,
    le,
    leaky_relu,
    lerp,
    log2,
    log10,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    masked_fill,
    maximum,
    minimum,
    ne,
    nonzero,
    pow,
    reciprocal,
    remainder,
    round,
    softplus,
    square,
    trunc,
    where,
)
from .ops.reduce import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    argsort,
    cumsum,
    max,
    mean,
    min,
    multinomial,
    norm,
    prod,
    sort,
    std,
    sum,
    topk,
    var,
)
from .ops.rnn import fused_gru_cell, fused_lstm_cell
from .ops.shape import (
    cat,
    chunk,
    concat,
    concatenate,
    diagonal,
    flatten,
    flip,
    fliplr,
    flipud,
    hstack,
    moveaxis,
    movedim,
    narrow,
    roll,
    select,
    split,
    split_copy,
    squeeze,
    stack,
    tile,
    tril,
    triu,
    unbind,
    unflatten,
    unsqueeze,
    vstack,
)
from .ops.special import (
    acos,
    acosh,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    copysign,
    digamma,
    erfc,
    erfinv,
    frexp,
    i0,
    igamma,
    igammac,
    lgamma,
    nextafter,
    polygamma,
    signbit,
)
from .ops.unary import abs, cos, erf, exp, gelu, log, log1p, relu, rsqrt, sigmoid, sign, silu, sin, sqrt, tanh
from .random import (
    Generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from .serialization import load, save

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16


def forward(*tensors: Tensor) -> Tensor | tuple[Tensor, ...]:
    """Compute the values of `tensors` now (they are computed lazily otherwise)."""
    _realize(list(tensors))
    return tensors[0] if len(tensors) == 1 else tensors


_SIBLING_ATTRS = {
    "nn": "plast.nn",
    "optim": "plast.optim",
    "data": "plast.data",
    "experiment": "plast.experiment",
}


def __getattr__(name):
    # `import plast; plast.nn` works when plast-nn is installed; otherwise the finder in _siblings raises a
    # ModuleNotFoundError that names the distribution to install.
    mod = _SIBLING_ATTRS.get(name)
    if mod is not None:
        import importlib

        return importlib.import_module(mod)
    raise AttributeError(f"module 'plast' has no attribute {name!r}")
