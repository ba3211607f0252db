"""RMSprop: torch.optim.RMSprop's rule (smoothing constant alpha, centered, momentum, weight decay), one fused
update over all parameters (plast-core's ``rmsprop_update_``)."""

import plast

from .optimizer import Optimizer


class RMSprop(Optimizer):
    """RMSprop (torch.optim.RMSprop): ``square_avg = alpha * square_avg + (1 - alpha) * g^2``; the step divides
    the gradient by ``sqrt(square_avg) + eps`` (``centered``: by the square root of the variance estimate
    ``square_avg - grad_avg^2``), through a momentum buffer when ``momentum > 0``.

    State per parameter, as torch's: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0) and
    ``grad_avg`` (centered).

    >>> w = plast.nn.Parameter(plast.ones(2))
    >>> w.grad = plast.ones(2)
    >>> _ = plast.optim.RMSprop([w], lr=0.01).step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, 0.9]
    """

    _hyper_keys = ("lr", "alpha", "eps", "weight_decay", "momentum")
    _step_supports_amp_scaling = True  # GradScaler hands found_inf to the update ops (optimizer.py)

    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.99,
        eps=1e-8,
        weight_decay=0,
        momentum=0,
        centered=False,
        capturable=False,
        foreach=None,
        maximize=False,
        differentiable=False,
    ):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        if differentiable:
            raise NotImplementedError("RMSprop(differentiable=True) is not supported by plast")
        defaults = dict(
            lr=lr,
            momentum=momentum,
            alpha=alpha,
            eps=eps,
            centered=centered,
            weight_decay=weight_decay,
            capturable=capturable,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def _update(self):
        calls = {}
        for group in self.param_groups:
            hyper = self._hyper(group)
            has_mom = group["momentum"] > 0
            centered = bool(group["centered"])
            # one fused call per device: groups on different devices never share an update
            key = (has_mom, centered, bool(group["maximize"]), hyper.device)
            params, grads, sqs, steps, bufs, gavgs, hypers = calls.setdefault(
                key, ([], [], [], [], [], [], [])
            )
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = plast.zeros((), dtype=plast.float64, device=p.device)
                    state["square_avg"] = plast.zeros_like(p)
                    if has_mom:
                        state["momentum_buffer"] = plast.zeros_like(p)
                    if centered:
                        state["grad_avg"] = plast.zeros_like(p)
                if has_mom and "momentum_buffer" not in state:
                    state["momentum_buffer"] = plast.zeros_like(p)
                if centered and "grad_avg" not in state:
                    state["grad_avg"] = plast.zeros_like(p)
                params.append(p)
                grads.append(p.grad)
                sqs.append(state["square_avg"])
                steps.append(state["step"])
                hypers.append(hyper)
                if has_mom:
                    bufs.append(state["momentum_buffer"])
                if centered:
                    gavgs.append(state["grad_avg"])
        for (has_mom, centered, maximize, _), (
            params,
            grads,
            sqs,
            steps,
            bufs,
            gavgs,
            hypers,
        ) in calls.items():
            if params:
                plast.rmsprop_update_(
                    params,
                    grads,
                    sqs,
                    steps,
                    hypers,
                    momentum_buffers=bufs if has_mom else None,
                    grad_avgs=gavgs if centered else None,
                    maximize=maximize,
                    found_inf=self._amp_found_inf(),
                )
