"""Fused RMSprop update (torch.optim.RMSprop's rule): one op call updates every parameter and its state in place.

Like ``ops/optim.py``: hyperparameters [lr, alpha, eps, weight_decay, momentum] and step counters are input
tensors read when the kernel runs, so a plan replayed by ``@plast.jit`` follows the current learning rate; only
structure (how many parameters, centered / momentum / maximize) is in the op's arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core.grad_mode import no_grad
from .._core.hints import TensorBase
from ..graph._mutation import apply_mutation
from ..kernels.cpu import kernels_optim_rmsprop as K
from .optim import _check_devices, _check_distinct, _found_inf_input, _hypers, _scalar_list, _tensor_list
from .registry import register

RMSPROP_UPDATE = register("rmsprop_update", cpu=K.rmsprop_update)


def rmsprop_update_(
    params: Sequence[TensorBase],
    grads: Sequence[TensorBase],
    square_avgs: Sequence[TensorBase],
    step: Sequence[TensorBase],
    hyper: TensorBase | Sequence[TensorBase],
    *,
    momentum_buffers: Sequence[TensorBase] | None = None,
    grad_avgs: Sequence[TensorBase] | None = None,
    maximize: bool = False,
    found_inf: TensorBase | None = None,
) -> None:
    """RMSprop over all `params` in one in-place pass: ``square_avg = alpha * square_avg + (1 - alpha) * g^2``,
    ``avg = sqrt(square_avg - grad_avg^2 if centered else square_avg) + eps``, then ``p -= lr * g / avg`` or,
    with `momentum_buffers`, ``buf = momentum * buf + g / avg; p -= lr * buf``.

    `hyper` is a float tensor [lr, alpha, eps, weight_decay, momentum] (or one per parameter); `step` is a list
    of one-element counters the update increments; `grad_avgs` (one per parameter) turns on the centered form.

    `found_inf` (optional, a one-element float tensor from GradScaler) is read when the update runs: nonzero
    skips the whole update, parameters, state and step counters alike.

    >>> p, g, s, n = plast.ones(2), plast.ones(2), plast.zeros(2), plast.zeros((), dtype=plast.float64)
    >>> h = plast.tensor([0.1, 0.99, 1e-8, 0.0, 0.0], dtype=plast.float64)
    >>> plast.rmsprop_update_([p], [g], [s], [n], h)
    >>> round(p.tolist()[0], 4), n.item()
    (0.0, 1.0)
    """
    op = "rmsprop_update_"
    params = _tensor_list(params, None, op, "params")
    n = len(params)
    if n == 0:
        return
    grads = _tensor_list(grads, n, op, "grads", same_shape_as=params)
    square_avgs = _tensor_list(square_avgs, n, op, "square_avgs", same_shape_as=params)
    steps = _scalar_list(step, n, op, "step")
    hs, hidx = _hypers(hyper, n, 5, op, "lr, alpha, eps, weight_decay, momentum")
    inputs = hs + params + grads + square_avgs + steps
    has_mom, centered = momentum_buffers is not None, grad_avgs is not None
    if has_mom:
        inputs += _tensor_list(momentum_buffers, n, op, "momentum_buffers", same_shape_as=params)
    if centered:
        inputs += _tensor_list(grad_avgs, n, op, "grad_avgs", same_shape_as=params)
    h = len(hs)
    mutated = list(range(h, h + n)) + list(range(h + 2 * n, len(inputs)))
    inputs += _found_inf_input(found_inf, op)
    _check_distinct(params, op)
    _check_devices(op, inputs)
    args = (n, h, hidx, has_mom, centered, bool(maximize))
    with no_grad():
        apply_mutation(RMSPROP_UPDATE, inputs, args, mutated)


__all__ = ["rmsprop_update_"]
