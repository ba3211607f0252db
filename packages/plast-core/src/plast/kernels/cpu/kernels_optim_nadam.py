"""CPU kernel of the fused NAdam update (ops/optim_nadam.py), following torch's single-tensor CPU path step by
step in the parameter's dtype: csrc/optim.c in one call, with the numpy code below as the fallback for the
parameters the C path leaves (as kernels_optim.py; it rounds separately where torch fuses a multiply-add)."""

import numpy as np

from . import _optim
from .kernels import np_view


def nadam_update(node, inputs, outputs):
    """inputs: hyper tensors [lr, beta1, beta2, eps, weight_decay, momentum_decay] (H of them), then params,
    grads, exp_avgs, exp_avg_sqs, step counters (incremented here) and mu_products (multiplied by this step's
    momentum coefficient here)."""
    rest = _optim.run(_optim.NADAM, node, inputs)
    if rest:
        _nadam_numpy(node, inputs, rest)


def _nadam_numpy(node, inputs, which):
    n, n_hyper, hidx, decoupled, maximize = node.args
    hyp = [np_view(inputs[i]).reshape(-1).tolist() for i in range(n_hyper)]
    base = n_hyper
    for i in which:
        lr, beta1, beta2, eps, weight_decay, momentum_decay = hyp[hidx[i]][:6]
        p = np_view(inputs[base + i])
        dt = p.dtype.type
        g = np_view(inputs[base + n + i]).astype(dt, copy=False)
        m = np_view(inputs[base + 2 * n + i])
        v = np_view(inputs[base + 3 * n + i])
        st = np_view(inputs[base + 4 * n + i])
        mu_prod = np_view(inputs[base + 5 * n + i])
        st[...] += 1
        step = float(st.reshape(-1)[0])
        if maximize:
            g = np.negative(g)
        bias_correction2 = 1 - beta2**step
        if weight_decay != 0:
            if decoupled:
                p *= dt(1 - lr * weight_decay)
            else:
                g = g + dt(weight_decay) * p
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_prod *= mu_prod.dtype.type(mu)  # in mu_product's own dtype, as torch's 0-d tensor times a float
        mp = float(mu_prod.reshape(-1)[0])
        w = 1 - beta1  # exp_avg.lerp_(grad, 1 - beta1), torch's two-sided lerp
        if abs(w) < 0.5:
            m += dt(w) * (g - m)
        else:
            m[...] = g - (g - m) * dt(1 - w)
        v *= dt(beta2)
        v += (dt(1 - beta2) * g) * g
        denom = np.sqrt(v / dt(bias_correction2)) + dt(eps)
        p += (dt(-lr * (1.0 - mu) / (1.0 - mp)) * g) / denom
        p += (dt(-lr * mu_next / (1.0 - mp * mu_next)) * m) / denom
