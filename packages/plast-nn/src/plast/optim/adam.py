"""Adam and AdamW: torch.optim.Adam's rule (bias correction, amsgrad, coupled or decoupled weight decay), one
fused update over all parameters."""

import plast

from .optimizer import Optimizer


def _check(lr, betas, eps, weight_decay):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam(Optimizer):
    """Adam (torch.optim.Adam): moving averages of the gradient and its square, bias-corrected; ``amsgrad``
    keeps the running maximum of the second moment; ``decoupled_weight_decay=True`` is AdamW.

    State per parameter, as torch's: ``step`` (a 0-d float64 tensor the update increments), ``exp_avg``,
    ``exp_avg_sq`` and, with amsgrad, ``max_exp_avg_sq``.

    >>> w = plast.nn.Parameter(plast.ones(2))
    >>> w.grad = plast.ones(2)
    >>> opt = plast.optim.Adam([w], lr=0.1)
    >>> _ = opt.step()
    >>> [round(v, 4) for v in w.tolist()], opt.state[w]["step"].item()
    ([0.9, 0.9], 1.0)
    """

    _hyper_keys = ("lr", "betas", "eps", "weight_decay")
    _step_supports_amp_scaling = True  # GradScaler hands found_inf to the update ops (optimizer.py)

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        amsgrad=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
        fused=None,
        decoupled_weight_decay=False,
    ):
        _check(lr, betas, eps, weight_decay)
        if differentiable:
            raise NotImplementedError(f"{type(self).__name__}(differentiable=True) is not supported by plast")
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        super().__init__(params, defaults)

    def _update(self):
        calls = {}
        for group in self.param_groups:
            hyper = self._hyper(group)
            amsgrad = bool(group["amsgrad"])
            # one fused call per device: groups on different devices never share an update
            key = (amsgrad, bool(group["decoupled_weight_decay"]), bool(group["maximize"]), hyper.device)
            lists = calls.setdefault(key, ([], [], [], [], [], [], []))
            params, grads, exp_avgs, exp_avg_sqs, steps, maxes, hypers = lists
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = plast.zeros((), dtype=plast.float64, device=p.device)
                    state["exp_avg"] = plast.zeros_like(p)
                    state["exp_avg_sq"] = plast.zeros_like(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = plast.zeros_like(p)
                if amsgrad and "max_exp_avg_sq" not in state:
                    state["max_exp_avg_sq"] = plast.zeros_like(p)
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
                hypers.append(hyper)
                if amsgrad:
                    maxes.append(state["max_exp_avg_sq"])
        for (amsgrad, decoupled, maximize, _), (
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            steps,
            maxes,
            hypers,
        ) in calls.items():
            if params:
                plast.adam_update_(
                    params,
                    grads,
                    exp_avgs,
                    exp_avg_sqs,
                    steps,
                    hypers,
                    amsgrad=amsgrad,
                    decoupled_weight_decay=decoupled,
                    max_exp_avg_sqs=maxes if amsgrad else None,
                    maximize=maximize,
                    found_inf=self._amp_found_inf(),
                )


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW): ``p *= 1 - lr * weight_decay`` before the Adam
    step; default ``weight_decay=1e-2``.

    >>> plast.optim.AdamW([plast.nn.Parameter(plast.ones(2))]).defaults["weight_decay"]
    0.01
    """

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=1e-2,
        amsgrad=False,
        *,
        maximize=False,
        foreach=None,
        capturable=False,
        differentiable=False,
        fused=None,
    ):
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )
