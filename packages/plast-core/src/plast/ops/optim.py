"""Fused optimizer updates: one op call updates every parameter (of every group) and its state in place.

These are the kernels plast.optim calls (DESIGN §1: optimizers live in plast-nn, their update ops in core). They
run now, under no_grad, through ``graph._mutation.apply_mutation``: pending lazy reads of the old values are
computed first and storage versions go up, so a backward that would read an overwritten parameter is caught.

Learning rate, momentum, betas, eps, weight decay and step counts are *input tensors* read when the kernel runs,
never op arguments: a plan replayed by ``@plast.jit`` then follows a scheduler's learning rate and counts steps
itself. Only structure (how many parameters, which options are on) is in the op's arguments.

An optional ``found_inf`` input (GradScaler's) is read the same way: nonzero when the update runs, the update
does nothing, so a jitted AMP step skips by data, not by Python control flow. It comes last, after the fixed
inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core import dtypes
from .._core.grad_mode import no_grad
from .._core.hints import TensorBase
from ..graph._mutation import apply_mutation
from ..kernels.cpu import kernels_optim as K
from . import _optim_args
from .creation import zeros
from .registry import register

SGD_UPDATE = register("sgd_update", cpu=K.sgd_update)
ADAM_UPDATE = register("adam_update", cpu=K.adam_update)


# compiled (ops/_optim_args.pyx): every step checks every parameter, gradient and state tensor
_tensor_list, _scalar_list, _hypers = _optim_args.tensor_list, _optim_args.scalar_list, _optim_args.hypers
_check_distinct, _check_devices = _optim_args.check_distinct, _optim_args.check_devices


def _found_inf_input(found_inf, op):
    """[found_inf] as the update's last input (the kernels find it one past their fixed inputs), or []."""
    if found_inf is None:
        return []
    if not isinstance(found_inf, TensorBase):
        raise TypeError(f"{op}: found_inf must be a tensor, got {type(found_inf).__name__}")
    # NOTE: float32 only, so the CUDA kernels read it through one pointer type (GradScaler makes float32)
    if found_inf.dtype is not dtypes.float32 or found_inf.numel() != 1:
        raise ValueError(
            f"{op}: found_inf must be a one-element float32 tensor, got {found_inf.dtype} of shape "
            f"{tuple(found_inf.shape)}"
        )
    return [found_inf]


def _apply_update(row, op, params, grads, states, scalars, hyper, width, names, flags, found_inf):
    """Check and run a fused update laid out as most are: hyper tensors, params, grads, one list per state buffer
    (`states`: (name, list) pairs, each tensor shaped as its parameter), one-element tensors per parameter
    (`scalars`: the step counters and the like), then `found_inf` when given. Parameters and everything after the
    gradients are written. The op's args are ``(n, number of hyper tensors, hyper row per parameter, *flags)``."""
    params = _tensor_list(params, None, op, "params")
    n = len(params)
    if n == 0:
        return
    inputs = _tensor_list(grads, n, op, "grads", same_shape_as=params)
    for name, tensors in states:
        inputs = inputs + _tensor_list(tensors, n, op, name, same_shape_as=params)
    for name, tensors in scalars:
        inputs = inputs + _scalar_list(tensors, n, op, name)
    hs, hidx = _hypers(hyper, n, width, op, names)
    inputs = hs + params + inputs
    h = len(hs)
    mutated = list(range(h, h + n)) + list(range(h + 2 * n, len(inputs)))
    inputs += _found_inf_input(found_inf, op)
    _check_distinct(params, op)
    _check_devices(op, inputs)
    with no_grad():
        apply_mutation(row, inputs, (n, h, hidx, *flags), mutated)


