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
]
