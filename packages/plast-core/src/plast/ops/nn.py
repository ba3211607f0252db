"""NN primitives (torch.nn.functional style, public at the top level as torch has them).

Fused primitives (one kernel each): softmax, log_softmax, logsumexp, cross_entropy, nll_loss, addmm, embedding,
layer_norm, the BCE losses; their backward rules are single rows too where that saves passes (softmax_backward,
cross_entropy_backward, ...), and every backward rule is written in plast ops so double backward works. The
rest (linear, mse/l1/smooth_l1, rms_norm, dropout, scaled_dot_product_attention) are composites of primitives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._core import autocast_state as _ac
from .._core import dtypes
from .._core.errors import DTypeError, ShapeError
from .._core.grad_mode import is_grad_enabled, no_grad
from .._core.hints import Dims, DTypeLike, ShapeLike, TensorBase
from .._core.shapes import broadcast_shapes, norm_dim
from ..graph._graph import record
from ..graph.tape import tracing
from ..kernels.cpu import kernels_nn as K
from ..kernels.cpu.kernels import np_view
from . import _linalg, movement
from . import autocast as _autocast
from . import reduce as R
from .creation import rand, tensor
from .elementwise import add, div, mul, neg, sub
from .factory import scalar_tensor
from .indexing import getitem, index_put_, index_select
from .inplace import mul_
from .pointwise import clamp_min, gt, where
from .random import Generator
from .registry import register
from .shape import _identity_map, strided_scatter, strided_view
from .unary import _out, abs, exp, log, log1p, relu, sigmoid, sqrt  # noqa: A004

_REDUCTIONS = ("none", "mean", "sum")


# ---- helpers ----


_tensor_check, _same_device = _linalg.tensor_check, _linalg.same_device  # compiled (ops/_linalg.pyx)


def _floating(x):
    return x if x.dtype.is_floating_point else movement.cast(x, dtypes.default_float)


def _reduction(reduction, op, size_average=None, reduce=None):
    if size_average is not None or reduce is not None:
        # torch's legacy arguments
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    return reduction


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return R.sum(loss)
    return R.mean(loss)


def _outputs(node):
    """All outputs of a multi-output node (recomputed together if the caller dropped any)."""
    outs = [r() for r in node.outputs]
    if any(o is None for o in outs):
        outs = record(node.op, node.inputs, node.args, node.specs, node.inputs[0].device)
    return outs


def _realized_array(t):
    """numpy values of an already-realized tensor (for eager index checks), else None."""
    if t._storage is None or tracing() or t.device.type != "cpu":
        return None  # GPU tensors: the kernels check the values
    t._storage.check()
    return np_view(t)


# ---- softmax, log_softmax, logsumexp ----


def _softmax_bw(node, g):
    return (softmax_backward(g, _out(node), node.args[0]),)


def _softmax_bw_bw(node, h):
    g, y = node.inputs
    (dim,) = node.args
    s = R.sum(mul(g, y), dim, keepdim=True)
    hy = R.sum(mul(h, y), dim, keepdim=True)
    return softmax_backward(h, y, dim), sub(mul(h, sub(g, s)), mul(g, hy))


def _log_softmax_bw(node, g):
    return (log_softmax_backward(g, _out(node), node.args[0]),)


def _log_softmax_bw_bw(node, h):
    g, y = node.inputs
    (dim,) = node.args
    ey = exp(y)
    gg = sub(h, R.sum(mul(h, ey), dim, keepdim=True))
    gy = neg(mul(mul(h, ey), R.sum(g, dim, keepdim=True)))
    return gg, gy


def _logsumexp_bw(node, g):
    x = node.inputs[0]
    dims, keepdim = node.args
    out = _out(node)
    if not keepdim:
        kd = R._reduced_shape(x.shape, dims, True)
        g, out = movement.reshape(g, kd), movement.reshape(out, kd)
    return (mul(g, exp(sub(x, out))),)


SOFTMAX = register("softmax", cpu=K.softmax, backward=_softmax_bw, saves_inputs=False)
SOFTMAX_BW = register("softmax_backward", cpu=K.softmax_backward, backward=_softmax_bw_bw)
LOG_SOFTMAX = register("log_softmax", cpu=K.log_softmax, backward=_log_softmax_bw, saves_inputs=False)
LOG_SOFTMAX_BW = register("log_softmax_backward", cpu=K.log_softmax_backward, backward=_log_softmax_bw_bw)
LOGSUMEXP = register("logsumexp", cpu=K.logsumexp, backward=_logsumexp_bw)


def _softmax_like(op, x, dim, dtype, name, args=()):
    _tensor_check(x, name)
    if dtype is not None:
        x = movement.cast(x, dtype)
    x = _floating(x)
    if dim is None:
        raise TypeError(f"{name}: dim is required (e.g. {name}(x, dim=-1))")
    d = norm_dim(dim, x.ndim, name)
    if x.ndim == 0:
        out = record(op, (movement.reshape(x, (1,)),), (0,) + args, [((1,), x.dtype)], x.device)[0]
        return movement.reshape(out, ())
    return record(op, (x,), (d,) + args, [(x.shape, x.dtype)], x.device)[0]


def softmax(x: TensorBase, dim: int | None = None, dtype: DTypeLike | None = None) -> TensorBase:
    """exp(x) / sum(exp(x)) along `dim`, computed stably in one kernel.

    >>> plast.softmax(plast.tensor([0.0, 0.0]), dim=0).tolist()
    [0.5, 0.5]
    """
    return _softmax_like(SOFTMAX, x, dim, dtype, "softmax", (False,))


def _safe_softmax(x, dim):
    """softmax whose rows of only -inf give zeros instead of nan (attention rows with nothing to attend)."""
    return _softmax_like(SOFTMAX, x, dim, None, "softmax", (True,))


def log_softmax(x: TensorBase, dim: int | None = None, dtype: DTypeLike | None = None) -> TensorBase:
    """log(softmax(x)) along `dim`, computed stably in one kernel.

    >>> round(plast.log_softmax(plast.tensor([0.0, 0.0]), dim=0)[0].item(), 4)
    -0.6931
    """
    return _softmax_like(LOG_SOFTMAX, x, dim, dtype, "log_softmax")


def softmax_backward(grad, output, dim):
    """Gradient of softmax given its output y: y * (grad - sum(grad * y, dim)). One kernel, differentiable."""
    return record(SOFTMAX_BW, (grad, output), (dim,), [(output.shape, output.dtype)], output.device)[0]


def log_softmax_backward(grad, output, dim):
    """Gradient of log_softmax given its output y: grad - exp(y) * sum(grad, dim). One kernel, differentiable."""
    return record(LOG_SOFTMAX_BW, (grad, output), (dim,), [(output.shape, output.dtype)], output.device)[0]


def logsumexp(x: TensorBase, dim: Dims | None = None, keepdim: bool = False) -> TensorBase:
    """log(sum(exp(x))) over `dim` (an int or a tuple of ints; all dims when None), computed stably.

    >>> round(plast.logsumexp(plast.tensor([0.0, 0.0]), dim=0).item(), 4)
    0.6931
    """
    _tensor_check(x, "logsumexp")
    x = _floating(x)
    dims = R._dims(x, dim, "logsumexp")
    shape = R._reduced_shape(x.shape, dims, keepdim)
    if x.ndim == 0:
        out = record(LOGSUMEXP, (movement.reshape(x, (1,)),), ((0,), False), [((), x.dtype)], x.device)[0]
        return out
    return record(LOGSUMEXP, (x,), (dims, bool(keepdim)), [(shape, x.dtype)], x.device)[0]


# ---- cross_entropy and nll_loss ----
# Both reduce to loss = -sum(C * log_softmax(x)) with a coefficient tensor C (shaped like the input) that folds
# in targets, class weights, ignore_index, label smoothing and the mean's divisor; `loss_coeffs` materializes C
# for the backward rules.


def _gb(g, reduction):
    """The upstream gradient shaped to broadcast against the (N, C, d1, ...) input."""
    if reduction == "none":
        return movement.reshape(g, (g.shape[0], 1) + tuple(g.shape[1:]))
    return g


def _class_bcast(w, ndim):
    return movement.reshape(w, (1, w.shape[0]) + (1,) * (ndim - 2))


def _coeffs_adjoint(gc, w, eps, reduction, x):
    """Gradient w.r.t. probability targets T from the gradient w.r.t. C = w * ((1-eps) T + eps/K) / dn."""
    m = x.numel() // x.shape[1]
    scale = (1.0 - eps) / (m if reduction == "mean" else 1)
    gt = mul(gc, scale)
    if w is not None:
        gt = mul(gt, _class_bcast(w, x.ndim))
    return gt


def _coeffs_bw(node, h):
    kind, _, reduction, eps, xshape = node.args
    w = node.inputs[1] if len(node.inputs) > 1 else None
    gt = None
    if kind == "prob":
        m = 1
        for s in xshape:
            m *= s
        m //= xshape[1]
        gt = mul(h, (1.0 - eps) / (m if reduction == "mean" else 1))
        if w is not None:
            gt = mul(gt, _class_bcast(w, len(xshape)))
    return (gt,) + ((None,) if w is not None else ())


LOSS_COEFFS = register("loss_coeffs", cpu=K.loss_coeffs, backward=_coeffs_bw)


def _coeffs(t, w, kind, ignore_index, reduction, eps, x):
    inputs = (t,) if w is None else (t, w)
    args = (kind, ignore_index, reduction, eps, tuple(x.shape))
    return record(LOSS_COEFFS, inputs, args, [(x.shape, x.dtype)], x.device)[0]


def _xent_bw(node, g):
    x, t = node.inputs[:2]
    w = node.inputs[2] if len(node.inputs) > 2 else None
    kind, _, reduction, eps = node.args
    gx = record(XENT_BW, (g,) + tuple(node.inputs), node.args, [(x.shape, x.dtype)], x.device)[0]
    gt = None
    if kind == "prob" and t.requires_grad:
        gc = neg(mul(_gb(g, reduction), log_softmax(x, 1)))
        gt = _coeffs_adjoint(gc, w, eps, reduction, x)
    return (gx, gt) + ((None,) if w is not None else ())


def _xent_bw_bw(node, h):
    g, x, t = node.inputs[:3]
    w = node.inputs[3] if len(node.inputs) > 3 else None
    kind, ignore_index, reduction, eps = node.args
    c = _coeffs(t, w, kind, ignore_index, reduction, eps, x)
    p = softmax(x, 1)
    a = R.sum(c, 1, keepdim=True)
    gb = _gb(g, reduction)
    hq = mul(h, sub(mul(p, a), c))
    gg = R.sum(hq, 1) if reduction == "none" else R.sum(hq)
    gx = softmax_backward(mul(mul(h, gb), a), p, 1)
    gt = None
    if kind == "prob" and t.requires_grad:
        gc = mul(gb, sub(R.sum(mul(h, p), 1, keepdim=True), h))
        gt = _coeffs_adjoint(gc, w, eps, reduction, x)
    return (gg, gx, gt) + ((None,) if w is not None else ())


def _nll_bw(node, g):
    x, t = node.inputs[:2]
    w = node.inputs[2] if len(node.inputs) > 2 else None
    ignore_index, reduction = node.args
    c = _coeffs(t, w, "index", ignore_index, reduction, 0.0, x)
    return (neg(mul(_gb(g, reduction), c)), None) + ((None,) if w is not None else ())


XENT = register("cross_entropy", cpu=K.cross_entropy, backward=_xent_bw)
XENT_BW = register("cross_entropy_backward", cpu=K.cross_entropy_backward, backward=_xent_bw_bw)
NLL = register("nll_loss", cpu=K.nll_loss, backward=_nll_bw)


def _check_targets_now(t, k, ignore_index, op):
    arr = _realized_array(t)
    if arr is None or not arr.size:
        return
    valid = arr != ignore_index
    bad = valid & ((arr < 0) | (arr >= k))
    if bad.any():
        v = int(arr[bad].flat[0])
        raise IndexError(
            f"{op}: target {v} is out of bounds for {k} classes (expected 0 <= target < {k}, "
            f"or ignore_index={ignore_index})"
        )


def _prep_class_loss(input, target, weight, op, allow_prob):
    _tensor_check(input, op)
    _tensor_check(target, op, "target")
    _same_device(op, input, target, weight)
    x = _floating(input)
    if x.ndim == 0:
        raise ShapeError(f"{op}: input must have a class dimension, got a 0-d tensor")
    unbatched = x.ndim == 1
    k = x.shape[0] if unbatched else x.shape[1]
    if target.dtype.is_floating_point:
        if not allow_prob:
            raise DTypeError(f"{op}: target must hold class indices (int64 or int32), got {target.dtype}")
        if tuple(target.shape) != tuple(x.shape):
            raise ShapeError(
                f"{op}: probability targets must have the input's shape {tuple(x.shape)}, got "
                f"{tuple(target.shape)} (class-index targets must be int64)"
            )
        kind = "prob"
        target = movement.cast(target, x.dtype)
    else:
        if target.dtype not in (dtypes.int64, dtypes.int32):
            raise DTypeError(f"{op}: class-index targets must be int64 or int32, got {target.dtype}")
        expected = () if unbatched else (x.shape[0],) + tuple(x.shape[2:])
        if tuple(target.shape) != expected:
            raise ShapeError(
                f"{op}: input {tuple(x.shape)} needs a target of shape {expected}, got {tuple(target.shape)}"
            )
        kind = "index"
    if weight is not None:
        _tensor_check(weight, op, "weight")
        if tuple(weight.shape) != (k,):
            raise ShapeError(
                f"{op}: weight must have shape ({k},) (one per class), got {tuple(weight.shape)}"
            )
        weight = movement.cast(weight, x.dtype)
    if unbatched:
        x = movement.reshape(x, (1, k))
        target = movement.reshape(target, (1, k) if kind == "prob" else (1,))
    return x, target, weight, kind, unbatched, k


def cross_entropy(
    input: TensorBase,
    target: TensorBase,
    weight: TensorBase | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> TensorBase:
    """Cross-entropy between logits `input` (N, C, d1, ...) and class indices (N, d1, ...) or class
    probabilities (input's shape), as torch.nn.functional.cross_entropy. One fused kernel (log_softmax + nll).

    >>> logits = plast.tensor([[2.0, 0.0, 0.0]])
    >>> round(plast.cross_entropy(logits, plast.tensor([0])).item(), 4)
    0.2395
    """
    if _ac.active:  # autocast: on its FP32 list
        input, target, weight = _autocast.fp32_args(input, target, weight)
    reduction = _reduction(reduction, "cross_entropy", size_average, reduce)
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    x, t, w, kind, unbatched, k = _prep_class_loss(input, target, weight, "cross_entropy", True)
    if kind == "index":
        _check_targets_now(t, k, ignore_index, "cross_entropy")
    shape = (
        (t.shape if kind == "index" else (x.shape[0],) + tuple(x.shape[2:])) if reduction == "none" else ()
    )
    inputs = (x, t) if w is None else (x, t, w)
    out = record(
        XENT,
        inputs,
        (kind, int(ignore_index), reduction, float(label_smoothing)),
        [(shape, x.dtype)],
        x.device,
    )[0]
    if unbatched and reduction == "none":
        out = movement.reshape(out, ())
    return out


def nll_loss(
    input: TensorBase,
    target: TensorBase,
    weight: TensorBase | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> TensorBase:
    """Negative log-likelihood of log-probabilities `input` (N, C, d1, ...) at class indices (N, d1, ...).

    >>> plast.nll_loss(plast.tensor([[-1.0, -2.0]]), plast.tensor([1])).item()
    2.0
    """
    if _ac.active:  # autocast: on its FP32 list
        input, target, weight = _autocast.fp32_args(input, target, weight)
    reduction = _reduction(reduction, "nll_loss", size_average, reduce)
    x, t, w, _, unbatched, k = _prep_class_loss(input, target, weight, "nll_loss", False)
    _check_targets_now(t, k, ignore_index, "nll_loss")
    shape = t.shape if reduction == "none" else ()
    inputs = (x, t) if w is None else (x, t, w)
    out = record(NLL, inputs, (int(ignore_index), reduction), [(shape, x.dtype)], x.device)[0]
    if unbatched and reduction == "none":
        out = movement.reshape(out, ())
    return out


# ---- elementwise losses ----


_pair = _linalg.loss_pair  # compiled (ops/_linalg.pyx): checks, promotion and casts of (input, target)


def _weighted(loss, weight, reduction, op):
    if weight is None:
        return _reduce(loss, reduction)
    if tuple(weight.shape) != tuple(loss.shape):
        raise ValueError(
            f"{op}: weight must have the input's shape {tuple(loss.shape)}, got {tuple(weight.shape)}"
        )
    loss = mul(loss, weight)
    if reduction == "mean":
        return div(R.sum(loss), R.sum(weight))
    return _reduce(loss, reduction)


def mse_loss(
    input: TensorBase,
    target: TensorBase,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: TensorBase | None = None,
) -> TensorBase:
    """Mean squared error (targets broadcast as in torch).

    >>> plast.mse_loss(plast.tensor([1.0, 3.0]), plast.tensor([0.0, 0.0])).item()
    5.0
    """
    if _ac.active:  # autocast: on its FP32 list
        input, target, weight = _autocast.fp32_args(input, target, weight)
    if size_average is not None or reduce is not None or reduction not in _REDUCTIONS:
        reduction = _reduction(reduction, "mse_loss", size_average, reduce)
    x, t = _pair(input, target, "mse_loss")
    d = sub(x, t)
    if weight is None and reduction == "mean":  # the common case, without _weighted's calls
        return R.mean(mul(d, d))
    return _weighted(mul(d, d), weight, reduction, "mse_loss")


def l1_loss(
    input: TensorBase,
    target: TensorBase,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: TensorBase | None = None,
) -> TensorBase:
    """Mean absolute error.

    >>> plast.l1_loss(plast.tensor([1.0, -3.0]), plast.tensor([0.0, 0.0])).item()
    2.0
    """
    if _ac.active:  # autocast: on its FP32 list
        input, target, weight = _autocast.fp32_args(input, target, weight)
    reduction = _reduction(reduction, "l1_loss", size_average, reduce)
    x, t = _pair(input, target, "l1_loss")
    return _weighted(abs(sub(x, t)), weight, reduction, "l1_loss")


def smooth_l1_loss(
    input: TensorBase,
    target: TensorBase,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> TensorBase:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target).

    >>> plast.smooth_l1_loss(plast.tensor([0.5, 3.0]), plast.tensor([0.0, 0.0]), reduction="sum").item()
    2.625
    """
    if _ac.active:  # autocast: on its FP32 list
        input, target = _autocast.fp32_args(input, target)
    reduction = _reduction(reduction, "smooth_l1_loss", size_average, reduce)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    x, t = _pair(input, target, "smooth_l1_loss")
    a = abs(sub(x, t))
    if beta == 0:
        return _reduce(a, reduction)
    # min(|d|, beta) written with abs, so the composite needs no comparison op
    m = mul(sub(add(a, beta), abs(sub(a, beta))), 0.5)
    loss = add(mul(mul(m, m), 0.5 / beta), sub(a, m))
    return _reduce(loss, reduction)


def _scaled_grad(g, reduction, n):
    return div(g, float(n) if n else float("nan")) if reduction == "mean" else g


def _bce_bw(node, g):
    x, t = node.inputs[:2]
    w = node.inputs[2] if len(node.inputs) > 2 else None
    (reduction,) = node.args
    g = _scaled_grad(g, reduction, x.numel())
    gx = record(BCE_BW, (g,) + tuple(node.inputs), (), [(x.shape, x.dtype)], x.device)[0]
    gt = None
    if t.requires_grad:
        gt = mul(g, sub(log1p(neg(x)), log(x)))
        if w is not None:
            gt = mul(gt, w)
    return (gx, gt) + ((None,) if w is not None else ())


def _bce_bw_bw(node, h):
    g, x, t = node.inputs[:3]
    w = node.inputs[3] if len(node.inputs) > 3 else None
    hw = mul(h, w) if w is not None else h
    q = mul(x, sub(1.0, x))  # x (1 - x)
    d = sub(x, t)
    gg = div(mul(hw, d), q)
    # d/dx [(x - t) / (x - x^2)] = (q - d (1 - 2x)) / q^2
    gx = mul(mul(hw, g), div(sub(q, mul(d, sub(1.0, mul(x, 2.0)))), mul(q, q)))
    gt = neg(div(mul(hw, g), q))
    return (gg, gx, gt) + ((None,) if w is not None else ())


def _bce_logits_bw(node, g):
    x, t = node.inputs[:2]
    reduction, has_w, has_pw = node.args
    w = node.inputs[2] if has_w else None
    pw = node.inputs[2 + has_w] if has_pw else None
    g = _scaled_grad(g, reduction, x.numel())
    if w is not None:
        g = mul(g, w)
    s = sigmoid(x)
    if pw is None:
        gx = mul(g, sub(s, t))
    else:
        gx = mul(g, sub(mul(add(mul(sub(pw, 1.0), t), 1.0), s), mul(pw, t)))
    gt = None
    if t.requires_grad:
        sp = add(log1p(exp(neg(abs(x)))), relu(neg(x)))  # log(1 + exp(-x))
        gt = neg(x) if pw is None else add(neg(x), mul(sub(pw, 1.0), sp))
        gt = mul(g, gt)
    return (gx, gt) + (None,) * (has_w + has_pw)


BCE = register("binary_cross_entropy", cpu=K.binary_cross_entropy, backward=_bce_bw)
BCE_BW = register("binary_cross_entropy_backward", cpu=K.binary_cross_entropy_backward, backward=_bce_bw_bw)
BCE_LOGITS = register(
    "binary_cross_entropy_with_logits", cpu=K.binary_cross_entropy_with_logits, backward=_bce_logits_bw
)


def _bce_weight(w, x, op, name="weight"):
    if w is None:
        return None
    _tensor_check(w, op, name)
    _same_device(op, x, w)
    shape = broadcast_shapes(w.shape, x.shape, op=f"{op} ({name})")
    if shape != tuple(x.shape):
        raise ShapeError(
            f"{op}: {name} of shape {tuple(w.shape)} does not broadcast to the input {tuple(x.shape)}"
        )
    return movement.cast(w, x.dtype)


def binary_cross_entropy(
    input: TensorBase,
    target: TensorBase,
    weight: TensorBase | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> TensorBase:
    """-w (t log x + (1 - t) log(1 - x)) for probabilities x (logs clamped at -100, as in torch).

    >>> round(plast.binary_cross_entropy(plast.tensor([0.5]), plast.tensor([1.0])).item(), 4)
    0.6931
    """
    if _ac.active:  # autocast: on its FP32 list
        input, target, weight = _autocast.fp32_args(input, target, weight)
    reduction = _reduction(reduction, "binary_cross_entropy", size_average, reduce)
    x, t = _pair(input, target, "binary_cross_entropy")
    if tuple(t.shape) != tuple(x.shape):
        raise ShapeError(
            f"binary_cross_entropy: target shape {tuple(t.shape)} must equal the input shape {tuple(x.shape)}"
        )
    w = _bce_weight(weight, x, "binary_cross_entropy")
    inputs = (x, t) if w is None else (x, t, w)
    shape = x.shape if reduction == "none" else ()
    return record(BCE, inputs, (reduction,), [(shape, x.dtype)], x.device)[0]


def binary_cross_entropy_with_logits(
    input: TensorBase,
    target: TensorBase,
    weight: TensorBase | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    pos_weight: TensorBase | None = None,
) -> TensorBase:
    """Binary cross-entropy on logits, computed stably in one kernel; `pos_weight` weighs positive examples.

    >>> round(plast.binary_cross_entropy_with_logits(plast.tensor([0.0]), plast.tensor([1.0])).item(), 4)
    0.6931
    """
    if _ac.active:  # autocast: on its FP32 list
        input, target, weight, pos_weight = _autocast.fp32_args(input, target, weight, pos_weight)
    op = "binary_cross_entropy_with_logits"
    reduction = _reduction(reduction, op, size_average, reduce)
    x, t = _pair(input, target, op)
    if tuple(t.shape) != tuple(x.shape):
        raise ShapeError(f"{op}: target shape {tuple(t.shape)} must equal the input shape {tuple(x.shape)}")
    w = _bce_weight(weight, x, op)
    pw = _bce_weight(pos_weight, x, op, "pos_weight")
    inputs = (x, t) + ((w,) if w is not None else ()) + ((pw,) if pw is not None else ())
    shape = x.shape if reduction == "none" else ()
    return record(
        BCE_LOGITS, inputs, (reduction, w is not None, pw is not None), [(shape, x.dtype)], x.device
    )[0]


# ---- addmm and linear ----


# compiled (ops/_linalg.pyx, with the addmm row and its backward rule): every Linear layer calls them each step
ADDMM = _linalg.ADDMM
addmm, linear = _linalg.addmm, _linalg.linear


# ---- embedding and one_hot ----


def _emb_bw(node, g):
    ids, w = node.inputs
    return None, _embedding_backward(g, ids, w.shape[0], node.args[0])


def _emb_freq_bw(node, g):
    """scale_grad_by_freq: each row's gradient divided by how often its id occurs in the batch."""
    ids, w = node.inputs
    num = w.shape[0]
    gw = _embedding_backward(g, ids, num, node.args[0])
    # the counts come from the same scatter-add kernel, run on a column of ones
    one = movement.expand(scalar_tensor(1.0, g.dtype, g.device), tuple(ids.shape) + (1,))
    counts = _embedding_backward(one, ids, num, None)
    return None, div(gw, clamp_min(counts, 1.0))


def _emb_bw_bw(node, h):
    # the adjoint of the scatter-add is a gather that leaves padding rows at zero
    g, ids = node.inputs
    _, padding_idx = node.args
    out = record(
        EMBEDDING, (ids, h), (padding_idx, True), [(tuple(ids.shape) + (h.shape[1],), h.dtype)], h.device
    )
    return out[0], None


EMBEDDING = register("embedding", cpu=K.embedding, backward=_emb_bw)
# the same lookup, whose backward scales each row's gradient by 1 / (its id's count): scale_grad_by_freq=True
EMBEDDING_FREQ = register("embedding_scale_grad_by_freq", cpu=K.embedding, backward=_emb_freq_bw)
EMBEDDING_BW = register("embedding_backward", cpu=K.embedding_backward, backward=_emb_bw_bw)


def _embedding_backward(g, ids, num, padding_idx):
    shape = (num, g.shape[-1])
    return record(EMBEDDING_BW, (g, ids), (num, padding_idx), [(shape, g.dtype)], g.device)[0]


def _check_ids_now(ids, n, op, what):
    arr = _realized_array(ids)
    if arr is not None and arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise IndexError(f"{op}: {what} {bad} is out of range for {n} rows (expected 0 <= {what} < {n})")


def embedding(
    input: TensorBase,
    weight: TensorBase,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> TensorBase:
    """Rows of `weight` picked by integer ids of any shape; output is ids.shape + (embedding_dim,).
    The row at `padding_idx` gets no gradient. With `max_norm`, the rows the ids pick whose `norm_type`-norm
    exceeds max_norm are first rescaled to that norm IN PLACE in `weight` (as torch does, without gradient);
    `scale_grad_by_freq` divides each row's gradient by its id's count in `input`.

    >>> plast.embedding(plast.tensor([[0, 2]]), plast.eye(3)).tolist()
    [[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]]
    """
    _tensor_check(input, "embedding")
    _tensor_check(weight, "embedding", "weight")
    _same_device("embedding", input, weight)
    if sparse:
        raise NotImplementedError(
            "embedding: sparse=True needs sparse gradients, which plast doesn't have; use sparse=False "
            "(the gradient is then a dense (num_embeddings, embedding_dim) tensor)"
        )
    if input.dtype not in (dtypes.int64, dtypes.int32):
        raise DTypeError(f"embedding: ids must be int64 or int32, got {input.dtype}")
    if weight.ndim != 2:
        raise ShapeError(
            f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got {tuple(weight.shape)}"
        )
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise IndexError(f"embedding: padding_idx {padding_idx} must be within num_embeddings ({num})")
        padding_idx = padding_idx + num if padding_idx < 0 else padding_idx
    _check_ids_now(input, num, "embedding", "id")
    if max_norm is not None:
        _embedding_renorm_(weight, input, float(max_norm), float(norm_type))
    shape = tuple(input.shape) + (weight.shape[1],)
    op = EMBEDDING_FREQ if scale_grad_by_freq else EMBEDDING
    # args: (padding_idx, zero the padding rows); only double backward's gather zeroes them
    return record(op, (input, weight), (padding_idx, False), [(shape, weight.dtype)], weight.device)[0]


def _embedding_renorm_(weight, ids, max_norm, norm_type):
    """Rescale, in place and without gradient, the rows of weight that ids pick and whose norm exceeds max_norm,
    to max_norm / (norm + 1e-7) times themselves (torch's embedding_renorm_). Repeated ids write the same row
    value, so no deduplication is needed."""
    if ids.numel() == 0:
        return
    flat = movement.reshape(ids, (ids.numel(),))
    with no_grad():
        rows = getitem(weight, flat)
        norms = R.norm(rows, norm_type, dim=1, keepdim=True)
        scale = where(gt(norms, max_norm), div(max_norm, add(norms, 1e-7)), 1.0)
        index_put_(weight, (flat,), mul(rows, scale))


def one_hot(tensor: TensorBase, num_classes: int = -1) -> TensorBase:
    """int64 one-hot encoding with a new last dim of size num_classes (max + 1 when -1).

    >>> plast.one_hot(plast.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    _tensor_check(tensor, "one_hot")
    if tensor.dtype not in (dtypes.int64, dtypes.int32):
        raise DTypeError(f"one_hot: class indices must be int64 or int32, got {tensor.dtype}")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise ValueError(
                "one_hot: can't infer the number of classes from an empty tensor; pass num_classes"
            )
        arr = tensor.numpy()
        num_classes = int(arr.max()) + 1
    if not isinstance(num_classes, int) or num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be a non-negative int or -1, got {num_classes!r}")
    _check_ids_now(tensor, num_classes, "one_hot", "class index")
    shape = tuple(tensor.shape) + (num_classes,)
    return record(ONE_HOT, (tensor,), (num_classes,), [(shape, dtypes.int64)], tensor.device)[0]


ONE_HOT = register("one_hot", cpu=K.one_hot)


# ---- layer_norm, rms_norm ----


def _layer_norm_bw(node, gy, gmean=None, grstd=None):
    """Gradients of layer_norm's three outputs (y, mean, rstd) with respect to x, weight and bias.

    The plain backward is one fused kernel. When a graph of the backward is wanted (create_graph=True) it is
    written in plast ops instead, on the saved mean and rstd, so the gradient of the gradient flows back through
    them into this rule again (as gmean / grstd): every order of derivative works."""
    x = node.inputs[0]
    k, _, has_w, has_b = node.args
    _, mean, rstd = _outputs(node)
    w = node.inputs[1] if has_w else None
    ns = tuple(x.shape[x.ndim - k :])
    dims = tuple(range(x.ndim - k, x.ndim))
    n = float(math.prod(ns))
    gx = gw = gb = None
    if gy is not None:
        graph = is_grad_enabled() and any(t is not None and t.requires_grad for t in (gy, x, w))
        if graph:
            gx, gw, gb = _layer_norm_bw_ops(gy, x, mean, rstd, w, dims)
        else:
            ins = (gy, x, mean, rstd) + ((w,) if w is not None else ())
            specs = [(x.shape, x.dtype), (ns, x.dtype), (ns, x.dtype)]
            gx, gw, gb = record(LAYER_NORM_BW, ins, (k,), specs, x.device)
    # mean = sum(x) / n, so d mean / dx = 1 / n; rstd = (var + eps)^-1/2, so d rstd / dx = -rstd^2 * xhat / n
    if gmean is not None:
        gx = _add_grad(gx, movement.expand(div(gmean, n), x.shape))
    if grstd is not None:
        xhat = mul(sub(x, mean), rstd)
        gx = _add_grad(gx, mul(xhat, div(mul(grstd, mul(rstd, rstd)), -n)))
    return (gx,) + ((gw,) if has_w else ()) + ((gb,) if has_b else ())


def _add_grad(acc, g):
    return g if acc is None else add(acc, g)


def _layer_norm_bw_ops(gy, x, mean, rstd, w, dims):
    """layer_norm's backward in plast ops (differentiable): (gx, gw, gb)."""
    lead = tuple(range(x.ndim - len(dims)))
    xhat = mul(sub(x, mean), rstd)
    gxhat = mul(gy, w) if w is not None else gy
    m1 = R.mean(gxhat, dims, keepdim=True)
    m2 = R.mean(mul(gxhat, xhat), dims, keepdim=True)
    gx = mul(rstd, sub(sub(gxhat, m1), mul(xhat, m2)))
    gyx = mul(gy, xhat)
    gw = R.sum(gyx, lead) if lead else gyx
    gb = R.sum(gy, lead) if lead else gy
    return gx, gw, gb


LAYER_NORM = register("layer_norm", cpu=K.layer_norm, backward=_layer_norm_bw, n_outputs=3)
# The fused backward row is only recorded when no graph of the backward is wanted (see _layer_norm_bw), so it
# needs no backward rule of its own.
LAYER_NORM_BW = register("layer_norm_backward", cpu=K.layer_norm_backward, n_outputs=3)


def _normalized(x, normalized_shape, op):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    ns = tuple(int(s) for s in normalized_shape)
    k = len(ns)
    if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k :]) != ns:
        raise ShapeError(
            f"{op}: normalized_shape {ns} must match the input's trailing dims; input shape is {tuple(x.shape)}"
        )
    return ns, k


def _affine_param(p, ns, x, op, name):
    if p is None:
        return None
    _tensor_check(p, op, name)
    _same_device(op, x, p)
    if tuple(p.shape) != ns:
        raise ShapeError(f"{op}: {name} must have the normalized shape {ns}, got {tuple(p.shape)}")
    return movement.cast(p, x.dtype)


def layer_norm(
    input: TensorBase,
    normalized_shape: int | ShapeLike,
    weight: TensorBase | None = None,
    bias: TensorBase | None = None,
    eps: float = 1e-5,
) -> TensorBase:
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing `normalized_shape` dims, one kernel.

    >>> [round(v, 3) for v in plast.layer_norm(plast.tensor([[1.0, 3.0]]), (2,))[0].tolist()]
    [-1.0, 1.0]
    """
    _tensor_check(input, "layer_norm")
    x = _floating(input)
    ns, k = _normalized(x, normalized_shape, "layer_norm")
    w = _affine_param(weight, ns, x, "layer_norm", "weight")
    b = _affine_param(bias, ns, x, "layer_norm", "bias")
    stat = tuple(x.shape[: x.ndim - k]) + (1,) * k
    ins = (x,) + ((w,) if w is not None else ()) + ((b,) if b is not None else ())
    specs = [(x.shape, x.dtype), (stat, x.dtype), (stat, x.dtype)]
    return record(LAYER_NORM, ins, (k, float(eps), w is not None, b is not None), specs, x.device)[0]


def rms_norm(
    input: TensorBase,
    normalized_shape: int | ShapeLike,
    weight: TensorBase | None = None,
    eps: float | None = None,
) -> TensorBase:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing dims (eps defaults to the dtype's machine epsilon).

    >>> plast.rms_norm(plast.tensor([[3.0, 4.0]]), (2,), eps=0.0).shape
    plast.Size([1, 2])
    """
    import numpy as np

    _tensor_check(input, "rms_norm")
    x = _floating(input)
    ns, k = _normalized(x, normalized_shape, "rms_norm")
    w = _affine_param(weight, ns, x, "rms_norm", "weight")
    if eps is None:
        eps = float(np.finfo(x.dtype.np).eps)
    dims = tuple(range(x.ndim - k, x.ndim))
    ms = R.mean(mul(x, x), dims, keepdim=True)
    y = mul(x, div(1.0, sqrt(add(ms, float(eps)))))
    return mul(y, w) if w is not None else y


# ---- dropout ----

DROPOUT_MASK = register("dropout_mask", cpu=K.dropout_mask)


def dropout(
    input: TensorBase,
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
    *,
    generator: Generator | None = None,
) -> TensorBase:
    """Zero each element with probability p and scale the rest by 1/(1-p); the mask comes from `generator`'s
    Philox stream (the global one by default). Identity when not training or p == 0.

    >>> plast.dropout(plast.ones(4), p=0.0).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    _tensor_check(input, "dropout")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input

    dt = input.dtype if input.dtype.is_floating_point else dtypes.default_float
    u = rand(tuple(input.shape), generator=generator, dtype=dt, device=input.device)
    mask = record(DROPOUT_MASK, (u,), (float(p),), [(input.shape, dt)], input.device)[0]
    if inplace:
        return mul_(input, mask)
    return mul(input, mask)


# ---- padding ----


def _pad_indices(n, left, right, mode):
    """Source index along one dim for each padded position (reflect / replicate / circular)."""
    import numpy as np

    pos = np.arange(-left, n + right)
    if mode == "replicate":
        src = np.clip(pos, 0, n - 1)
    elif mode == "reflect":
        period = 2 * (n - 1)
        m = np.mod(pos, period) if period else np.zeros_like(pos)
        src = np.where(m >= n, period - m, m)
    else:  # circular
        src = np.mod(pos, n)
    return src


def pad(x: TensorBase, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> TensorBase:
    """torch.nn.functional.pad: `pad` lists (left, right) amounts for the last dim first, then the one before...

    Negative amounts crop (constant mode). Modes: 'constant' (with `value`, default 0), 'reflect', 'replicate',
    'circular'.

    >>> plast.pad(plast.ones(2), (1, 2)).tolist()
    [0.0, 1.0, 1.0, 0.0, 0.0]
    """
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise ShapeError(f"pad: padding length must be even (pairs of left, right), got {len(pad)}")
    if len(pad) // 2 > x.ndim:
        raise ShapeError(f"pad: padding length {len(pad)} is too large for a tensor with {x.ndim} dims")
    per_dim = {x.ndim - 1 - i: (pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)}
    if mode == "constant":
        shape = list(x.shape)
        base = [0] * x.ndim
        out_shape = list(x.shape)
        put = [0] * x.ndim
        for d, (lft, rgt) in per_dim.items():
            size = x.shape[d] + min(lft, 0) + min(rgt, 0)
            if size < 0:
                raise ShapeError(
                    f"pad: padding {(lft, rgt)} makes dim {d} (size {x.shape[d]}) negative; input {tuple(x.shape)}"
                )
            base[d] = -min(lft, 0)
            shape[d] = size
            put[d] = max(lft, 0)
            out_shape[d] = size + max(lft, 0) + max(rgt, 0)
        xc = strided_view(x, shape, _identity_map(x.ndim), base)
        fill = 0 if value is None else value
        if not x.dtype.is_floating_point and isinstance(fill, float):
            fill = int(fill)
        return strided_scatter(xc, out_shape, _identity_map(x.ndim), put, fill)
    if mode not in ("reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if value not in (None, 0):
        raise ValueError(
            f"pad: value is only used with mode='constant', got value={value} with mode={mode!r}"
        )

    out = x
    for d, (lft, rgt) in sorted(per_dim.items()):
        n = x.shape[d]
        if mode == "reflect" and (lft >= n or rgt >= n):
            raise ShapeError(
                f"pad: reflect padding {(lft, rgt)} must be smaller than the size of dim {d} ({n})"
            )
        if mode == "circular" and (lft > n or rgt > n):
            raise ShapeError(f"pad: circular padding {(lft, rgt)} can't exceed the size of dim {d} ({n})")
        if mode == "replicate" and n == 0 and (lft or rgt):
            raise ShapeError(f"pad: can't replicate-pad dim {d}, which is empty")
        if lft < 0 or rgt < 0:
            raise ShapeError(f"pad: negative padding is only allowed with mode='constant', got {(lft, rgt)}")
        if lft or rgt:
            out = index_select(out, d, tensor(_pad_indices(n, lft, rgt, mode)))
    return out if out is not x else movement.clone(x)


__all__ = [
    "softmax",
    "log_softmax",
    "logsumexp",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "addmm",
    "linear",
    "embedding",
    "one_hot",
    "layer_norm",
    "rms_norm",
    "dropout",
    "pad",
]
