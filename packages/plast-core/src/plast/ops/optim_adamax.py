"""Fused Adamax update (torch.optim.Adamax's rule): one op call updates every parameter and its state in place.

Like ``ops/optim.py``: hyperparameters [lr, beta1, beta2, eps, weight_decay] and step counters are input tensors
read when the kernel runs, so a plan replayed by ``@plast.jit`` follows the current learning rate; only structure
(how many parameters, maximize) is in the op's arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core.hints import TensorBase
from ..kernels.cpu import kernels_optim_adamax as K
from .optim import _apply_update
from .registry import register

ADAMAX_UPDATE = register("adamax_update", cpu=K.adamax_update)


def adamax_update_(
    params: Sequence[TensorBase],
    grads: Sequence[TensorBase],
    exp_avgs: Sequence[TensorBase],
    exp_infs: Sequence[TensorBase],
    step: Sequence[TensorBase],
    hyper: TensorBase | Sequence[TensorBase],
    *,
    maximize: bool = False,
    found_inf: TensorBase | None = None,
) -> None:
    """Adamax (Adam with the infinity norm) over all `params` in one in-place pass: ``exp_avg = lerp(exp_avg, g,
    1 - beta1)``, ``exp_inf = max(beta2 * exp_inf, |g| + eps)``, ``p -= lr / (1 - beta1^step) * exp_avg /
    exp_inf``.

    `hyper` is a float tensor [lr, beta1, beta2, eps, weight_decay] (or one per parameter); `step` is a list of
    one-element counters the update increments before using.

    `found_inf` (optional, a one-element float tensor from GradScaler) is read when the update runs: nonzero
    skips the whole update, parameters, state and step counters alike.

    >>> p, g, m, u = plast.ones(2), plast.ones(2), plast.zeros(2), plast.zeros(2)
    >>> n = plast.zeros((), dtype=plast.float64)
    >>> h = plast.tensor([0.1, 0.9, 0.999, 1e-8, 0.0], dtype=plast.float64)
    >>> plast.adamax_update_([p], [g], [m], [u], [n], h)
    >>> round(p.tolist()[0], 4), n.item()
    (0.9, 1.0)
    """
    _apply_update(
        ADAMAX_UPDATE, "adamax_update_", params, grads, [("exp_avgs", exp_avgs), ("exp_infs", exp_infs)],
        [("step", step)], hyper, 5, "lr, beta1, beta2, eps, weight_decay", (bool(maximize),), found_inf,
    )  # fmt: skip


__all__ = ["adamax_update_"]
