"""CPU kernels of the fused attention ops (ops/attention.py) over the blocked C kernel in _attention.

Same contract as kernels.py: ``kernel(node, inputs, outputs)``, inputs with any strides, outputs contiguous.
The C kernel reads every operand as (batch, head, row, feature) with element strides, so the usual
non-contiguous inputs (q, k, v split from one projection and transposed into heads, an expanded upstream
gradient) are read in place. Only leading dims whose strides don't merge into one batch stride are copied.
"""

import numpy as np

from . import _attention
from .kernels import address, np_view


def _code(t):
    code = t.dtype.code
    if code not in (_attention.F32, _attention.F64):
        raise TypeError(f"attention kernel: dtype {t.dtype} is not supported; expected float32 or float64")
    return code


def _lead(shape, strides, nb):
    """(size, stride) of dims [0, nb - 1) merged into one batch dim, or None when they don't merge. Size-1 dims
    don't count; with no other dims the stride is 0."""
    size, stride, inner = 1, 0, None  # inner: (stride, size) of the next merged dim inward
    for d in range(nb - 2, -1, -1):
        n = shape[d]
        if n == 1:
            continue
        if inner is None:
            stride = strides[d]
        elif strides[d] != inner[0] * inner[1]:
            return None
        inner = (strides[d], n)
        size *= n
    return size, stride


def _operand(t, tail):
    """(address, strides, keep) for tensor t of shape (*lead, heads, *trailing) with `tail` trailing dims (2 for
    rows x features, 1 for the per-row lse): strides as (batch, head, row[, feature]) in elements. `keep` holds
    a contiguous copy alive when the leading dims had to be copied."""
    shape, strides = tuple(t._shape), tuple(t._strides)
    if t.numel() == 0:
        return 0, (0,) * (2 + tail), None
    nb = len(shape) - tail
    lead = _lead(shape, strides, nb)
    if lead is None:
        a = np.ascontiguousarray(np_view(t))
        strides = tuple(s // a.itemsize for s in a.strides)
        lead = _lead(shape, strides, nb)
        return a.__array_interface__["data"][0], (lead[1],) + strides[nb - 1 :], a
    return address(t), (lead[1],) + strides[nb - 1 :], None


def _dims(q, k, v):
    """(B, H, L, S, D, Dv): B is the product of q's dims before the head dim."""
    shape = tuple(q._shape)
    B = int(np.prod(shape[:-3], dtype=np.int64))
    return (B, shape[-3], shape[-2], k._shape[-2], shape[-1], v._shape[-1])


def flash_attention(node, inputs, outputs):
    """out, lse of softmax(q k^T * scale (+ causal mask)) v (node.args: scale, causal)."""
    scale, causal = node.args
    q, k, v = inputs
    out, lse = outputs
    ops = [_operand(t, 2) for t in (q, k, v, out)] + [_operand(lse, 1)]
    args = [x for a, s, _ in ops for x in (a, s)]
    _attention.forward(_code(q), _dims(q, k, v), scale, causal, *args)


def flash_attention_masked(node, inputs, outputs):
    """out, lse of softmax(q k^T * scale) v over the keys a bool mask lets each (batch, head) see (node.args:
    scale); the mask is (*batch, head, key), broadcast views welcome (expanded dims are read in place)."""
    (scale,) = node.args
    q, k, v, m = inputs
    out, lse = outputs
    ops = [_operand(t, 2) for t in (q, k, v)] + [_operand(m, 1), _operand(out, 2), _operand(lse, 1)]
    args = [x for a, s, _ in ops for x in (a, s)]
    if m.numel() == 0:  # no keys (S == 0): nothing is read through the mask
        _attention.forward(_code(q), _dims(q, k, v), scale, False, *args[:6], *args[8:])
        return
    _attention.forward_masked(_code(q), _dims(q, k, v), scale, *args)


def flash_attention_backward(node, inputs, outputs):
    """dq, dk, dv from q, k, v, the forward's out and lse, and the output gradient."""
    scale, causal = node.args
    q, k, v, out, lse, g = inputs
    ops = [_operand(t, 2) for t in (q, k, v, out)] + [_operand(lse, 1), _operand(g, 2)]
    ops += [_operand(t, 2) for t in outputs]
    args = [x for a, s, _ in ops for x in (a, s)]
    _attention.backward(_code(q), _dims(q, k, v), scale, causal, *args)
