"""CPU kernel of the fused Adamax update (ops/optim_adamax.py), following torch's single-tensor CPU path step by
step in the parameter's dtype: csrc/optim.c in one call, with the numpy code below as the fallback for the
parameters the C path leaves (as kernels_optim.py; it rounds separately where torch fuses a multiply-add)."""

import numpy as np

from . import _optim
from .kernels import np_view


def adamax_update(node, inputs, outputs):
    """inputs: hyper tensors [lr, beta1, beta2, eps, weight_decay] (H of them), then params, grads, exp_avgs,
    exp_infs and step counters (incremented here)."""
    rest = _optim.run(_optim.ADAMAX, node, inputs)
    if rest:
        _adamax_numpy(node, inputs, rest)


def _adamax_numpy(node, inputs, which):
    n, n_hyper, hidx, maximize = node.args
    hyp = [np_view(inputs[i]).reshape(-1).tolist() for i in range(n_hyper)]
    base = n_hyper
    for i in which:
        lr, beta1, beta2, eps, weight_decay = hyp[hidx[i]][:5]
        p = np_view(inputs[base + i])
        dt = p.dtype.type
        g = np_view(inputs[base + n + i]).astype(dt, copy=False)
        m = np_view(inputs[base + 2 * n + i])
        u = np_view(inputs[base + 3 * n + i])
        st = np_view(inputs[base + 4 * n + i])
        st[...] += 1
        step = float(st.reshape(-1)[0])
        if maximize:
            g = np.negative(g)
        if weight_decay != 0:
            g = g + dt(weight_decay) * p
        w = 1 - beta1  # exp_avg.lerp_(grad, 1 - beta1), torch's two-sided lerp
        if abs(w) < 0.5:
            m += dt(w) * (g - m)
        else:
            m[...] = g - (g - m) * dt(1 - w)
        u[...] = np.maximum(u * dt(beta2), np.abs(g) + dt(eps))  # NaN propagates, as torch.maximum
        clr = lr / (1 - beta1**step)
        p += (dt(-clr) * m) / u
