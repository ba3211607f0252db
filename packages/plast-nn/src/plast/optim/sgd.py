"""SGD with momentum, dampening, Nesterov and weight decay: torch.optim.SGD's rule, one fused update."""

import plast

from .optimizer import Optimizer


class SGD(Optimizer):
    """Stochastic gradient descent (torch.optim.SGD): ``buf = momentum * buf + (1 - dampening) * g`` (the first
    step takes ``buf = g``), ``p -= lr * (g + momentum * buf if nesterov else buf)``.

    >>> w = plast.nn.Parameter(plast.ones(2))
    >>> w.grad = plast.ones(2)
    >>> _ = plast.optim.SGD([w], lr=0.5).step()
    >>> w.tolist()
    [0.5, 0.5]
    """

    _hyper_keys = ("lr", "momentum", "dampening", "weight_decay")
    _step_supports_amp_scaling = True  # GradScaler hands found_inf to the update ops (optimizer.py)

    def __init__(
        self,
        params,
        lr=1e-3,
        momentum=0,
        dampening=0,
        weight_decay=0,
        nesterov=False,
        *,
        maximize=False,
        foreach=None,
        differentiable=False,
        fused=None,
    ):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable:
            raise NotImplementedError("SGD(differentiable=True) is not supported by plast")
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
            foreach=foreach,
            differentiable=differentiable,
            fused=fused,
        )
        self._fresh = {}
        super().__init__(params, defaults)

    def _update(self):
        calls = {}
        for group in self.param_groups:
            hyper = self._hyper(group)
            has_momentum = group["momentum"] != 0
            # one fused call per device: groups on different devices never share an update
            key = (has_momentum, bool(group["nesterov"]), bool(group["maximize"]), hyper.device)
            params, grads, bufs, fresh, hypers = calls.setdefault(key, ([], [], [], [], []))
            for p in group["params"]:
                if p.grad is None:
                    continue
                params.append(p)
                grads.append(p.grad)
                hypers.append(hyper)
                if has_momentum:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        # a new buffer takes the gradient as is on its first update (torch's clone); the flag
                        # is a tensor the kernel reads and clears, so a replayed plan stays right
                        state["momentum_buffer"] = buf = plast.zeros_like(p)
                        self._fresh[p] = plast.tensor(1.0, dtype=plast.float64, device=p.device)
                    elif p not in self._fresh:
                        self._fresh[p] = plast.zeros((), dtype=plast.float64, device=p.device)
                    fresh.append(self._fresh[p])
                    bufs.append(buf)
        for (has_momentum, nesterov, maximize, _), (params, grads, bufs, fresh, hypers) in calls.items():
            if params:
                plast.sgd_update_(
                    params,
                    grads,
                    bufs if has_momentum else None,
                    hypers,
                    fresh=fresh if has_momentum else None,
                    nesterov=nesterov,
                    maximize=maximize,
                    found_inf=self._amp_found_inf(),
                )

    def _move_state(self, group, device):
        super()._move_state(group, device)
        with plast.no_grad():
            for p in group["params"]:
                f = self._fresh.get(p)
                if f is not None and f.device != device:
                    self._fresh[p] = f.to(device)

    def _after_load(self):
        self._fresh = {}
