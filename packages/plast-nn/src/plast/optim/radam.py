"""RAdam (torch.optim.RAdam), in plast tensor ops."""

import plast

from ._checks import check_betas, check_nonnegative, reject_differentiable
from ._tensor_rule import hyper_scalars, new_step, params_with_grad, signed_grad
from .optimizer import Optimizer


class RAdam(Optimizer):
    """RAdam (torch.optim.RAdam): Adam whose adaptive term is switched on, with the variance rectification
    ``r_t``, once the approximated SMA length ``rho_t`` exceeds 5 (plain momentum SGD with bias-corrected
    ``exp_avg`` before); ``decoupled_weight_decay=True`` decays as AdamW. State per parameter, as torch's:
    ``step``, ``exp_avg``, ``exp_avg_sq``.

    >>> w = plast.nn.Parameter(plast.ones(2))
    >>> w.grad = plast.ones(2)
    >>> _ = plast.optim.RAdam([w], lr=0.1).step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, 0.9]
    """

    _hyper_keys = ("lr", "betas", "eps", "weight_decay")

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        decoupled_weight_decay=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
    ):
        check_nonnegative(learning_rate=lr, epsilon_value=eps, weight_decay_value=weight_decay)
        check_betas(betas)
        reject_differentiable("RAdam", differentiable)
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            decoupled_weight_decay=decoupled_weight_decay,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def _update(self):
        for group in self.param_groups:
            h = hyper_scalars(self, group)
            lr, b1, b2 = h["lr"], h["beta1"], h["beta2"]
            rho_inf = 2 / (1 - b2) - 1
            for p in params_with_grad(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step(p)
                    state["exp_avg"] = plast.zeros_like(p)
                    state["exp_avg_sq"] = plast.zeros_like(p)
                step, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
                step.add_(1)
                g = signed_grad(p, group, h)
                if group["weight_decay"] != 0 and group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * h["weight_decay"])
                m.copy_(m + (g - m) * (1 - b1))
                v.copy_(v * b2 + g * g * (1 - b2))
                b2_t = plast.pow(b2, step)
                bc1 = 1 - plast.pow(b1, step)
                bc2 = 1 - b2_t
                rho_t = rho_inf - 2 * step * b2_t / bc2
                on = rho_t > 5.0
                # the rectification's radicand is negative where rho_t <= 4: clamp before the root, the
                # where() below drops that branch
                rad = (
                    (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
                ).clamp_min(0)
                rect = plast.sqrt(rad)
                adaptive = plast.sqrt(bc2) / (plast.sqrt(v) + h["eps"])
                update = plast.where(on, adaptive * rect.to(p.dtype), 1.0)
                p.sub_(m / bc1 * lr * update)
