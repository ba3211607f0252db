"""CPU kernel of the fused RMSprop update (ops/optim_rmsprop.py), following torch's single-tensor CPU path step
by step in the parameter's dtype: csrc/optim.c in one call, with the numpy code below as the fallback for the
parameters the C path leaves (as kernels_optim.py)."""

import numpy as np

from . import _optim
from .kernels import np_view


def rmsprop_update(node, inputs, outputs):
    """inputs: hyper tensors [lr, alpha, eps, weight_decay, momentum] (H of them), then params, grads,
    square_avgs, step counters (incremented here) and, if present, momentum buffers and grad_avgs."""
    rest = _optim.run(_optim.RMSPROP, node, inputs)
    if rest:
        _rmsprop_numpy(node, inputs, rest)


def _rmsprop_numpy(node, inputs, which):
    n, n_hyper, hidx, has_mom, centered, maximize = node.args
    hyp = [np_view(inputs[i]).reshape(-1).tolist() for i in range(n_hyper)]
    base = n_hyper
    params = inputs[base : base + n]
    grads = inputs[base + n : base + 2 * n]
    sqs = inputs[base + 2 * n : base + 3 * n]
    steps = inputs[base + 3 * n : base + 4 * n]
    k = base + 4 * n
    bufs = inputs[k : k + n] if has_mom else ()
    k += n if has_mom else 0
    gavgs = inputs[k : k + n] if centered else ()
    for i in which:
        lr, alpha, eps, weight_decay, momentum = hyp[hidx[i]][:5]
        p = np_view(params[i])
        g = np_view(grads[i])
        sq = np_view(sqs[i])
        s = np_view(steps[i])
        dt = p.dtype.type
        s += 1
        if maximize:
            g = np.negative(g)
        if weight_decay != 0:
            g = g + dt(weight_decay) * p
        sq *= dt(alpha)
        sq += (dt(1 - alpha) * g) * g
        if centered:
            ga = np_view(gavgs[i])
            w = 1 - alpha  # grad_avg.lerp_(grad, 1 - alpha), torch's two-sided lerp
            if abs(w) < 0.5:
                ga += dt(w) * (g - ga)
            else:
                ga[...] = g - (g - ga) * dt(1 - w)
            avg = np.sqrt(sq + dt(-1) * ga * ga)
        else:
            avg = np.sqrt(sq)
        avg += dt(eps)
        if has_mom and momentum > 0:
            b = np_view(bufs[i])
            b *= dt(momentum)
            b += g / avg
            p += dt(-lr) * b
        else:
            p += (dt(-lr) * g) / avg
