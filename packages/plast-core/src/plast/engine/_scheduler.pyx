# cython: boundscheck=True, wraparound=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is engine code, not a kernel.
"""The scheduler's inner loops, compiled: topological order, running nodes and fused groups, and the graph
fingerprint that keys the plan cache. engine/realize.py decides *what* to run (plans, fusion, memory layout);
this module runs it, once per node, so it is Cython over the C-struct nodes and tensors of engine/_graph.
"""

cimport cython
from cpython.ref cimport Py_REFCNT
from cpython.weakref cimport PyWeakref_GetObject
from cpython.ref cimport PyObject

from ._graph cimport Node, TensorBase, add_readers, new_lazy
from ..memory.arena cimport Storage

from .. import _arenas
from . import autograd_state, jit

cdef type _Tensor = None


cdef inline type _tensor_cls():
    global _Tensor
    if _Tensor is None:
        from ._graph import tensor_class

        _Tensor = tensor_class()
    return _Tensor


cdef inline void _check(object st) except *:
    if type(st) is Storage:
        if (<Storage>st).stale():
            st.check()  # raises StaleTensorError with the explanation
    else:
        st.check()


def schedule(targets):
    """Nodes needed to realize `targets`, in topological order (inputs first)."""
    cdef list order = []
    cdef set seen = set()
    cdef list stack = []
    cdef TensorBase t
    cdef Node node
    cdef bint expanded
    for x in targets:
        t = <TensorBase?>x
        if t._storage is None and t._node is not None:
            stack.append((t._node, False))
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        if node.inputs is None:
            raise RuntimeError(
                f"this tensor's value can't be computed any more: the graph that produces it ({node.op.name}) was "
                "freed by backward(). Read values before backward, or pass retain_graph=True"
            )
        stack.append((node, True))
        for x in node.inputs:
            t = <TensorBase>x
            if t._storage is None and t._node is not None and t._node not in seen:
                stack.append((t._node, False))
    return order


cpdef list outputs(Node node):
    """The node's output tensors; one that nobody holds any more is made again (the kernel still writes it)."""
    cdef list outs = []
    cdef Py_ssize_t i = 0
    cdef PyObject *p
    for ref in node.outputs:
        p = PyWeakref_GetObject(ref)
        if p == NULL or <object>p is None:
            shape, dtype = node.specs[i]
            outs.append(new_lazy(_tensor_cls(), shape, dtype, node.device, node, i))
        else:
            outs.append(<object>p)
        i += 1
    return outs


cpdef unallocate(list outs):
    """A kernel raised (bad indices are data, checked as it runs): its outputs hold no value, so a later read
    must run it again (and raise again), never return the uninitialized memory."""
    cdef TensorBase o
    for x in outs:
        o = <TensorBase>x
        o._storage = None
        o._npcache = None


cpdef finish_node(Node node, list outs):
    cdef TensorBase o
    node.done = True
    for x in outs:
        o = <TensorBase>x
        if o._readers is not None:
            # readers recorded while this output had no memory now watch its memory
            if o._storage is not None:
                add_readers(o._storage, o._readers)
            o._readers = None
    if not node.needs_grad:
        # Nothing will differentiate through this node: drop the edges so inputs can be freed now.
        for x in outs:
            (<TensorBase>x)._node = None
        node.inputs = ()


cdef inline Py_ssize_t _nbytes(TensorBase o):
    cdef Py_ssize_t n = 1
    for s in o._shape:
        n *= <Py_ssize_t>s
    return n * <Py_ssize_t>o.dtype.itemsize


cpdef run_node(Node node, dict slots, object check_nan):
    """Run one node's kernel into fresh transient memory (or its planned slot)."""
    op = node.op
    cdef list outs = outputs(node)
    dev_type = node.device.type
    kernel = op.kernels.get(dev_type)
    if kernel is None:
        raise NotImplementedError(f"op {op.name!r} has no {dev_type} kernel yet")
    for x in node.inputs:
        _check((<TensorBase>x)._storage)
    cdef TensorBase o
    cdef Py_ssize_t j = 0
    if op.view:
        storage, strides, offset = kernel(node, node.inputs, outs)
        o = <TensorBase>outs[0]
        o._storage = storage
        o._strides = strides
        o._offset = offset
    else:
        arena = _arenas.transient(dev_type)
        for x in outs:
            o = <TensorBase>x
            st = slots.get((id(node), j)) if slots else None
            o._storage = st if st is not None else arena.new(_nbytes(o))
            j += 1
        try:
            kernel(node, node.inputs, outs)
        except BaseException:
            unallocate(outs)
            raise
        if jit._tape is not None:
            jit.note_kernel(kernel, node, node.inputs, outs)
        if autograd_state.anomaly_detection:
            check_nan(node, outs)
    finish_node(node, outs)


