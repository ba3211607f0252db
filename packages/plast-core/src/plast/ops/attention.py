"""Fused scaled-dot-product attention: one blocked kernel forward, one backward, no L x S score matrix.

`flash_attention` is what ``scaled_dot_product_attention`` (below) routes to when the case fits (no mask,
no dropout, float32/float64, q, k, v of the same batch shape and at least 3-d); `flash_attention_masked` when
the mask is a bool padding mask (keys only, the same for every query row), which the kernel applies by packing
only the visible keys (its backward is written in plast ops). The forward ops have two outputs: the attention
output and the per-row logsumexp of the scaled scores, which the backward kernel reads instead of recomputing
the softmax statistics. With ``create_graph`` the backward rule writes the
gradients in plast ops instead (recomputing the scores), so double backward works.
"""

from __future__ import annotations

import math
import weakref

from .._core import autocast_state as _ac
from .._core import dtypes
from .._core import grad_mode as autograd_state
from .._core.errors import ShapeError
from .._core.hints import TensorBase
from .._core.shapes import broadcast_shapes
from ..graph._graph import record
from ..kernels.cpu import kernels_attention as K
from ..kernels.cpu import kernels_nn as KN
from . import autocast as _autocast
from . import movement
from .creation import tensor
from .elementwise import add, mul
from .linalg import matmul
from .nn import _safe_softmax, _same_device, _tensor_check, dropout, softmax_backward
from .random import Generator
from .registry import register

# NOTE: a node holds its outputs by weak reference and callers only keep `out`, so the lse output is kept here
# for as long as `out` lives (backward then reads it instead of running the forward again): id(out) -> (weak
# reference to out, lse), the entry dropped by the reference's callback. Not a WeakKeyDictionary: keyed by the
# node it would never be released (lse refers to its node), and keyed by a tensor it would compare with ==.
_SAVED_LSE = {}


def _keep_lse(out, lse):
    key = id(out)
    _SAVED_LSE[key] = (weakref.ref(out, lambda _r: _SAVED_LSE.pop(key, None)), lse)


def _saved(node):
    out = node.outputs[0]()
    entry = _SAVED_LSE.get(id(out)) if out is not None else None
    if entry is not None and entry[0]() is out:
        return out, entry[1]
    return record(node.op, node.inputs, node.args, node.specs, node.device)


def _composite_grads(q, k, v, g, g_lse, scale, causal, key_mask=None):
    """dq, dk, dv written in plast ops (differentiable again): the scores and softmax are recomputed.
    key_mask: the masked kernel's (*batch, head, key) bool mask."""
    tr = lambda t: movement.transpose(t, -2, -1)
    s = mul(matmul(q, tr(k)), scale)
    if causal:
        s = add(s, _causal_mask(q.shape[-2], k.shape[-2], q.dtype, q.device))
    if key_mask is not None:
        km = movement.reshape(key_mask, tuple(key_mask.shape[:-1]) + (1, key_mask.shape[-1]))
        s = add(s, _additive_mask(km, q.dtype))
    p = _safe_softmax(s, -1)
    dv = ds = None
    if g is not None:
        dv = matmul(tr(p), g)
        ds = softmax_backward(matmul(g, tr(v)), p, -1)
    if g_lse is not None:  # d lse / d s = softmax(s)
        t = mul(p, movement.reshape(g_lse, tuple(g_lse.shape) + (1,)))
        ds = t if ds is None else add(ds, t)
    ds = mul(ds, scale)
    return matmul(ds, k), matmul(tr(ds), q), dv


def _flash_bw(node, g, g_lse=None):
    q, k, v = node.inputs
    scale, causal = node.args
    if autograd_state.is_grad_enabled() or g is None or g_lse is not None:
        return _composite_grads(q, k, v, g, g_lse, scale, causal)
    out, lse = _saved(node)
    specs = [(q.shape, q.dtype), (k.shape, k.dtype), (v.shape, v.dtype)]
    return tuple(record(FLASH_BW, (q, k, v, out, lse, g), node.args, specs, q.device))


