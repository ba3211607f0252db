"""Learning-rate schedulers: each is a pure function of the step (``_lr_at(group_index, base_lr, step)``) wrapped
in torch's class interface (STYLE.md item 14): ``step()``, ``get_last_lr()``, ``last_epoch``, ``base_lrs``,
``state_dict()`` / ``load_state_dict()``.

Schedulers run outside ``@plast.jit``, as in torch: they write ``group['lr']`` and the optimizer carries it into
its hyperparameter tensor before the next update.

Differences from torch: learning rates are computed in closed form from the initial ones, so schedulers don't
compound when two of them drive the same optimizer at once (torch's chainable form), and a learning rate set by
hand between steps is overwritten at the next ``step()``. Use SequentialLR to chain schedulers in time.
"""

import math
import types
import warnings
from bisect import bisect_right

from .optimizer import Optimizer


class LRScheduler:
    """Base class: subclasses define ``_lr_at(i, base_lr, step)``, the learning rate of group i at a step.

    >>> w = plast.nn.Parameter(plast.ones(1))
    >>> opt = plast.optim.SGD([w], lr=1.0)
    >>> sched = plast.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> lrs = []
    >>> for _ in range(4):
    ...     lrs.append(sched.get_last_lr()[0]); sched.step()
    >>> lrs
    [1.0, 1.0, 0.5, 0.5]
    """

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming scheduler with "
                        "last_epoch >= 0 (load the optimizer's state dict first)"
                    )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self.step()

    def _lr_at(self, i, base_lr, step):
        raise NotImplementedError

    def get_lr(self):
        """The learning rates at ``last_epoch`` (one per group)."""
        return [self._lr_at(i, b, self.last_epoch) for i, b in enumerate(self.base_lrs)]

    def get_last_lr(self):
        """The learning rates the last ``step()`` set."""
        return self._last_lr

    def step(self, epoch=None):
        """Advance one step (or jump to `epoch`) and write the new learning rates into the optimizer."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
        else:
            warnings.warn(
                "The epoch parameter in `scheduler.step()` is deprecated (as in torch); call `step()` without it",
                UserWarning,
                stacklevel=2,
            )
            self.last_epoch = epoch
        self._set(self.get_lr())

    def _set(self, values):
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Everything but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (step // step_size).

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=1.0)
    >>> plast.optim.lr_scheduler.StepLR(opt, step_size=10).get_last_lr()
    [1.0]
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, i, base_lr, step):
        return base_lr * self.gamma ** (step // self.step_size)


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (number of milestones <= step).

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=1.0)
    >>> s = plast.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 2], gamma=0.5)
    >>> s.step(); s.step(); s.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = sorted(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, i, base_lr, step):
        return base_lr * self.gamma ** bisect_right(self.milestones, step)


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** step.

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=1.0)
    >>> s = plast.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> s.step(); s.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, i, base_lr, step):
        return base_lr * self.gamma**step


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * step / T_max)) / 2 (periodic past T_max, as torch).

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=1.0)
    >>> s = plast.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    >>> s.step(); round(s.get_last_lr()[0], 6)
    0.5
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, i, base_lr, step):
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * step / self.T_max)) / 2


class ConstantLR(LRScheduler):
    """lr = base_lr * factor for the first total_iters steps, then base_lr.

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=1.0)
    >>> plast.optim.lr_scheduler.ConstantLR(opt, factor=0.5).get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, i, base_lr, step):
        return base_lr * (self.factor if step < self.total_iters else 1.0)


class LinearLR(LRScheduler):
    """lr = base_lr * factor, the factor going linearly from start_factor to end_factor over total_iters steps.

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=1.0)
    >>> s = plast.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> s.step(); s.get_last_lr()
    [0.75]
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than 0 and less or equal to 1."
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, i, base_lr, step):
        frac = min(self.total_iters, step) / self.total_iters
        return base_lr * (self.start_factor + (self.end_factor - self.start_factor) * frac)


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(step) (one function, or one per group).

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=1.0)
    >>> s = plast.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.5 ** t)
    >>> s.step(); s.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, i, base_lr, step):
        return base_lr * self.lr_lambdas[i](step)

    def state_dict(self):
        """As torch: plain functions are not saved (None); callable objects save their __dict__."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [
            None if isinstance(f, types.FunctionType) else f.__dict__.copy() for f in self.lr_lambdas
        ]
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for f, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                f.__dict__.update(saved)


