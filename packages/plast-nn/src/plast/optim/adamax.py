"""Adamax: torch.optim.Adamax's rule, one fused update over all parameters (plast-core's ``adamax_update_``)."""

import plast

from ._checks import check_betas, check_nonnegative, reject_differentiable
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
    _step_supports_amp_scaling = True  # GradScaler hands found_inf to the update ops (optimizer.py)

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
        calls = {}
        for group in self.param_groups:
            hyper = self._hyper(group)
            # one fused call per device: groups on different devices never share an update
            key = (bool(group["maximize"]), hyper.device)
            params, grads, exp_avgs, exp_infs, steps, hypers = calls.setdefault(key, ([], [], [], [], [], []))
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = plast.zeros((), dtype=plast.float64, device=p.device)
                    state["exp_avg"] = plast.zeros_like(p)
                    state["exp_inf"] = plast.zeros_like(p)
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_infs.append(state["exp_inf"])
                steps.append(state["step"])
                hypers.append(hyper)
        for (maximize, _), (params, grads, exp_avgs, exp_infs, steps, hypers) in calls.items():
            if params:
                plast.adamax_update_(
                    params,
                    grads,
                    exp_avgs,
                    exp_infs,
                    steps,
                    hypers,
                    maximize=maximize,
                    found_inf=self._amp_found_inf(),
                )
