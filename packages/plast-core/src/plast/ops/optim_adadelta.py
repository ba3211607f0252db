"""Fused Adadelta update (torch.optim.Adadelta's rule): one op call updates every parameter and its state in place.

Like ``ops/optim.py``: hyperparameters [lr, rho, eps, weight_decay] and step counters are input tensors read when
the kernel runs, so a plan replayed by ``@plast.jit`` follows the current learning rate; only structure (how many
parameters, maximize) is in the op's arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core.hints import TensorBase
from ..kernels.cpu import kernels_optim_adadelta as K
from .optim import _apply_update
from .registry import register

ADADELTA_UPDATE = register("adadelta_update", cpu=K.adadelta_update)


def adadelta_update_(
    params: Sequence[TensorBase],
    grads: Sequence[TensorBase],
    square_avgs: Sequence[TensorBase],
    acc_deltas: Sequence[TensorBase],
    step: Sequence[TensorBase],
    hyper: TensorBase | Sequence[TensorBase],
    *,
    maximize: bool = False,
    found_inf: TensorBase | None = None,
) -> None:
    """Adadelta over all `params` in one in-place pass: ``square_avg = rho * square_avg + (1 - rho) * g^2``,
    ``delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g``, ``acc_delta = rho * acc_delta + (1 - rho) *
    delta^2``, ``p -= lr * delta``.

    `hyper` is a float tensor [lr, rho, eps, weight_decay] (or one per parameter); `step` is a list of
    one-element counters the update increments.

    `found_inf` (optional, a one-element float tensor from GradScaler) is read when the update runs: nonzero
    skips the whole update, parameters, state and step counters alike.

    >>> p, g, s, a = plast.ones(2), plast.ones(2), plast.zeros(2), plast.zeros(2)
    >>> n = plast.zeros((), dtype=plast.float64)
    >>> plast.adadelta_update_([p], [g], [s], [a], [n], plast.tensor([1.0, 0.9, 1e-6, 0.0], dtype=plast.float64))
    >>> round(p.tolist()[0], 4), n.item()
    (0.9968, 1.0)
    """
    _apply_update(
        ADADELTA_UPDATE, "adadelta_update_", params, grads, [("square_avgs", square_avgs), ("acc_deltas", acc_deltas)],
        [("step", step)], hyper, 4, "lr, rho, eps, weight_decay", (bool(maximize),), found_inf,
    )  # fmt: skip


__all__ = ["adadelta_update_"]
