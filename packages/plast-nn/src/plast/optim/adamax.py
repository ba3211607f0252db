"""Adamax (torch.optim.Adamax), in plast tensor ops."""

import plast

from ._tensor_rule import (
    check_betas,
    check_nonnegative,
    hyper_scalars,
    new_step,
    params_with_grad,
    reject_differentiable,
    signed_grad,
)
from .optimizer import Optimizer


class Adamax(Optimizer):
    """Adamax (torch.optim.Adamax), Adam with the infinity norm: ``exp_avg = lerp(exp_avg, g, 1 - beta1)``,
    ``exp_inf = max(beta2 * exp_inf, |g| + eps)``, ``p -= lr / (1 - beta1^step) * exp_avg / exp_inf``. State
    per parameter, as torch's: ``step``, ``exp_avg``, ``exp_inf``.

    >>> w = plast.nn.Parameter(plast.ones(2))
    >>> w.grad = plast.ones(2)
    >>> _ = plast.optim.Adamax([w], lr=0.1).step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, 0.9]
    """

    _hyper_keys = ("lr", "betas", "eps", "weight_decay")

    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        foreach=None,
        *,
        maximize=False,
        differentiable=False,
        capturable=False,
    ):
        check_nonnegative(learning_rate=lr, epsilon_value=eps, weight_decay_value=weight_decay)
        check_betas(betas)
        reject_differentiable("Adamax", differentiable)
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        super().__init__(params, defaults)

    def _update(self):
        for group in self.param_groups:
            h = hyper_scalars(self, group)
            b1, b2 = h["beta1"], h["beta2"]
            for p in params_with_grad(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step(p)
                    state["exp_avg"] = plast.zeros_like(p)
                    state["exp_inf"] = plast.zeros_like(p)
                step, m, u = state["step"], state["exp_avg"], state["exp_inf"]
                step.add_(1)
                g = signed_grad(p, group, h)
                m.copy_(m + (g - m) * (1 - b1))
                u.copy_(plast.maximum(u * b2, g.abs() + h["eps"]))
                clr = h["lr"] / (1 - plast.pow(b1, step))
                p.sub_(m / u * clr)
