"""Reverse-mode autograd over the lazy graph (DESIGN §2.6).

Each op's backward rule is written in plast ops and returns one gradient per input (None where there is none);
this engine — not the op — sums broadcast gradients back to each input's shape, accumulates gradients that meet
at one tensor, runs hooks, and writes leaf gradients to persistent memory in one realize call.
"""

import contextlib

from .. import _arenas
from . import autograd_state
from ._backward import finish as _finish
from ._backward import run_backward


@contextlib.contextmanager
def _grad_mode(enabled):
    prev = autograd_state.grad_enabled
    autograd_state.grad_enabled = enabled
    try:
        yield
    finally:
        autograd_state.grad_enabled = prev


class no_grad(contextlib.ContextDecorator):
    """Ops inside record nothing for backward (a context manager and a decorator, as in torch)."""

    def __enter__(self):
        self._prev = autograd_state.grad_enabled
        autograd_state.grad_enabled = False

    def __exit__(self, *exc):
        autograd_state.grad_enabled = self._prev
        return False


class enable_grad(contextlib.ContextDecorator):
    def __enter__(self):
        self._prev = autograd_state.grad_enabled
        autograd_state.grad_enabled = True

    def __exit__(self, *exc):
        autograd_state.grad_enabled = self._prev
        return False


class inference_mode(no_grad):
    """Like no_grad (plast has no separate inference tensors)."""

    def __init__(self, mode=True):
        self.mode = mode

    def __enter__(self):
        self._prev = autograd_state.grad_enabled
        autograd_state.grad_enabled = not self.mode


class set_grad_enabled(contextlib.ContextDecorator):
    def __init__(self, mode):
        self._prev = autograd_state.grad_enabled
        autograd_state.grad_enabled = bool(mode)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        autograd_state.grad_enabled = self._prev
        return False


def is_grad_enabled():
    return autograd_state.grad_enabled


def _run_backward(roots, grad_roots, retain_graph, create_graph, want=None):
    """Propagate gradients from `roots` (engine/_backward.pyx). Returns ({id(tensor): [tensor, grad]}, nodes)."""
    with _grad_mode(create_graph):
        return run_backward(roots, grad_roots, want)


def _persistent_copy(t):
    """t's value in fresh persistent memory (grads outlive transient resets, DESIGN §3)."""
    from ..backends.cpu.kernels import np_view
    from ..tensor import Tensor

    st = _arenas.persistent(t.device.type).new(t.numel() * t.dtype.itemsize)
    out = Tensor._from_storage(st, t.shape, t.dtype, t.device)
    if t.numel():
        if t.device.type == "cpu":
            np_view(out)[...] = np_view(t)
        else:  # GPU memory is no numpy buffer: a device-side copy (plast.ops.device)
            from ..ops.device import copy_values

            copy_values(out, t)
    from . import jit

    jit.note_copy(out, t, "persist")
    return out


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaf) into each leaf's ``.grad`` (``inputs`` restricts which leaves)."""
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    leaf_grads, order = _run_backward(
        list(tensors), list(grad_tensors), retain_graph, create_graph, want=inputs
    )
    from ..ops.elementwise import add

    updates = []
    with _grad_mode(create_graph):
        for t, g in leaf_grads.values():
            if g is None:
                continue
            new = g if t.grad is None else add(t.grad, g)
            updates.append((t, new))
    _finish(order, [g for _, g in updates], retain_graph, create_graph)
    if not create_graph:
        for t, g in updates:
            t.grad = _persistent_copy(g)
    else:
        for t, g in updates:
            t.grad = g


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """Gradients of `outputs` with respect to `inputs`, returned (not accumulated into .grad)."""
    from ..tensor import Tensor

    single = isinstance(outputs, Tensor)
    outputs = [outputs] if single else list(outputs)
    inputs_l = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
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