@cython.final
cdef class _GroupKernel:
    """A fused group's kernel with its arguments bound: the ``kernel(node, inputs, outputs)`` a jit tape
    replays."""

    cdef readonly object kernel, args

    def __init__(self, kernel, args):
        self.kernel = kernel
        self.args = args

    def __call__(self, node, inputs, outputs):
        return self.kernel(node, inputs, outputs, self.args)


cpdef run_group(object g, dict slots):
    """Run a fused group: one kernel for its nodes, writing the root's outputs (into fresh transient memory or
    the storage `slots` names for them)."""
    cdef Node root = <Node?>g.nodes[-1]
    cdef list outs = outputs(root)
    arena = _arenas.transient(root.device.type)
    cdef TensorBase o
    cdef Py_ssize_t j = 0
    for x in outs:
        o = <TensorBase>x
        st = slots.get((id(root), j)) if slots else None
        o._storage = st if st is not None else arena.new(_nbytes(o))
        j += 1
    inputs = g.inputs
    for x in inputs:
        _check((<TensorBase>x)._storage)
    kernel, args = g.kernel, g.args
    try:
        kernel(root, inputs, outs, args)
    except BaseException:
        unallocate(outs)
        raise
    if jit._tape is not None:
        jit.note_kernel(_GroupKernel(kernel, args), root, inputs, outs)
    finish_node(root, outs)


def execute(list order, dict groups, object covered, dict slots, object check_nan):
    """Run `order`: nodes not covered by a fused group one by one, each group at its root. Returns the number of
    fused groups and of the nodes they covered."""
    cdef Node node
    cdef Py_ssize_t n_groups = 0, n_fused = 0
    for x in order:
        node = <Node>x
        if covered and id(node) in covered:
            continue
        g = groups.get(id(node)) if groups else None
        if g is None:
            run_node(node, slots, check_nan)
        else:
            run_group(g, slots)
            n_groups += 1
            n_fused += len(g.nodes)
    return n_groups, n_fused


def internal_outputs(list order):
    """(id(node), output index) of every output that fusion may leave unmaterialized: consumed by exactly one
    node of `order`, held by nothing else, and not read by that consumer's backward."""
    cdef dict pos = {}
    cdef Py_ssize_t i = 0
    cdef Node n, p, c
    cdef TensorBase t
    for x in order:
        pos[id(x)] = i
        i += 1
    cdef dict uses = {}
    cdef dict consumer = {}
    for x in order:
        n = <Node>x
        for y in n.inputs:
            t = <TensorBase>y
            if t._node is None or t._storage is not None or id(t._node) not in pos:
                continue
            k = (id(t._node), t._index)
            uses[k] = uses.get(k, 0) + 1
            prev = consumer.get(k)
            consumer[k] = n if prev is None or prev is n else False
    # NOTE: drop the loop variables' references, or the refcount test below would see them.
    t = None
    y = None
    x = None
    cdef set internal = set()
    cdef PyObject *obj
    for k, cv in consumer.items():
        if cv is False:
            continue
        c = <Node>cv
        if c.needs_grad and c.op.saves_inputs:
            continue
        p = <Node>order[pos[k[0]]]
        obj = PyWeakref_GetObject(p.outputs[k[1]])
        if obj == NULL or <object>obj is None:
            continue
        # Every reference to the output must come from the consumer's inputs (the C API's count holds no
        # temporary of ours here: `obj` is borrowed).
        if Py_REFCNT(<object>obj) != <Py_ssize_t>uses[k]:
            continue
        internal.add(k)
    return internal


def fingerprint(list order, set internal):
    """Structural key of a graph: ops, arguments, shapes, dtypes, devices, edges, and which outputs are internal;
    never data."""
    cdef dict pos = {}
    cdef Py_ssize_t i = 0, j, nout
    cdef Node n
    cdef TensorBase t
    for x in order:
        pos[id(x)] = i
        i += 1
    cdef list parts = []
    cdef list ins
    for x in order:
        n = <Node>x
        ins = []
        for y in n.inputs:
            t = <TensorBase>y
            if t._node is not None and t._storage is None and id(t._node) in pos:
                ins.append((pos[id(t._node)], t._index))
            else:
                ins.append((t._shape, t.dtype.code, t._strides))
        nout = len(n.specs)
        if internal:
            flags = tuple([(id(n), j) in internal for j in range(nout)])
        else:
            flags = nout
        dev = n.device
        parts.append(
            (n.op.name, n.args, tuple([(s, d.code) for s, d in n.specs]), dev.type, dev.index, tuple(ins), flags)
        )
    return hash(tuple(parts))
