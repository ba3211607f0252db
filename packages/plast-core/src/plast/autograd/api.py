"""Reverse-mode autograd over the lazy graph (DESIGN §2.6).

Each op's backward rule is written in plast ops and returns one gradient per input (None where there is none);
this engine — not the op — sums broadcast gradients back to each input's shape, accumulates gradients that meet
at one tensor, runs hooks, and writes leaf gradients to persistent memory in one realize call.
"""

from .._core import grad_mode as autograd_state
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
from ..ops._movement import persistent_copy
from ..ops.elementwise import add
from . import backward_replay
from ._backward import finish as _finish
from ._backward import place_gradients, run_backward


def _run_backward(roots, grad_roots, retain_graph, create_graph, want=None, checked=None):
    """Propagate gradients from `roots` (autograd/_backward.pyx). Returns ({id(tensor): [tensor, grad]}, nodes)."""
    prev = autograd_state.grad_enabled
    autograd_state.grad_enabled = create_graph  # backward rules record for double backward only if asked
    try:
        return run_backward(roots, grad_roots, want, checked)
    finally:
        autograd_state.grad_enabled = prev


_persistent_copy = persistent_copy  # t's value in fresh persistent memory (the name other modules import)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaf) into each leaf's ``.grad`` (``inputs`` restricts which leaves)."""
    if (
        len(tensors) == 1
        and not retain_graph
        and not create_graph
        and inputs is None
        and (grad_tensors is None or grad_tensors[0] is None)
        and tape._tape is None
        and backward_replay.try_replay(tensors[0])  # a training loop's repeated backward
    ):
        return
    _backward_leaves(tensors, grad_tensors, None, retain_graph, create_graph, inputs)


def _backward_leaves(tensors, grad_tensors, checked=None, retain_graph=None, create_graph=False, inputs=None):
    """backward() the ordinary way: run the rules, realize the gradients, set ``.grad``. Returns the nodes
    visited (autograd/backward_replay.py records this call to replay it)."""
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    leaf_grads, order = _run_backward(
        list(tensors), list(grad_tensors), retain_graph, create_graph, want=inputs, checked=checked
    )
    updates = []
    for t, g in leaf_grads.values():
        if g is None:
            continue
        if t.grad is not None:  # accumulate
            with _grad_mode(create_graph):
                g = add(t.grad, g)
        updates.append((t, g))
    grads = [g for _, g in updates]
    if create_graph:
        _finish(order, grads, retain_graph, create_graph)
        for t, g in updates:
            t.grad = g
        return order
    # Gradients are computed straight into persistent memory where they can be (a jit trace copies them: its
    # replay keeps the memory it traced).
    place, keys = place_gradients(grads) if tape._tape is None else (None, None)
    _finish(order, grads, retain_graph, create_graph, place)
    for i, (t, g) in enumerate(updates):
        st = place.get(keys[i]) if place and keys[i] is not None else None
        # computed into the placed memory (row-major: place_gradients checked)
        if st is not None and g._storage is st:
            t.grad = type(g)._from_storage(st, g.shape, g.dtype, g.device)
        else:
            t.grad = persistent_copy(g)
    return order


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
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
