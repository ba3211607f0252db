"""CPU kernels of the fused optimizer updates (ops/optim.py): one call updates every parameter of every group.

Each kernel reads its hyperparameters and step counts from input tensors when it runs (never from ``node.args``),
so a replayed plan sees the current learning rate, and it writes parameters and optimizer state in place. The
arithmetic follows torch's single-tensor CPU path step by step, in the parameter's dtype, with scalars computed
in double precision as torch's Python code does.

The work is done by csrc/optim.c in one call over all parameters (``_optim.run``), bit for bit as torch where
torch's sqrt is correctly rounded. The numpy code below is the fallback for the parameters the C path leaves (a
gradient of another dtype than its parameter, or a layout that is not dense or differs between a parameter, its
gradient and its state); it rounds separately where torch fuses a multiply-add, so it is a few ulp off.
"""

import numpy as np

from . import _optim
from .kernels import np_view


def fixed_inputs(kind, args):
    """How many inputs an update node of `kind` (an _optim kind) has before its optional found_inf (the last
    input, ops/optim.py), for the CUDA launchers (the C path's Plan knows it; `_optim.run` returns None, so
    neither it nor the numpy fallback updates anything, while found_inf is nonzero)."""
    n, h = args[0], args[1]
    if kind == _optim.SGD:
        return h + (4 if args[3] else 2) * n
    if kind == _optim.ADAM:
        return h + (6 if args[3] else 5) * n
    if kind == _optim.RMSPROP:
        return h + (4 + bool(args[3]) + bool(args[4])) * n
    if kind == _optim.ADAGRAD:
        return h + 4 * n
    if kind == _optim.NADAM:
        return h + 6 * n
    return h + 5 * n  # Adadelta, Adamax


def _hyper_rows(inputs, n_hyper):
    return [np_view(inputs[i]).reshape(-1).tolist() for i in range(n_hyper)]


def sgd_update(node, inputs, outputs):
    """inputs: hyper tensors [lr, momentum, dampening, weight_decay] (H of them), then params, grads and, with
    momentum, momentum buffers and "fresh" flags (a buffer whose flag is set takes the gradient as is, as
    torch's first step does; the kernel clears the flag)."""
    rest = _optim.run(_optim.SGD, node, inputs)
    if rest:
        _sgd_numpy(node, inputs, rest)


def adam_update(node, inputs, outputs):
    """inputs: hyper tensors [lr, beta1, beta2, eps, weight_decay] (H of them), then params, grads, exp_avgs,
    exp_avg_sqs, step counters (incremented here) and, with amsgrad, max_exp_avg_sqs."""
    rest = _optim.run(_optim.ADAM, node, inputs)
    if rest:
        _adam_numpy(node, inputs, rest)


def _sgd_numpy(node, inputs, which):
    n, n_hyper, hidx, has_bufs, nesterov, maximize = node.args
    hyp = _hyper_rows(inputs, n_hyper)
    base = n_hyper
    params = inputs[base : base + n]
    grads = inputs[base + n : base + 2 * n]
    bufs = inputs[base + 2 * n : base + 3 * n] if has_bufs else ()
    fresh = inputs[base + 3 * n : base + 4 * n] if has_bufs else ()
    for i in which:
        lr, momentum, dampening, weight_decay = hyp[hidx[i]][:4]
        p = np_view(params[i])
        g = np_view(grads[i])
        dt = p.dtype.type
        if maximize:
            g = np.negative(g)
        if weight_decay != 0:
            g = g + dt(weight_decay) * p
        if has_bufs:
            b = np_view(bufs[i])
            f = np_view(fresh[i])
            if f.reshape(-1)[0] != 0:
                b[...] = g
                f[...] = 0
            else:
                b *= dt(momentum)
                b += dt(1 - dampening) * g
            g = g + dt(momentum) * b if nesterov else b
        p += dt(-lr) * g


def _adam_numpy(node, inputs, which):
    n, n_hyper, hidx, amsgrad, decoupled, maximize = node.args
    hyp = _hyper_rows(inputs, n_hyper)
    base = n_hyper
    params = inputs[base : base + n]
    grads = inputs[base + n : base + 2 * n]
    exp_avgs = inputs[base + 2 * n : base + 3 * n]
    exp_avg_sqs = inputs[base + 3 * n : base + 4 * n]
    steps = inputs[base + 4 * n : base + 5 * n]
    maxes = inputs[base + 5 * n : base + 6 * n] if amsgrad else ()
    for i in which:
        lr, beta1, beta2, eps, weight_decay = hyp[hidx[i]][:5]
        p = np_view(params[i])
        g = np_view(grads[i])
        m = np_view(exp_avgs[i])
        v = np_view(exp_avg_sqs[i])
        s = np_view(steps[i])
        dt = p.dtype.type
        s += 1
        step = float(s.reshape(-1)[0])
        if maximize:
            g = np.negative(g)
        if weight_decay != 0:
            if decoupled:
                p *= dt(1 - lr * weight_decay)
            else:
                g = g + dt(weight_decay) * p
        # exp_avg.lerp_(grad, 1 - beta1), with torch's two-sided lerp formula
        w = 1 - beta1
        if abs(w) < 0.5:
            m += dt(w) * (g - m)
        else:
            m[...] = g - (g - m) * dt(1 - w)
        v *= dt(beta2)
        v += (dt(1 - beta2) * g) * g
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2**0.5
        if amsgrad:
            vmax = np_view(maxes[i])
            np.maximum(vmax, v, out=vmax)
            denom = np.sqrt(vmax) / dt(bias_correction2_sqrt)
        else:
            denom = np.sqrt(v) / dt(bias_correction2_sqrt)
        denom += dt(eps)
        p += (dt(-step_size) * m) / denom
