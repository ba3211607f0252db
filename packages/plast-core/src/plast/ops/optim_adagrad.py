"""Fused Adagrad update (torch.optim.Adagrad's rule): one op call updates every parameter and its state in place.

Like ``ops/optim.py``: hyperparameters [lr, lr_decay, weight_decay, eps] and step counters are input tensors read
when the kernel runs, so a plan replayed by ``@plast.jit`` follows the current learning rate; only structure (how
many parameters, maximize) is in the op's arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core.hints import TensorBase
from ..kernels.cpu import kernels_optim_adagrad as K
from .optim import _apply_update
from .registry import register

ADAGRAD_UPDATE = register("adagrad_update", cpu=K.adagrad_update)


def adagrad_update_(
    params: Sequence[TensorBase],
    grads: Sequence[TensorBase],
    state_sums: Sequence[TensorBase],
    step: Sequence[TensorBase],
    hyper: TensorBase | Sequence[TensorBase],
    *,
    maximize: bool = False,
    found_inf: TensorBase | None = None,
) -> None:
    """Adagrad over all `params` in one in-place pass: ``sum += g^2``, ``p -= clr * g / (sqrt(sum) + eps)`` with
    ``clr = lr / (1 + (step - 1) * lr_decay)``, `step` counted after the update increments it.

    `hyper` is a float tensor [lr, lr_decay, weight_decay, eps] (or one per parameter); `step` is a list of
    one-element counters. (torch's ``initial_accumulator_value`` is where the caller starts each sum.)

    `found_inf` (optional, a one-element float tensor from GradScaler) is read when the update runs: nonzero
    skips the whole update, parameters, state and step counters alike.

    >>> p, g, s, n = plast.ones(2), plast.ones(2), plast.zeros(2), plast.zeros((), dtype=plast.float64)
    >>> plast.adagrad_update_([p], [g], [s], [n], plast.tensor([0.1, 0.0, 0.0, 1e-10], dtype=plast.float64))
    >>> round(p.tolist()[0], 4), s.tolist(), n.item()
    (0.9, [1.0, 1.0], 1.0)
    """
    _apply_update(
        ADAGRAD_UPDATE, "adagrad_update_", params, grads, [("state_sums", state_sums)], [("step", step)], hyper, 4,
        "lr, lr_decay, weight_decay, eps", (bool(maximize),), found_inf,
    )  # fmt: skip


__all__ = ["adagrad_update_"]
