"""Adadelta: torch.optim.Adadelta's rule, one fused update over all parameters (plast-core's
``adadelta_update_``)."""

import plast

from ._checks import check_nonnegative, reject_differentiable
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
    _step_supports_amp_scaling = True  # GradScaler hands found_inf to the update ops (optimizer.py)

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
        calls = {}
        for group in self.param_groups:
            hyper = self._hyper(group)
            # one fused call per device: groups on different devices never share an update
            key = (bool(group["maximize"]), hyper.device)
            params, grads, sqs, accs, steps, hypers = calls.setdefault(key, ([], [], [], [], [], []))
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = plast.zeros((), dtype=plast.float64, device=p.device)
                    state["square_avg"] = plast.zeros_like(p)
                    state["acc_delta"] = plast.zeros_like(p)
                params.append(p)
                grads.append(p.grad)
                sqs.append(state["square_avg"])
                accs.append(state["acc_delta"])
                steps.append(state["step"])
                hypers.append(hyper)
        for (maximize, _), (params, grads, sqs, accs, steps, hypers) in calls.items():
            if params:
                plast.adadelta_update_(
                    params,
                    grads,
                    sqs,
                    accs,
                    steps,
                    hypers,
                    maximize=maximize,
                    found_inf=self._amp_found_inf(),
                )