def _flash_bw_bw(node, *grads):
    # Only reachable if the backward kernel was recorded with gradient mode on, which _flash_bw never does.
    raise NotImplementedError(
        "double backward through the fused attention backward kernel is not implemented; backward with "
        "create_graph=True records the gradients in plast ops instead"
    )


def _flash_masked_bw(node, g, g_lse=None):
    # NOTE: the kernel's backward takes no mask: the gradients are written in plast ops (padding masks are an
    # inference case here: BERT's encode; training with one costs the composite's L x S scores in backward only)
    q, k, v, m = node.inputs
    (scale,) = node.args
    return (*_composite_grads(q, k, v, g, g_lse, scale, False, key_mask=m), None)


FLASH = register("flash_attention", cpu=K.flash_attention, backward=_flash_bw, n_outputs=2)
FLASH_MASKED = register(
    "flash_attention_masked", cpu=K.flash_attention_masked, backward=_flash_masked_bw, n_outputs=2
)
FLASH_BW = register(
    "flash_attention_backward", cpu=K.flash_attention_backward, backward=_flash_bw_bw, n_outputs=3
)


def flash_attention(q, k, v, scale, causal):
    """softmax(q @ k^T * scale (+ torch's top-left causal mask)) @ v in one kernel.

    The caller (scaled_dot_product_attention) has checked the operands: same device and floating dtype
    (float32/float64), at least 3-d, equal batch dims, q and k with the same last dim, both last dims >= 1.
    """
    specs = [(tuple(q.shape[:-1]) + (v.shape[-1],), q.dtype), (tuple(q.shape[:-1]), q.dtype)]
    out, lse = record(FLASH, (q, k, v), (float(scale), bool(causal)), specs, q.device)
    if out.requires_grad:
        _keep_lse(out, lse)
    return out


def flash_attention_masked(q, k, v, key_mask, scale):
    """flash_attention (not causal) over the keys that key_mask, a bool (*batch, head, key) tensor broadcast to
    q's batch dims, marks True: a padding mask, which the kernel applies by packing only the visible keys."""
    specs = [(tuple(q.shape[:-1]) + (v.shape[-1],), q.dtype), (tuple(q.shape[:-1]), q.dtype)]
    return record(FLASH_MASKED, (q, k, v, key_mask), (float(scale),), specs, q.device)[0]


# ---- scaled_dot_product_attention: the fused kernel above where it fits, else a composite ----

BOOL_MASK = register("bool_mask_to_additive", cpu=KN.bool_mask_to_additive)


def _additive_mask(mask, dt):
    return record(BOOL_MASK, (mask,), (dt.code,), [(mask.shape, dt)], mask.device)[0]


def _causal_mask(L, S, dt, device):
    import numpy as np

    return _additive_mask(tensor(np.tril(np.ones((L, S), dtype=bool)), device=device), dt)


