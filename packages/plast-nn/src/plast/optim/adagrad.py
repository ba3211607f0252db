"""Adagrad (torch.optim.Adagrad), in plast tensor ops."""

import plast

from ._tensor_rule import (
    check_nonnegative,
    hyper_scalars,
    params_with_grad,
    reject_differentiable,
    signed_grad,
)
from .optimizer import Optimizer


class Adagrad(Optimizer):
    """Adagrad (torch.optim.Adagrad): ``sum += g^2``, ``p -= clr * g / (sqrt(sum) + eps)`` with
    ``clr = lr / (1 + (step - 1) * lr_decay)``. As torch, every parameter's state (``step``, and ``sum`` filled
    with ``initial_accumulator_value``) is made when the optimizer is.

    >>> w = plast.nn.Parameter(plast.ones(2))
    >>> w.grad = plast.ones(2)
    >>> _ = plast.optim.Adagrad([w], lr=0.1).step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, 0.9]
    """

    _hyper_keys = ("lr", "lr_decay", "weight_decay", "eps")

    def __init__(
        self,
        params,
        lr=1e-2,
        lr_decay=0,
        weight_decay=0,
        initial_accumulator_value=0,
        eps=1e-10,
        foreach=None,
        *,
        maximize=False,
        differentiable=False,
        fused=None,
    ):
        check_nonnegative(
            learning_rate=lr,
            lr_decay=lr_decay,
            weight_decay_value=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            epsilon_value=eps,
        )
        reject_differentiable("Adagrad", differentiable)
        if fused:
            raise NotImplementedError("Adagrad(fused=True) is not supported by plast yet (no fused core op)")
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            eps=eps,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group):
        state = self.state[p]
        if len(state) == 0:
            state["step"] = plast.zeros((), dtype=plast.float64, device=p.device)
            state["sum"] = plast.full_like(p, float(group["initial_accumulator_value"]))

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        if hasattr(self, "state"):
            group = self.param_groups[-1]
            for p in group["params"]:
                self._init_state(p, group)

    def share_memory(self):
        """Accepted for torch compatibility: plast's state lives in one process's memory; nothing to share."""

    def _update(self):
        for group in self.param_groups:
            h = hyper_scalars(self, group)
            for p in params_with_grad(group):
                self._init_state(p, group)
                state = self.state[p]
                step = state["step"]
                step.add_(1)
                g = signed_grad(p, group, h)
                clr = h["lr"] / (1 + (step - 1) * h["lr_decay"])
                s = state["sum"]
                s.copy_(s + g * g)
                p.sub_(g / (plast.sqrt(s) + h["eps"]) * clr)
