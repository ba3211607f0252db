"""Fused scaled-dot-product attention: one blocked kernel forward, one backward, no L x S score matrix.

`flash_attention` is what ``scaled_dot_product_attention`` (ops/nn.py) routes to when the case fits (no mask,
no dropout, float32/float64, q, k, v of the same batch shape and at least 3-d). The forward op has two
outputs: the attention output and the per-row logsumexp of the scaled scores, which its backward kernel
reads instead of recomputing the softmax statistics. With ``create_graph`` the backward rule writes the
gradients in plast ops instead (recomputing the scores), so double backward works.
"""

import weakref

from .._core import grad_mode as autograd_state
from ..graph._graph import record
from ..kernels.cpu import kernels_attention as K
from . import movement
from .elementwise import add, mul
from .linalg import matmul
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


def _composite_grads(q, k, v, g, g_lse, scale, causal):
    """dq, dk, dv written in plast ops (differentiable again): the scores and softmax are recomputed."""
    from .nn import _causal_mask, _safe_softmax, softmax_backward

    tr = lambda t: movement.transpose(t, -2, -1)
    s = mul(matmul(q, tr(k)), scale)
    if causal:
        s = add(s, _causal_mask(q.shape[-2], k.shape[-2], q.dtype, q.device))
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
    if autograd_state.grad_enabled or g is None or g_lse is not None:
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


FLASH = register("flash_attention", cpu=K.flash_attention, backward=_flash_bw, n_outputs=2)
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
