"""The plain scheduler: realize the unrealized part of a graph in topological order (engine I).

The plan cache, the liveness planner and fusion (engine II) slot in here: they change how `order` is computed
and executed, not what a kernel sees.
"""

from .. import _arenas
from . import autograd_state, jit


def schedule(targets):
    """Nodes needed to realize `targets`, in topological order (inputs first)."""
    order = []
    seen = set()
    stack = []
    for t in targets:
        if t._storage is None and t._node is not None:
            stack.append((t._node, False))
    while stack:
        node, expanded = stack.pop()
        nid = id(node)
        if expanded:
            order.append(node)
            continue
        if nid in seen:
            continue
        seen.add(nid)
        if node.inputs is None:
            raise RuntimeError(
                f"this tensor's value can't be computed any more: the graph that produces it ({node.op.name}) was "
                "freed by backward(). Read values before backward, or pass retain_graph=True"
            )
        stack.append((node, True))
        for inp in node.inputs:
            if inp._storage is None and inp._node is not None and id(inp._node) not in seen:
                stack.append((inp._node, False))
    return order


def _run(node):
    from ..tensor import Tensor

    op = node.op
    dev = node.device
    outs = []
    for i, ref in enumerate(node.outputs):
        t = ref()
        if t is None:  # nobody holds this output; the kernel still needs somewhere to write it
            shape, dtype = node.specs[i]
            t = Tensor._lazy(shape, dtype, dev, node, i)
        outs.append(t)
    dev_type = dev.type
    kernel = op.kernels.get(dev_type)
    if kernel is None:
        raise NotImplementedError(f"op {op.name!r} has no {dev_type} kernel yet")
    for t in node.inputs:
        t._storage.check()
    if op.view:
        storage, strides, offset = kernel(node, node.inputs, outs)
        o = outs[0]
        o._storage, o._strides, o._offset = storage, strides, offset
    else:
        arena = _arenas.transient(dev_type)
        for o in outs:
            o._storage = arena.new(o.numel() * o.dtype.itemsize)
        kernel(node, node.inputs, outs)
        if jit._tape is not None:
            jit.note_kernel(kernel, node, node.inputs, outs)
        if autograd_state.anomaly_detection:
            _check_nan(node, outs)
    node.done = True
    if not node.needs_grad:
        # Nothing will differentiate through this node: drop the edges so inputs can be freed now.
        for o in outs:
            o._node = None
        node.inputs = ()


def _check_nan(node, outs):
    import numpy as np

    from ..backends.cpu.kernels import np_view

    for i, o in enumerate(outs):
        if o.dtype.is_floating_point and o.numel() and np.isnan(np_view(o)).any():
            shapes = ", ".join(str(tuple(t.shape)) for t in node.inputs)
            raise RuntimeError(
                f"anomaly detected: op {node.op.name!r} produced NaN in output {i} (shape {tuple(o.shape)}) "
                f"from inputs of shapes {shapes}"
            )


def realize(targets):
    """Compute every tensor in `targets` (and what they need) that has no value yet."""
    for node in schedule(targets):
        _run(node)
    return targets
