"""Adadelta (torch.optim.Adadelta), in plast tensor ops."""

import plast

from ._tensor_rule import (
    check_nonnegative,
    hyper_scalars,
    new_step,
    params_with_grad,
    reject_differentiable,
    signed_grad,
)
from .optimizer import Optimizer


class Adadelta(Optimizer):
    """Adadelta (torch.optim.Adadelta): ``square_avg = rho * square_avg + (1 - rho) * g^2``,
    ``delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g``, ``acc_delta = rho * acc_delta +
    (1 - rho) * delta^2``, ``p -= lr * delta``. State per parameter, as torch's: ``step``, ``square_avg``,
    ``acc_delta``.

    >>> w = plast.nn.Parameter(plast.ones(2))
    >>> w.grad = plast.ones(2)
    >>> _ = plast.optim.Adadelta([w]).step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9968, 0.9968]
    """

    _hyper_keys = ("lr", "rho", "eps", "weight_decay")

    def __init__(
        self,
        params,
        lr=1.0,
        rho=0.9,
        eps=1e-6,
        weight_decay=0,
        foreach=None,
        *,
        capturable=False,
        maximize=False,
        differentiable=False,
    ):
        check_nonnegative(learning_rate=lr, epsilon_value=eps, weight_decay_value=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        reject_differentiable("Adadelta", differentiable)
        defaults = dict(
            lr=lr,
            rho=rho,
            eps=eps,
            weight_decay=weight_decay,
            maximize=maximize,
            capturable=capturable,
            foreach=foreach,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def _update(self):
        for group in self.param_groups:
            h = hyper_scalars(self, group)
            rho, eps = h["rho"], h["eps"]
            for p in params_with_grad(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step(p)
                    state["square_avg"] = plast.zeros_like(p)
                    state["acc_delta"] = plast.zeros_like(p)
                sq, acc = state["square_avg"], state["acc_delta"]
                state["step"].add_(1)
                g = signed_grad(p, group, h)
                sq.copy_(sq * rho + g * g * (1 - rho))
                delta = plast.sqrt(acc + eps) / plast.sqrt(sq + eps) * g
                acc.copy_(acc * rho + delta * delta * (1 - rho))
                p.sub_(delta * h["lr"])