def sgd_update_(
    params: Sequence[TensorBase],
    grads: Sequence[TensorBase],
    momentum_bufs: Sequence[TensorBase] | None,
    hyper: TensorBase | Sequence[TensorBase],
    *,
    fresh: Sequence[TensorBase] | None = None,
    nesterov: bool = False,
    maximize: bool = False,
    found_inf: TensorBase | None = None,
) -> None:
    """SGD (torch.optim.SGD's rule) over all `params` in one in-place pass.

    `hyper` is a float tensor [lr, momentum, dampening, weight_decay] (or a list of them, one per parameter),
    read when the update runs. `momentum_bufs` is None (no momentum) or one buffer per parameter; `fresh` is an
    optional list of one-element tensors, nonzero where a buffer starts now (it then takes the gradient as is,
    as in torch's first step); the update clears them.

    `found_inf` (optional, a one-element float tensor from GradScaler) is read when the update runs: nonzero
    skips the whole update, parameters, state and step counters alike.

    >>> p = plast.ones(2)
    >>> plast.sgd_update_([p], [plast.ones(2)], None, plast.tensor([0.5, 0.0, 0.0, 0.0], dtype=plast.float64))
    >>> p.tolist()
    [0.5, 0.5]
    """
    op = "sgd_update_"
    params = _tensor_list(params, None, op, "params")
    n = len(params)
    if n == 0:
        return
    grads = _tensor_list(grads, n, op, "grads", same_shape_as=params)
    hs, hidx = _hypers(hyper, n, 4, op, "lr, momentum, dampening, weight_decay")
    inputs = hs + params + grads
    if momentum_bufs is not None:
        bufs = _tensor_list(momentum_bufs, n, op, "momentum_bufs", same_shape_as=params)
        if fresh is None:
            fresh = [zeros((), dtype="float64") for _ in range(n)]
        fresh = _scalar_list(fresh, n, op, "fresh")
        inputs += bufs + fresh
        mutated = list(range(len(hs), len(hs) + n)) + list(range(len(hs) + 2 * n, len(inputs)))
    elif nesterov:
        raise ValueError(f"{op}: nesterov needs momentum buffers")
    else:
        mutated = list(range(len(hs), len(hs) + n))
    inputs += _found_inf_input(found_inf, op)
    _check_distinct(params, op)
    _check_devices(op, inputs)
    args = (n, len(hs), hidx, momentum_bufs is not None, bool(nesterov), bool(maximize))
    with no_grad():
        apply_mutation(SGD_UPDATE, inputs, args, mutated)


def adam_update_(
    params: Sequence[TensorBase],
    grads: Sequence[TensorBase],
    exp_avgs: Sequence[TensorBase],
    exp_avg_sqs: Sequence[TensorBase],
    step: Sequence[TensorBase],
    hyper: TensorBase | Sequence[TensorBase],
    amsgrad: bool = False,
    decoupled_weight_decay: bool = False,
    max_exp_avg_sqs: Sequence[TensorBase] | None = None,
    maximize: bool = False,
    *,
    found_inf: TensorBase | None = None,
) -> None:
    """Adam / AdamW (torch.optim.Adam's rule, bias-corrected) over all `params` in one in-place pass.

    `hyper` is a float tensor [lr, beta1, beta2, eps, weight_decay] (or a list of them, one per parameter);
    `step` is a list of one-element float tensors, one per parameter, that the update increments before using
    (as torch's ``state['step']``). With ``decoupled_weight_decay`` the decay is AdamW's ``p *= 1 - lr * wd``.

    `found_inf` (optional, a one-element float tensor from GradScaler) is read when the update runs: nonzero
    skips the whole update, parameters, state and step counters alike.

    >>> p, g = plast.ones(2), plast.ones(2)
    >>> m, v, s = plast.zeros(2), plast.zeros(2), plast.zeros((), dtype=plast.float64)
    >>> h = plast.tensor([0.1, 0.9, 0.999, 1e-8, 0.0], dtype=plast.float64)
    >>> plast.adam_update_([p], [g], [m], [v], [s], h)
    >>> round(p.tolist()[0], 4), s.item()
    (0.9, 1.0)
    """
    op = "adam_update_"
    params = _tensor_list(params, None, op, "params")
    n = len(params)
    if n == 0:
        return
    grads = _tensor_list(grads, n, op, "grads", same_shape_as=params)
    exp_avgs = _tensor_list(exp_avgs, n, op, "exp_avgs", same_shape_as=params)
    exp_avg_sqs = _tensor_list(exp_avg_sqs, n, op, "exp_avg_sqs", same_shape_as=params)
    steps = _scalar_list(step, n, op, "step")
    hs, hidx = _hypers(hyper, n, 5, op, "lr, beta1, beta2, eps, weight_decay")
    inputs = hs + params + grads + exp_avgs + exp_avg_sqs + steps
    if amsgrad:
        if max_exp_avg_sqs is None:
            raise ValueError(f"{op}: amsgrad needs max_exp_avg_sqs (one per parameter)")
        inputs += _tensor_list(max_exp_avg_sqs, n, op, "max_exp_avg_sqs", same_shape_as=params)
    h = len(hs)
    mutated = list(range(h, h + n)) + list(range(h + 2 * n, len(inputs)))
    inputs += _found_inf_input(found_inf, op)
    _check_distinct(params, op)
    _check_devices(op, inputs)
    args = (n, h, hidx, bool(amsgrad), bool(decoupled_weight_decay), bool(maximize))
    with no_grad():
        apply_mutation(ADAM_UPDATE, inputs, args, mutated)


__all__ = ["sgd_update_", "adam_update_"]
