"""Adagrad: torch.optim.Adagrad's rule (lr_decay, initial_accumulator_value), one fused update over all
parameters (plast-core's ``adagrad_update_``)."""

import plast

from ._checks import check_nonnegative, reject_differentiable
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
    _step_supports_amp_scaling = True  # GradScaler hands found_inf to the update ops (optimizer.py)

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
        # fused=True: plast's update is always one fused kernel, so it is accepted; torch's own checks apply
        if fused and differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        reject_differentiable("Adagrad", differentiable)
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
                self._init_state(p)

    def _init_state(self, p):
        state = self.state[p]
        if len(state) == 0:
            state["step"] = plast.zeros((), dtype=plast.float64, device=p.device)
            state["sum"] = plast.full_like(p, float(self.defaults["initial_accumulator_value"]))

    def share_memory(self):
        """Accepted for torch compatibility: plast's state lives in one process's memory; nothing to share."""

    def _update(self):
        calls = {}
        for group in self.param_groups:
            hyper = self._hyper(group)
            # one fused call per device: groups on different devices never share an update
            key = (bool(group["maximize"]), hyper.device)
            params, grads, sums, steps, hypers = calls.setdefault(key, ([], [], [], [], []))
            for p in group["params"]:
                if p.grad is None:
                    continue
                self._init_state(p)
                state = self.state[p]
                params.append(p)
                grads.append(p.grad)
                sums.append(state["sum"])
                steps.append(state["step"])
                hypers.append(hyper)
        for (maximize, _), (params, grads, sums, steps, hypers) in calls.items():
            if params:
                plast.adagrad_update_(
                    params, grads, sums, steps, hypers, maximize=maximize, found_inf=self._amp_found_inf()
                )
