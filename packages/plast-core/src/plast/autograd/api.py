"""Reverse-mode autograd over the lazy graph (DESIGN §2.6).

Each op's backward rule is written in plast ops and returns one gradient per input (None where there is none);
this engine — not the op — sums broadcast gradients back to each input's shape, accumulates gradients that meet
at one tensor, runs hooks, and writes leaf gradients to persistent memory in one realize call.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core._structs import TensorBase
from .._core.grad_mode import (  # noqa: F401 (plast.autograd's names)
    _grad_mode,
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from ..graph import tape
from ..graph.threads import bind_arenas, engine_lock
from . import backward_replay, hooks
from .engine import _finish, _run_backward
from .engine import backward_leaves as _backward_leaves


def backward(
    tensors: Sequence[TensorBase],
    grad_tensors: Sequence[TensorBase | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Sequence[TensorBase] | None = None,
) -> None:
    """Accumulate d(tensors)/d(leaf) into each leaf's ``.grad`` (``inputs`` restricts which leaves)."""
    before = hooks.grads_before()
    if (
        len(tensors) == 1
        and not retain_graph
        and not create_graph
        and inputs is None
        and (grad_tensors is None or grad_tensors[0] is None)
        and tape.active() is None
        and _try_replay(tensors[0])  # a training loop's repeated backward
    ):
        hooks.fire(before)
        return
    _backward_leaves(tensors, grad_tensors, None, retain_graph, create_graph, inputs)
    hooks.fire(before)


def _try_replay(root):
    with engine_lock:  # (graph/threads.py: one thread computes at a time)
        bind_arenas()
        return backward_replay.try_replay(root)


def grad(
    outputs: TensorBase | Sequence[TensorBase],
    inputs: TensorBase | Sequence[TensorBase],
    grad_outputs: TensorBase | Sequence[TensorBase | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple[TensorBase | None, ...]:
    """Gradients of `outputs` with respect to `inputs`, returned (not accumulated into .grad)."""
    single = isinstance(outputs, TensorBase)
    outputs = [outputs] if single else list(outputs)
    inputs_l = [inputs] if isinstance(inputs, TensorBase) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, TensorBase):
        grad_outputs = [grad_outputs]
    for t in inputs_l:
        if not t.requires_grad:
            raise RuntimeError("one of the differentiated tensors does not require grad")
    got, order = _run_backward(outputs, list(grad_outputs), retain_graph, create_graph, want=inputs_l)
    result = []
    for t in inputs_l:
        g = got.get(id(t), [None, None])[1]
        if g is None and not allow_unused:
            raise RuntimeError(
                "one of the differentiated tensors appears not to have been used in the graph; "
                "pass allow_unused=True if this is what you want"
            )
        result.append(g)
    _finish(order, [g for g in result if g is not None], retain_graph, create_graph)
    return tuple(result)
