"""autocast's op lists and the casts they ask for (torch's CPU lists, for the ops plast-core has).

Inside ``plast.autocast(device_type, dtype)`` an op call casts its floating arguments first, by the op's list
(each listed function starts with ``if _ac.active:`` and one of the helpers below):

- ``LOWER``: to the autocast type (matrix products, convolutions, attention: where 16-bit pays);
- ``FP32``: 16-bit arguments to float32 (losses, products over many elements: where 16-bit loses accuracy);
- ``PROMOTE``: to the widest floating type among the arguments (joins).

Every other op follows its inputs' types. float64 arguments are never cast (torch's rule), and a parameter (a
leaf that requires grad) is cast once per region: the cast is cached until the outermost region closes, so its
gradient flows back through one cast. ``tests/test_autocast.py`` checks each list against torch's behaviour, op
by op.
"""

import functools

from .._core import autocast_state as _state
from .._core import dtypes
from .._core._structs import TensorBase
from ..graph._graph import convert

# torch's CPU autocast lists (aten/src/ATen/autocast_mode.cpp), restricted to the ops plast-core implements, by
# plast's function names. CUDA autocast waits for 16-bit CUDA kernels (plast.amp.autocast says so).
LOWER = ("matmul", "addmm", "linear", "conv2d", "scaled_dot_product_attention")
FP32 = (
    "prod",
    "mse_loss",
    "nll_loss",
    "cross_entropy",
    "l1_loss",
    "smooth_l1_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
)
PROMOTE = ("cat", "stack")


def _eligible(x):
    return isinstance(x, TensorBase) and x.dtype.is_floating_point and x.dtype is not dtypes.float64


def to_lower(x, dtype):
    """x cast to the autocast type `dtype` (a parameter's cast comes from the region's cache)."""
    if not _eligible(x) or x.dtype is dtype:
        return x
    if x.requires_grad and x.grad_fn is None and _state.cache_enabled:
        hit = _state.cache.get(id(x))
        if hit is not None and hit[0] is x and hit[1].dtype is dtype:
            return hit[1]
        cast = convert(x, dtype)
        _state.cache[id(x)] = (x, cast)
        return cast
    return convert(x, dtype)


def to_fp32(x):
    return convert(x, dtypes.float32) if _eligible(x) and dtypes.is_16bit(x.dtype) else x


def _device_type(args):
    for a in args:
        if isinstance(a, TensorBase):
            return a.device.type
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, TensorBase):
                    return b.device.type
    return None


def lower_args(args, device_type=None):
    """The arguments of a LOWER op cast to the autocast type; None when autocast is off for their device."""
    dt = _state.on_for(device_type or _device_type(args))
    if dt is None:
        return None
    return tuple(to_lower(a, dt) for a in args)


def fp32_args(*args):
    """The arguments of an FP32 op, 16-bit ones cast to float32 (as they are when autocast is off there)."""
    if _state.on_for(_device_type(args)) is None:
        return args
    return tuple(to_fp32(a) for a in args)


def promote_args(tensors):
    """The tensors of a PROMOTE op (cat, stack) at their widest floating type."""
    if _state.on_for(_device_type((tensors,))) is None:
        return tensors
    floats = [t.dtype for t in tensors if _eligible(t)]
    if not floats:
        return tensors
    widest = functools.reduce(dtypes.promote, floats)
    return [convert(t, widest) if _eligible(t) else t for t in tensors]
