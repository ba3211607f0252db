"""CPU kernel of the fused Adadelta update (ops/optim_adadelta.py), following torch's single-tensor CPU path step
by step in the parameter's dtype: csrc/optim.c in one call, with the numpy code below as the fallback for the
parameters the C path leaves (as kernels_optim.py; it rounds separately where torch fuses a multiply-add)."""

import numpy as np

from . import _optim
from .kernels import np_view


def adadelta_update(node, inputs, outputs):
    """inputs: hyper tensors [lr, rho, eps, weight_decay] (H of them), then params, grads, square_avgs,
    acc_deltas and step counters (incremented here)."""
    rest = _optim.run(_optim.ADADELTA, node, inputs)
    if rest:
        _adadelta_numpy(node, inputs, rest)


def _adadelta_numpy(node, inputs, which):
    n, n_hyper, hidx, maximize = node.args
    hyp = [np_view(inputs[i]).reshape(-1).tolist() for i in range(n_hyper)]
    base = n_hyper
    for i in which:
        lr, rho, eps, weight_decay = hyp[hidx[i]][:4]
        p = np_view(inputs[base + i])
        dt = p.dtype.type
        g = np_view(inputs[base + n + i]).astype(dt, copy=False)
        sq = np_view(inputs[base + 2 * n + i])
        acc = np_view(inputs[base + 3 * n + i])
        np_view(inputs[base + 4 * n + i])[...] += 1
        if maximize:
            g = np.negative(g)
        if weight_decay != 0:
            g = g + dt(weight_decay) * p
        sq *= dt(rho)
        sq += (dt(1 - rho) * g) * g
        std = np.sqrt(sq + dt(eps))
        delta = np.sqrt(acc + dt(eps)) / std * g
        acc *= dt(rho)
        acc += (dt(1 - rho) * delta) * delta
        p += dt(-lr) * delta
