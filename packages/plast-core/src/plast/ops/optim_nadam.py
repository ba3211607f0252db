"""Fused NAdam update (torch.optim.NAdam's rule): one op call updates every parameter and its state in place.

Like ``ops/optim.py``: hyperparameters [lr, beta1, beta2, eps, weight_decay, momentum_decay], step counters and
the running products of the momentum coefficients are input tensors read when the kernel runs, so a plan replayed
by ``@plast.jit`` follows the current learning rate; only structure (how many parameters, decoupled decay,
maximize) is in the op's arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core.hints import TensorBase
from ..kernels.cpu import kernels_optim_nadam as K
from .optim import _apply_update
from .registry import register

NADAM_UPDATE = register("nadam_update", cpu=K.nadam_update)


def nadam_update_(
    params: Sequence[TensorBase],
    grads: Sequence[TensorBase],
    exp_avgs: Sequence[TensorBase],
    exp_avg_sqs: Sequence[TensorBase],
    step: Sequence[TensorBase],
    mu_products: Sequence[TensorBase],
    hyper: TensorBase | Sequence[TensorBase],
    *,
    decoupled_weight_decay: bool = False,
    maximize: bool = False,
    found_inf: TensorBase | None = None,
) -> None:
    """NAdam (Adam with Nesterov momentum) over all `params` in one in-place pass, with the momentum schedule
    ``mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))``; ``decoupled_weight_decay`` decays the parameter as
    AdamW does (``p *= 1 - lr * wd``) instead of adding ``wd * p`` to the gradient.

    `hyper` is a float tensor [lr, beta1, beta2, eps, weight_decay, momentum_decay] (or one per parameter);
    `step` and `mu_products` are lists of one-element tensors (torch's ``state['step']`` and
    ``state['mu_product']``): the update increments each step and multiplies each product by ``mu_t``, in that
    tensor's own dtype.

    `found_inf` (optional, a one-element float tensor from GradScaler) is read when the update runs: nonzero
    skips the whole update, parameters, state and step counters alike.

    >>> p, g, m, v = plast.ones(2), plast.ones(2), plast.zeros(2), plast.zeros(2)
    >>> n, mp = plast.zeros((), dtype=plast.float64), plast.ones(())
    >>> h = plast.tensor([0.1, 0.9, 0.999, 1e-8, 0.0, 4e-3], dtype=plast.float64)
    >>> plast.nadam_update_([p], [g], [m], [v], [n], [mp], h)
    >>> round(p.tolist()[0], 4), n.item()
    (0.8944, 1.0)
    """
    _apply_update(
        NADAM_UPDATE, "nadam_update_", params, grads, [("exp_avgs", exp_avgs), ("exp_avg_sqs", exp_avg_sqs)],
        [("step", step), ("mu_products", mu_products)], hyper, 6, "lr, beta1, beta2, eps, weight_decay, momentum_decay",
        (bool(decoupled_weight_decay), bool(maximize)), found_inf,
    )  # fmt: skip


__all__ = ["nadam_update_"]
