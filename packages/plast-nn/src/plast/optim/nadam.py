"""NAdam: torch.optim.NAdam's rule (momentum schedule, coupled or decoupled weight decay), one fused update over
all parameters (plast-core's ``nadam_update_``)."""

import plast

from ._checks import check_betas, check_nonnegative, reject_differentiable
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
    _step_supports_amp_scaling = True  # GradScaler hands found_inf to the update ops (optimizer.py)

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
        calls = {}
        for group in self.param_groups:
            hyper = self._hyper(group)
            # one fused call per device: groups on different devices never share an update
            key = (bool(group["decoupled_weight_decay"]), bool(group["maximize"]), hyper.device)
            lists = calls.setdefault(key, ([], [], [], [], [], [], []))
            params, grads, exp_avgs, exp_avg_sqs, steps, mu_products, hypers = lists
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = plast.zeros((), dtype=plast.float64, device=p.device)
                    # the default dtype (float32 unless set), as torch keeps it (its default scalar dtype),
                    # whatever the parameter's dtype; the update multiplies it in that dtype
                    state["mu_product"] = plast.ones((), dtype=plast.get_default_dtype(), device=p.device)
                    state["exp_avg"] = plast.zeros_like(p)
                    state["exp_avg_sq"] = plast.zeros_like(p)
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
                mu_products.append(state["mu_product"])
                hypers.append(hyper)
        for (decoupled, maximize, _), lists in calls.items():
            params, grads, exp_avgs, exp_avg_sqs, steps, mu_products, hypers = lists
            if params:
                plast.nadam_update_(
                    params,
                    grads,
                    exp_avgs,
                    exp_avg_sqs,
                    steps,
                    mu_products,
                    hypers,
                    decoupled_weight_decay=decoupled,
                    maximize=maximize,
                    found_inf=self._amp_found_inf(),
                )
