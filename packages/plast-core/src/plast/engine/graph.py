"""Graph nodes: what an op call records (DESIGN §2)."""

import weakref

from . import autograd_state


class Node:
    """One op application: the op row, its input tensors, its (hashable) arguments and its outputs.

    Outputs are held weakly: a node is kept alive by the tensors it produced, never the other way round, so a
    graph nobody can reach is freed by reference counting alone.
    """

    __slots__ = (
        "op",
        "inputs",
        "args",
        "specs",
        "outputs",
        "needs_grad",
        "versions",
        "done",
        "device",
        "__weakref__",
    )

    def __init__(self, op, inputs, args, specs, device=None):
        self.op = op
        self.device = device
        self.inputs = inputs
        self.args = args
        self.specs = specs  # [(shape, dtype)] per output
        self.outputs = None
        self.needs_grad = False
        self.versions = (
            None  # storage versions of the inputs when recorded (set when backward will need them)
        )
        self.done = False  # computed

    def __repr__(self):
        return f"<Node {self.op.name} args={self.args!r}>"


def _live(r):
    """A reader entry still matters: its node exists and either has not run or will read its inputs again in
    backward."""
    n = r()
    return n is not None and (not n.done or (n.needs_grad and n.inputs))


def add_readers(holder, refs):
    """Append reader refs to a Storage's or a Tensor's `readers` list (pruning it when it grows)."""
    rd = holder.readers if hasattr(holder, "version") else holder._readers
    if rd is None:
        rd = list(refs)
    else:
        n = len(rd)
        if n >= 64 and n & (n - 1) == 0:  # prune at powers of two: amortized O(1) per append
            rd = [r for r in rd if _live(r)]
        rd.extend(refs)
    if hasattr(holder, "version"):
        holder.readers = rd
    else:
        holder._readers = rd


def _note_readers(node, inputs):
    """Remember that `node` reads each input: on the input's memory when it has some, else on the tensor (moved
    to its memory when it is computed). An in-place write first computes the pending readers, and an in-place
    rebinding points them at the old value (engine/inplace.py), so a recorded op never sees a later value."""
    ref = weakref.ref(node)
    for t in inputs:
        st = t._storage
        add_readers(st if st is not None else t, (ref,))


def record(op, inputs, args, specs, device):
    """Record `op` applied to `inputs`; return its output tensors (unrealized)."""
    from ..tensor import Tensor

    node = Node(op, inputs, args, specs, device)
    outs = [Tensor._lazy(shape, dtype, device, node, i) for i, (shape, dtype) in enumerate(specs)]
    node.outputs = [weakref.ref(o) for o in outs]
    _note_readers(node, inputs)
    if autograd_state.grad_enabled and op.backward is not None:
        for t in inputs:
            if t.requires_grad:
                node.needs_grad = True
                for o in outs:
                    if o.dtype.is_floating_point:
                        o.requires_grad = True
                if op.saves_inputs:
                    node.versions = tuple(0 if i._storage is None else i._storage.version for i in inputs)
                break
    if op.view:
        # A view's layout is known now (args end with strides, offset), so ops recorded on it before it is
        # realized see its real strides.
        o = outs[0]
        o._strides = args[-2]
        o._offset = inputs[0]._offset + args[-1]
        src = inputs[0]._storage
        if src is not None:
            # A view of a realized tensor costs nothing to realize: share the storage now, so in-place writes
            # through the view reach the base tensor's memory (as in torch).
            src.check()
            o._storage = src
            if not node.needs_grad:
                o._node = None
                node.inputs = ()
    return outs
