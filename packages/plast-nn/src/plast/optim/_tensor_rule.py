"""What the optimizers written in plast tensor ops share (Adadelta, Adagrad, Adamax, NAdam, RAdam): argument
checks, and step-dependent scalars computed as 0-d float64 tensors from the group's hyperparameter tensor and
the parameter's ``step`` tensor, so an update traced by ``@plast.jit`` reads them at run time instead of baking
them in as constants (DESIGN §2.5).

NOTE: these rules run one elementwise chain per parameter; core's fused multi-tensor update ops (as
``adam_update_``) do not exist for them yet.
"""

import plast


def check_nonnegative(**values):
    """Raise torch's ValueError for the first negative value: ``Invalid <name>: <value>``."""
    for name, v in values.items():
        if not 0.0 <= v:
            raise ValueError(f"Invalid {name.replace('_', ' ')}: {v}")


def check_betas(betas):
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")


def reject_differentiable(name, differentiable):
    if differentiable:
        raise NotImplementedError(f"{name}(differentiable=True) is not supported by plast")


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
