"""CPU kernel of the fused Adagrad update (ops/optim_adagrad.py), following torch's single-tensor CPU path step
by step in the parameter's dtype: csrc/optim.c in one call, with the numpy code below as the fallback for the
parameters the C path leaves (as kernels_optim.py; it rounds separately where torch fuses a multiply-add)."""

import numpy as np

from . import _optim
from .kernels import np_view


def adagrad_update(node, inputs, outputs):
    """inputs: hyper tensors [lr, lr_decay, weight_decay, eps] (H of them), then params, grads, state sums and
    step counters (incremented here)."""
    rest = _optim.run(_optim.ADAGRAD, node, inputs)
    if rest:
        _adagrad_numpy(node, inputs, rest)


def _adagrad_numpy(node, inputs, which):
    n, n_hyper, hidx, maximize = node.args
    hyp = [np_view(inputs[i]).reshape(-1).tolist() for i in range(n_hyper)]
    base = n_hyper
    for i in which:
        lr, lr_decay, weight_decay, eps = hyp[hidx[i]][:4]
        p = np_view(inputs[base + i])
        dt = p.dtype.type
        g = np_view(inputs[base + n + i]).astype(dt, copy=False)
        s = np_view(inputs[base + 2 * n + i])
        st = np_view(inputs[base + 3 * n + i])
        st[...] += 1
        step = float(st.reshape(-1)[0])
        if maximize:
            g = np.negative(g)
        if weight_decay != 0:
            g = g + dt(weight_decay) * p
        clr = lr / (1 + (step - 1) * lr_decay)
        s += g * g
        p += (dt(-clr) * g) / (np.sqrt(s) + dt(eps))
