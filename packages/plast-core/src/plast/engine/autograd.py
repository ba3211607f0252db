"""Reverse-mode autograd over the lazy graph (DESIGN §2.6).

Each op's backward rule is written in plast ops and returns one gradient per input (None where there is none);
this engine — not the op — sums broadcast gradients back to each input's shape, accumulates gradients that meet
at one tensor, runs hooks, and writes leaf gradients to persistent memory in one realize call.
"""

import contextlib

from .. import _arenas
from . import autograd_state
from .realize import realize


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


def _producer(t):
    n = t._node
    return n if n is not None and n.needs_grad and t.requires_grad else None


def _topo(roots):
    """Nodes reachable from `roots` through differentiable edges, outputs before inputs."""
    order, seen = [], set()
    stack = [(n, False) for n in roots]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.inputs is None:
            raise RuntimeError(
                "trying to backward through the graph a second time (or to reach tensors whose saved values "
                "were freed after the first backward); pass retain_graph=True to the first backward"
            )
        stack.append((node, True))
        for t in node.inputs:
            p = _producer(t) if t.requires_grad else None
            if p is not None and id(p) not in seen:
                stack.append((p, False))
    order.reverse()
    return order


def _check_versions(node):
    for i, (t, v) in enumerate(zip(node.inputs, node.versions)):
        if t._storage is not None and t._storage.version != v:
            raise RuntimeError(
                f"one of the tensors needed for gradient computation has been modified by an in-place operation: "
                f"input {i} of {node.op.name} (shape {tuple(t.shape)}, {t.dtype}) is at version "
                f"{t._storage.version}, but backward expected version {v}. Make the in-place change on a "
                f".clone(), or make it after backward()"
            )


def _run_backward(roots, grad_roots, retain_graph, create_graph, want=None):
    """Propagate gradients from `roots`. Returns {id(tensor): grad} for leaves (or for `want` tensors)."""
    from ..creation import ones_like
    from ..ops import movement
    from ..ops.elementwise import add
    from ..ops.reduce import sum_to_shape

    if retain_graph is None:
        retain_graph = create_graph
    slots = {}  # (id(node), index) -> grad
    leaf_grads = {}  # id(leaf) -> [leaf, grad]
    want_ids = {id(t): t for t in want} if want is not None else None

    def deliver(t, g):
        if g is None:
            return
        if g.dtype is not t.dtype:
            g = movement.cast(g, t.dtype)
        g = sum_to_shape(g, t.shape)
        p = _producer(t)
        if p is not None and (want_ids is None or id(t) not in want_ids):
            key = (id(p), t._index)
            prev = slots.get(key)
            slots[key] = g if prev is None else add(prev, g)
            if t._retains_grad:
                leaf_grads.setdefault(id(t), [t, None])
            return
        if want_ids is not None and id(t) not in want_ids:
            return
        entry = leaf_grads.get(id(t))
        if entry is None:
            leaf_grads[id(t)] = [t, g]
        else:
            entry[1] = g if entry[1] is None else add(entry[1], g)

    root_nodes = []
    with _grad_mode(create_graph):
        for r, g in zip(roots, grad_roots):
            if not r.requires_grad:
                raise RuntimeError(
                    "element 0 of tensors does not require grad and does not have a grad_fn: nothing to "
                    "differentiate (did you create it under no_grad, or forget requires_grad=True?)"
                )
            if g is None:
                if r.numel() != 1:
                    raise RuntimeError(
                        f"grad can be implicitly created only for scalar outputs; this output has shape "
                        f"{tuple(r.shape)}: pass gradient= (a tensor of that shape) to backward()"
                    )
                g = ones_like(r)
            elif tuple(g.shape) != tuple(r.shape):
                from ..errors import ShapeError

                raise ShapeError(
                    f"backward: gradient has shape {tuple(g.shape)}, the output has {tuple(r.shape)}"
                )
            p = _producer(r)
            if p is not None:
                root_nodes.append(p)
            deliver(r, g)
        order = _topo(root_nodes)
        by_output = {}
        for node in order:
            gs = [slots.pop((id(node), i), None) for i in range(len(node.specs))]
            # hooks and retain_grad on non-leaf outputs see their complete gradient here
            for i, ref in enumerate(node.outputs):
                t = ref()
                if t is None or gs[i] is None:
                    continue
                if t._hooks:
                    for h in t._hooks:
                        r = h(gs[i])
                        if r is not None:
                            gs[i] = r
                if t._retains_grad and id(t) in leaf_grads:
                    leaf_grads[id(t)][1] = gs[i]
                by_output[id(t)] = gs[i]
            if all(g is None for g in gs):
                continue
            if node.versions is not None:
                _check_versions(node)
            if len(gs) == 1:
                in_grads = node.op.backward(node, gs[0])
            else:
                in_grads = node.op.backward(node, *gs)
            if len(in_grads) != len(node.inputs):
                raise AssertionError(
                    f"backward of {node.op.name} returned {len(in_grads)} grads for {len(node.inputs)} inputs"
                )
            for t, g in zip(node.inputs, in_grads):
                if g is not None and t.requires_grad:
                    deliver(t, g)
        if want_ids is not None:
            for tid in want_ids:
                if tid in by_output and tid not in leaf_grads:
                    leaf_grads[tid] = [want_ids[tid], by_output[tid]]
    return leaf_grads, order


def _finish(order, grads, retain_graph, create_graph):
    """Realize the gradients, then every forward value that someone outside the graph still holds (fusion may
    have left intermediates unmaterialized), then (unless the graph is retained) free the graph's saved tensors."""
    import sys

    if retain_graph is None:
        retain_graph = create_graph
    if not create_graph:
        realize(grads)
    occ = {}
    for node in order:
        if node.inputs:
            for x in node.inputs:
                occ[id(x)] = occ.get(id(x), 0) + 1
    x = None
    held = []
    for node in order:
        for ref in node.outputs:
            t = ref()
            # NOTE: getrefcount counts its argument and the local `t`; the rest must be graph edges.
            if t is not None and t._storage is None and sys.getrefcount(t) - 2 > occ.get(id(t), 0):
                held.append(t)
            t = None
    realize(held)
    if not retain_graph:
        for node in order:
            node.inputs = None


def _persistent_copy(t):
    """t's value in fresh persistent memory (grads outlive transient resets, DESIGN §3)."""
    from ..backends.cpu.kernels import np_view
    from ..tensor import Tensor

    st = _arenas.persistent(t.device.type).new(t.numel() * t.dtype.itemsize)
    out = Tensor._from_storage(st, t.shape, t.dtype, t.device)
    if t.numel():
        np_view(out)[...] = np_view(t)
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
