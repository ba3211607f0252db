"""backward() the ordinary way: run the backward rules from the roots (autograd/_backward.pyx), realize the
gradients in one call, write ``.grad`` (into persistent memory where it can go straight there).
autograd/backward_replay.py records one such call to replay it on the next step."""

import weakref

from .._core import grad_mode as autograd_state
from .._core._structs import grad_assigned_in_trace
from .._core.grad_mode import _grad_mode
from ..graph import tape
from ..graph.threads import bind_arenas, engine_lock
from ..ops._movement import persistent_copy
from ..ops.elementwise import add
from ._backward import finish as _finish
from ._backward import place_gradients, run_backward


def _run_backward(roots, grad_roots, retain_graph, create_graph, want=None, checked=None):
    """Propagate gradients from `roots` (autograd/_backward.pyx). Returns ({id(tensor): [tensor, grad]}, nodes)."""
    prev = autograd_state.is_grad_enabled()
    autograd_state._set(create_graph)  # backward rules record for double backward only if asked
    try:
        with engine_lock:
            bind_arenas()
            return run_backward(roots, grad_roots, want, checked)
    finally:
        autograd_state._set(prev)


def backward_leaves(tensors, grad_tensors, checked=None, retain_graph=None, create_graph=False, inputs=None):
    """_backward_leaves with the engine lock held (graph/threads.py: one thread computes at a time)."""
    with engine_lock:
        bind_arenas()
        return _backward_leaves(tensors, grad_tensors, checked, retain_graph, create_graph, inputs)


def _backward_leaves(tensors, grad_tensors, checked=None, retain_graph=None, create_graph=False, inputs=None):
    """backward() the ordinary way: run the rules, realize the gradients, set ``.grad``. Returns the nodes
    visited (autograd/backward_replay.py records this call to replay it)."""
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    leaf_grads, order = _run_backward(
        list(tensors), list(grad_tensors), retain_graph, create_graph, want=inputs, checked=checked
    )
    traced = tape.tracing() and not create_graph
    updates = []
    for t, g in leaf_grads.values():
        if g is None:
            continue
        if t.grad is not None and not traced:  # accumulate (a trace accumulates in place: _traced_grad)
            with _grad_mode(create_graph):
                g = add(t.grad, g)
        updates.append((t, g))
    grads = [g for _, g in updates]
    if create_graph:
        _finish(order, grads, retain_graph, create_graph)
        for t, g in updates:
            t.grad = g
        return order
    # Gradients are computed straight into persistent memory where they can be.
    place, keys = place_gradients(grads) if not traced else (None, None)
    _finish(order, grads, retain_graph, create_graph, place)
    if traced:
        for t, g in updates:
            _traced_grad(t, g)
        return order
    for i, (t, g) in enumerate(updates):
        st = place.get(keys[i]) if place and keys[i] is not None else None
        # computed into the placed memory (row-major: place_gradients checked)
        if st is not None and g._storage is st:
            t.grad = type(g)._from_storage(st, g.shape, g.dtype, g.device)
        else:
            t.grad = persistent_copy(g)
    return order


def _traced_grad(t, g):
    """Write t's gradient `g` in a @plast.jit trace so that every replay does what eager backward would do then.

    The plan is valid only while t's .grad at the start of a call is the one this trace saw (unless the traced
    function assigns .grad itself, as ``zero_grad()`` inside the step does): a replay then accumulates into that
    same tensor's memory in place, or, when it was None, computes the gradient into the memory the trace made and
    binds .grad to it again before its kernels run (a ``zero_grad()`` outside the step leaves .grad None between
    calls). NOTE: that memory is reused by every replay: a reference kept to an earlier call's .grad sees the new
    values."""
    if not grad_assigned_in_trace(t):
        r, start = weakref.ref(t), t.grad
        tape.note_state(t, lambda: r() is not None and r().grad is start, key=True)
    if t.grad is not None:
        t.grad.add_(g)  # in place: the plan reads and writes the memory .grad has
        return
    p = persistent_copy(g)
    tape.runtime_input(lambda r=weakref.ref(t), p=p: _bind_grad(r, p))


def _bind_grad(ref, g):
    t = ref()
    if t is not None:
        t._grad = g