class SequentialLR(LRScheduler):
    """Runs schedulers one after another: ``schedulers[i]`` from ``milestones[i-1]`` on, restarted at step 0
    (e.g. a LinearLR warm-up, then CosineAnnealingLR).

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=1.0)
    >>> warm = plast.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> decay = plast.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> s = plast.optim.lr_scheduler.SequentialLR(opt, [warm, decay], milestones=[2])
    >>> out = []
    >>> for _ in range(4):
    ...     out.append(s.get_last_lr()[0]); s.step()
    >>> out
    [0.5, 0.75, 1.0, 0.5]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got no scheduler.")
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(
                    f"{type(self).__name__} at index {i} should have `optimizer` as its attribute."
                )
            if s.optimizer is not optimizer:
                raise ValueError(
                    f"{type(self).__name__} expects all schedulers to belong to the same optimizer, but got "
                    f"scheduler {type(s).__name__} at index {i} with another optimizer."
                )
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more than the number of "
                f"milestone points, but got number of schedulers {len(schedulers)} and the number of milestones "
                f"to be equal to {len(milestones)}"
            )
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for s in self._schedulers:  # undo the step each scheduler took when it was made
            s.last_epoch -= 1
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = self._schedulers[idx].get_last_lr()

    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched.last_epoch = 0
            sched._set(sched.get_lr())
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        subs = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, subs):
            s.load_state_dict(sd)


def _per_group(name, optimizer, value):
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has {len(value)} values, param_groups has {n}."
            )
        return list(value)
    return [value] * n


class OneCycleLR(LRScheduler):
    """The 1cycle policy (torch's OneCycleLR): the learning rate rises from ``max_lr / div_factor`` to
    ``max_lr`` over the first ``pct_start`` of ``total_steps`` and then anneals to
    ``max_lr / (div_factor * final_div_factor)`` (``three_phase``: back to the initial rate first, then down);
    with ``cycle_momentum`` the momentum (SGD) or beta1 (Adam) moves the opposite way between ``max_momentum``
    and ``base_momentum``. Steps once per batch; stepping past ``total_steps`` raises ValueError, as torch.

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=0.1, momentum=0.9)
    >>> s = plast.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    >>> round(s.get_last_lr()[0], 4), opt.param_groups[0]["momentum"]
    (0.04, 0.95)
    """

    def __init__(
        self,
        optimizer,
        max_lr,
        total_steps=None,
        epochs=None,
        steps_per_epoch=None,
        pct_start=0.3,
        anneal_strategy="cos",
        cycle_momentum=True,
        base_momentum=0.85,
        max_momentum=0.95,
        div_factor=25.0,
        final_div_factor=1e4,
        three_phase=False,
        last_epoch=-1,
    ):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or pct_start < 0 or pct_start > 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        t = self.total_steps
        if three_phase:
            self._schedule_phases = [
                dict(
                    end_step=float(pct_start * t) - 1,
                    start_lr="initial_lr",
                    end_lr="max_lr",
                    start_momentum="max_momentum",
                    end_momentum="base_momentum",
                ),
                dict(
                    end_step=float(2 * pct_start * t) - 2,
                    start_lr="max_lr",
                    end_lr="initial_lr",
                    start_momentum="base_momentum",
                    end_momentum="max_momentum",
                ),
                dict(
                    end_step=t - 1,
                    start_lr="initial_lr",
                    end_lr="min_lr",
                    start_momentum="max_momentum",
                    end_momentum="max_momentum",
                ),
            ]
        else:
            self._schedule_phases = [
                dict(
                    end_step=float(pct_start * t) - 1,
                    start_lr="initial_lr",
                    end_lr="max_lr",
                    start_momentum="max_momentum",
                    end_momentum="base_momentum",
                ),
                dict(
                    end_step=t - 1,
                    start_lr="max_lr",
                    end_lr="min_lr",
                    start_momentum="base_momentum",
                    end_momentum="max_momentum",
                ),
            ]
        self.anneal_strategy = anneal_strategy
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for m, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            maxm = _per_group("max_momentum", optimizer, max_momentum)
            basem = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for mm, bm, group in zip(maxm, basem, optimizer.param_groups):
                    if self.use_beta1:
                        group["betas"] = (mm, *group["betas"][1:])
                    else:
                        group["momentum"] = mm
                    group["max_momentum"] = mm
                    group["base_momentum"] = bm
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"Tried to step {step} times. The specified number of total steps is {self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(group[phase["start_momentum"]], group[phase["end_momentum"]], pct)
                    break
                start = end
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (mom, *group["betas"][1:])
                else:
                    group["momentum"] = mom
        return lrs


class LinearWarmupCosineDecay(LRScheduler):
    """plast's warm-up + cosine schedule, a pure function of the step t (base_lr: the group's initial lr):

    * ``t < warmup_steps``: ``lr = base_lr * t / warmup_steps`` (linear from 0; the first step uses lr 0);
    * ``warmup_steps <= t <= total_steps``: ``lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * p)) / 2`` with
      ``p = (t - warmup_steps) / (total_steps - warmup_steps)`` (base_lr at the end of warm-up, min_lr at
      ``total_steps``);
    * ``t > total_steps``: ``min_lr``.

    ``min_lr`` is one value or one per parameter group. Requires ``0 <= warmup_steps < total_steps``.

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=1.0)
    >>> s = plast.optim.lr_scheduler.LinearWarmupCosineDecay(opt, warmup_steps=2, total_steps=4, min_lr=0.1)
    >>> out = []
    >>> for _ in range(6):
    ...     out.append(round(s.get_last_lr()[0], 4)); s.step()
    >>> out
    [0.0, 0.5, 1.0, 0.55, 0.1, 0.1]
    """

    def __init__(self, optimizer, warmup_steps, total_steps, min_lr=0.0, last_epoch=-1):
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"warmup_steps must be a non-negative int, got {warmup_steps!r}")
        if not isinstance(total_steps, int) or total_steps <= warmup_steps:
            raise ValueError(
                f"total_steps must be an int larger than warmup_steps ({warmup_steps}), got {total_steps!r}"
            )
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.min_lrs = _per_group("min_lr", optimizer, min_lr)
        if any(m < 0 for m in self.min_lrs):
            raise ValueError(f"min_lr must be >= 0, got {min_lr}")
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, i, base_lr, step):
        if step < self.warmup_steps:
            return base_lr * step / self.warmup_steps
        lo = self.min_lrs[i]
        if step > self.total_steps:
            return lo
        p = (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return lo + (base_lr - lo) * (1 + math.cos(math.pi * p)) / 2


class ReduceLROnPlateau(LRScheduler):
    """Multiply the learning rate by ``factor`` once a metric (``step(metric)``) has not improved for more
    than ``patience`` steps (torch's ReduceLROnPlateau: ``mode`` min/max, ``threshold`` rel/abs, ``cooldown``,
    ``min_lr``, changes smaller than ``eps`` ignored). Steps outside ``@plast.jit`` (it reads the metric).

    >>> opt = plast.optim.SGD([plast.nn.Parameter(plast.ones(1))], lr=1.0)
    >>> s = plast.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    >>> for loss in [1.0, 1.0, 1.0, 1.0]:
    ...     s.step(loss)
    >>> s.get_last_lr()
    [0.5]
    """

    def __init__(
        self,
        optimizer,
        mode="min",
        factor=0.1,
        patience=10,
        threshold=1e-4,
        threshold_mode="rel",
        cooldown=0,
        min_lr=0,
        eps=1e-8,
    ):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
            self.min_lrs = list(min_lr)
        else:
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self._init_is_better()
        self._reset()

    def _init_is_better(self):
        self.mode_worse = math.inf if self.mode == "min" else -math.inf

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def step(self, metrics, epoch=None):
        """Record `metrics` (a number or a one-element tensor) and reduce the learning rate when it plateaus."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(
                "The epoch parameter in `scheduler.step()` is deprecated (as in torch); call `step(metric)`",
                UserWarning,
                stacklevel=2,
            )
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self):
        for i, group in enumerate(self.optimizer.param_groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                group["lr"] = new

    def get_lr(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better()


__all__ = [
    "LRScheduler",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "ConstantLR",
    "LinearLR",
    "LambdaLR",
    "SequentialLR",
    "OneCycleLR",
    "ReduceLROnPlateau",
    "LinearWarmupCosineDecay",
]
