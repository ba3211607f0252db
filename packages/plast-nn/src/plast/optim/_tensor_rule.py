"""What an optimizer written in plast tensor ops needs (RAdam): step-dependent scalars computed as 0-d float64
tensors from the group's hyperparameter tensor and the parameter's ``step`` tensor, so an update traced by
``@plast.jit`` reads them at run time instead of baking them in as constants (DESIGN §2.5).

NOTE: RAdam is the one optimizer left on these helpers: it runs one elementwise chain of tensor ops per parameter,
where every other rule calls a fused multi-tensor core op (``adam_update_``, ``adadelta_update_``,
``adagrad_update_``, ``adamax_update_``, ``nadam_update_``, ...). A fused ``radam_update_`` would follow the same
template; until one exists RAdam stays correct but slower.
"""

import plast


def new_step(p):
    return plast.zeros((), dtype=plast.float64, device=p.device)


def hyper_scalars(optimizer, group):
    """{name: 0-d float64 tensor} of the group's hyperparameters, read from its hyperparameter tensor
    (``betas`` gives ``beta1`` and ``beta2``)."""
    h = optimizer._hyper(group)
    names = []
    for k in optimizer._hyper_keys:
        names.extend(("beta1", "beta2") if k == "betas" else (k,))
    return {n: h[i] for i, n in enumerate(names)}


def signed_grad(p, group, hyper):
    """The gradient, negated with maximize, plus weight_decay * p (coupled decay) when that is nonzero."""
    g = p.grad
    if group["maximize"]:
        g = -g
    if group["weight_decay"] != 0 and not group.get("decoupled_weight_decay", False):
        g = g + p * hyper["weight_decay"]
    return g


def params_with_grad(group):
    return [p for p in group["params"] if p.grad is not None]