def scaled_dot_product_attention(
    query: TensorBase,
    key: TensorBase,
    value: TensorBase,
    attn_mask: TensorBase | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    generator: Generator | None = None,
) -> TensorBase:
    """softmax(q @ k^T * scale + mask) @ v with torch's semantics: a bool mask marks positions that may be
    attended (True), a float mask is added to the scores; is_causal masks the upper triangle. Rows with
    nothing to attend give zeros. Without dropout, float32/float64 operands of at least 3 dims with equal batch
    dims go to the blocked kernel of ops/attention.py (no L x S matrix), with no mask or a bool mask that masks
    keys only (a padding mask: its query dim broadcasts); the rest is a composite.

    >>> q = plast.ones(1, 2, 4)
    >>> plast.scaled_dot_product_attention(q, q, q).shape
    plast.Size([1, 2, 4])
    """
    if _ac.active:  # autocast: on its LOWER list
        query, key, value, attn_mask = _autocast.lower_args((query, key, value, attn_mask)) or (
            query,
            key,
            value,
            attn_mask,
        )
    op = "scaled_dot_product_attention"
    for name, t in (("query", query), ("key", key), ("value", value)):
        _tensor_check(t, op, name)
        if t.ndim < 2:
            raise ShapeError(
                f"{op}: {name} must have at least 2 dims (..., seq, features), got {tuple(t.shape)}"
            )
    _same_device(op, query, key, value, attn_mask)
    if query.shape[-1] != key.shape[-1]:
        raise ShapeError(
            f"{op}: query {tuple(query.shape)} and key {tuple(key.shape)} must have the same last dim"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ShapeError(
            f"{op}: key {tuple(key.shape)} and value {tuple(value.shape)} must have the same length"
        )
    if attn_mask is not None and is_causal:
        raise ValueError(f"{op}: pass either attn_mask or is_causal=True, not both (as in torch)")
    dt = dtypes.promote(dtypes.promote(query.dtype, key.dtype), value.dtype)
    if not dt.is_floating_point:
        dt = dtypes.default_float
    q, k, v = (movement.cast(t, dt) for t in (query, key, value))
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        hq, hk = q.shape[-3], k.shape[-3]
        if hq % hk or k.shape[-3] != v.shape[-3]:
            raise ShapeError(
                f"{op}: with enable_gqa, query heads ({hq}) must be a multiple of key/value heads ({hk})"
            )
        k, v = (_repeat_heads(t, hq // hk) for t in (k, v))
    L, S = q.shape[-2], k.shape[-2]
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if not dropout_p > 0.0 and _flash_fits(q, k, v, sc):
        if attn_mask is None:
            return flash_attention(q, k, v, sc, is_causal)
        key_mask = _key_mask(attn_mask, q, S)
        if key_mask is not None:
            return flash_attention_masked(q, k, v, key_mask, sc)
    scores = mul(matmul(q, movement.transpose(k, -2, -1)), sc)
    if is_causal:
        scores = add(scores, _causal_mask(L, S, dt, q.device))
    elif attn_mask is not None:
        _tensor_check(attn_mask, op, "attn_mask")
        broadcast_shapes(attn_mask.shape, scores.shape, op=f"{op} (attn_mask)")
        m = _additive_mask(attn_mask, dt) if attn_mask.dtype is dtypes.bool_ else movement.cast(attn_mask, dt)
        scores = add(scores, m)
    attn = _safe_softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, generator=generator)
    return matmul(attn, v)


def _flash_fits(q, k, v, scale):
    """The blocked kernel takes these operands: CPU, float32/float64 (or bfloat16/float16, which its row computes
    in float32 and rounds once: the recorder widens them), at least 3-d with equal batch dims (after GQA's
    repeat), nonempty head dims, a finite scale."""
    return (
        q.device.type == "cpu"
        and q.dtype in (dtypes.float32, dtypes.float64, dtypes.bfloat16, dtypes.float16)
        and q.ndim >= 3
        and q.ndim == k.ndim == v.ndim
        and tuple(q.shape[:-2]) == tuple(k.shape[:-2]) == tuple(v.shape[:-2])
        and q.shape[-1] >= 1
        and v.shape[-1] >= 1
        and math.isfinite(scale)
    )


def _key_mask(mask, q, S):
    """A bool attn_mask that masks keys only (its query dim is 1 or absent: a padding mask, (B, 1, 1, S) in
    BERT) as a (*q.shape[:-2], S) view for the masked kernel; None for any other mask (the composite takes it)."""
    if not isinstance(mask, TensorBase) or mask.dtype is not dtypes.bool_:
        return None
    shape, lead = tuple(mask.shape), tuple(q.shape[:-2])
    if not 1 <= len(shape) <= q.ndim or shape[-1] not in (1, S) or (len(shape) >= 2 and shape[-2] != 1):
        return None
    if any(m not in (1, n) for m, n in zip(reversed(shape[:-2]), reversed(lead))):
        return None
    km = movement.reshape(mask, shape[:-2] + shape[-1:]) if len(shape) >= 2 else mask
    return movement.expand(km, lead + (S,))


def _repeat_heads(t, r):
    shape = tuple(t.shape)
    e = movement.expand(movement.reshape(t, shape[:-2] + (1,) + shape[-2:]), shape[:-2] + (r,) + shape[-2:])
    return movement.reshape(e, shape[:-3] + (shape[-3] * r,) + shape[-2:])


__all__ = ["scaled_dot_product_attention"]
