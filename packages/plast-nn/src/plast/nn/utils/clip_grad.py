"""Gradient clipping with torch's semantics, written so it runs inside ``@plast.jit``: the total norm stays a
tensor (no ``.item()``) and gradients are scaled in place under no_grad by ``min(1, max_norm / (norm + 1e-6))``.
"""

import math

import plast
from plast import Tensor


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors` (as if they were concatenated): a 0-d tensor.

    >>> plast.nn.utils.get_total_norm([plast.tensor([3.0]), plast.tensor([4.0])]).item()
    5.0
    """
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = [t for t in tensors if t is not None]
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return plast.tensor(0.0)
    with plast.no_grad():
        if math.isinf(norm_type):
            dt = tensors[0].dtype
            norms = [
                t.detach().abs().amax() if t.numel() else plast.zeros((), dtype=dt, device=t.device)
                for t in tensors
            ]
            total = plast.stack([n.to(dt) for n in norms]).amax() if len(norms) > 1 else norms[0]
        else:
            norms = [plast.norm(t.detach().reshape(-1), norm_type) for t in tensors]
            total = plast.norm(plast.stack([n.to(norms[0].dtype) for n in norms]), norm_type)
        if error_if_nonfinite:
            if plast.compiler.is_compiling():
                raise NotImplementedError(
                    "clip_grad_norm_(error_if_nonfinite=True) reads the norm's value, which does not exist while "
                    "a @plast.jit function is traced; check the returned norm after the call instead"
                )
            v = total.item()
            if math.isnan(v) or math.isinf(v):
                raise RuntimeError(
                    f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                    "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                    "anyway, set `error_if_nonfinite=False`"
                )
    return total


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of `parameters` in place so their total ``norm_type``-norm is at most `max_norm`
    (times ``max_norm / (total + 1e-6)`` when above, as torch); returns the total norm before clipping as a
    0-d tensor. Works inside ``@plast.jit``.

    >>> w = plast.nn.Parameter(plast.ones(4))
    >>> w.grad = plast.ones(4)
    >>> plast.nn.utils.clip_grad_norm_(w, 1.0).item()
    2.0
    """
    grads = _grads(parameters)
    max_norm = float(max_norm)
    if len(grads) == 0:
        return plast.tensor(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    with plast.no_grad():
        coef = plast.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of `parameters` into [-clip_value, clip_value] in place.

    >>> w = plast.nn.Parameter(plast.ones(2))
    >>> w.grad = plast.tensor([-3.0, 0.5])
    >>> plast.nn.utils.clip_grad_value_(w, 1.0); w.grad.tolist()
    [-1.0, 0.5]
    """
    clip_value = float(clip_value)
    with plast.no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
