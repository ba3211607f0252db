"""NAdam (torch.optim.NAdam), in plast tensor ops."""

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


class NAdam(Optimizer):
    """NAdam (torch.optim.NAdam): Adam with Nesterov momentum and the momentum schedule
    ``mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))``; ``decoupled_weight_decay=True`` decays the
    parameter as AdamW does. State per parameter, as torch's: ``step``, ``mu_product``, ``exp_avg``,
    ``exp_avg_sq``.

    >>> w = plast.nn.Parameter(plast.ones(2))
    >>> w.grad = plast.ones(2)
    >>> _ = plast.optim.NAdam([w], lr=0.1).step()
    >>> [round(v, 4) for v in w.tolist()]  # torch.optim.NAdam gives the same
    [0.8944, 0.8944]
    """

    _hyper_keys = ("lr", "betas", "eps", "weight_decay", "momentum_decay")

    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        momentum_decay=4e-3,
        decoupled_weight_decay=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
    ):
        check_nonnegative(
            learning_rate=lr,
            epsilon_value=eps,
            weight_decay_value=weight_decay,
            momentum_decay=momentum_decay,
        )
        check_betas(betas)
        reject_differentiable("NAdam", differentiable)
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            momentum_decay=momentum_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def _update(self):
        for group in self.param_groups:
            h = hyper_scalars(self, group)
            lr, b1, b2, md = h["lr"], h["beta1"], h["beta2"], h["momentum_decay"]
            for p in params_with_grad(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step(p)
                    # the default dtype (float32 unless set), as torch keeps it (its default scalar dtype), whatever
                    # the parameter's dtype
                    state["mu_product"] = plast.ones((), dtype=plast.get_default_dtype(), device=p.device)
                    state["exp_avg"] = plast.zeros_like(p)
                    state["exp_avg_sq"] = plast.zeros_like(p)
                step, mu_prod = state["step"], state["mu_product"]
                m, v = state["exp_avg"], state["exp_avg_sq"]
                step.add_(1)
                g = signed_grad(p, group, h)
                if group["weight_decay"] != 0 and group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * h["weight_decay"])
                bc2 = 1 - plast.pow(b2, step)
                mu = b1 * (1.0 - 0.5 * plast.pow(0.96, step * md))
                mu_next = b1 * (1.0 - 0.5 * plast.pow(0.96, (step + 1) * md))
                mu_prod.mul_(mu.to(mu_prod.dtype))
                mp = mu_prod.to(plast.float64)
                m.copy_(m + (g - m) * (1 - b1))
                v.copy_(v * b2 + g * g * (1 - b2))
                denom = plast.sqrt(v / bc2) + h["eps"]
                c_grad = -lr * (1.0 - mu) / (1.0 - mp)
                c_avg = -lr * mu_next / (1.0 - mp * mu_next)
                p.add_(g / denom * c_grad)
                p.add_(m / denom * c_avg)
