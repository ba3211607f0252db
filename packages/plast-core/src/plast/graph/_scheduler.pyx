# cython: boundscheck=True, wraparound=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is engine code, not a kernel.
"""The scheduler's inner loops, compiled: topological order, running nodes and fused groups, and the graph
fingerprint that keys the plan cache. graph/realize.py decides *what* to run (plans, fusion, memory layout);
this module runs it, once per node, so it is Cython over the C-struct nodes and tensors of graph/_graph.
"""

cimport cython
from cpython.ref cimport Py_REFCNT
from cpython.weakref cimport PyWeakref_GetObject
from cpython.ref cimport PyObject

from plast.kernels.cpu._fused cimport ChainKernel
from plast.kernels.cpu._kernels cimport binary_run, copy_run
from plast.kernels.cpu._matmul cimport AddmmActKernel, AddmmKernel, MatmulKernel
from plast.kernels.cpu.fastpath cimport SumKernel
from .._core._structs cimport Node, OpDef, TensorBase, nbytes, new_lazy
from .._core.codes cimport PLAST_DT_BOOL
from ._graph cimport add_readers, tensor_class
from ..memory.arena cimport Arena, Storage, check_storage
from ._timing cimport add_time, now_ns, timing_flag

from ..memory import arenas as _arenas
from .._core import grad_mode as autograd_state
from . import tape
from ..kernels.cpu import _kernels, kernels
from . import _timing as _timing_mod
from . import chains, fusion

# _arenas' {device type: (persistent, transient)} (mutated in place, never rebound): read here without a call
cdef dict _ARENAS = _arenas._arenas
cdef int *_timing = timing_flag()  # nonzero while plast.profiler counts kernel time


cdef inline object _transient(object dev_type):
    pair = _ARENAS.get(dev_type)
    if pair is None:
        return _arenas.transient(dev_type)  # made on first use
    return (<tuple>pair)[1]


cdef inline object _alloc(object arena, Py_ssize_t size):
    if type(arena) is Arena:
        return (<Arena>arena).alloc(size)
    return arena.new(size)  # a device arena (memory/cuda.py)


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
            outs.append(new_lazy(tensor_class(), shape, dtype, node.device, node, i))
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


# ---- the common CPU kernels, run through C (no Python call per node): the compiled kernel classes by their `run`
# method, the elementwise kernels by their tensor-level entry points. The op table's entries stay the reference.

cdef object _K_binary = kernels.binary, _K_copy = kernels.copy, _K_view = kernels.view
cdef dict _BIN_CODES = _kernels.BINARY_CODES


cdef inline bint _run_c(object kernel, Node node, object inputs, list outs) except -1:
    """Run `kernel` through C when it is one of the common CPU kernels; False (nothing done) otherwise."""
    cdef type kt = type(kernel)
    if kt is MatmulKernel:
        (<MatmulKernel>kernel).run(node, inputs, outs)
    elif kt is AddmmKernel:
        (<AddmmKernel>kernel).run(node, inputs, outs)
    elif kt is SumKernel:
        (<SumKernel>kernel).run(node, inputs, outs)
    elif kernel is _K_binary and (<TensorBase>outs[0]).dtype.code != PLAST_DT_BOOL:  # bool arithmetic: kernels.bool_binary
        binary_run(_BIN_CODES[node.op.name], <TensorBase>inputs[0], <TensorBase>inputs[1], <TensorBase>outs[0])
    elif kernel is _K_copy:
        return copy_run(<TensorBase>inputs[0], <TensorBase>outs[0]) == 1
    else:
        return False
    return True


cdef inline bint _run_group_c(object kernel, object root, object inputs, list outs, object args) except -1:
    """A fused group's kernel through C (the GEMM with its epilogue, an elementwise chain); False otherwise."""
    cdef type kt = type(kernel)
    if kt is ChainKernel:
        (<ChainKernel>kernel).run(root, inputs, outs, args)
    elif kt is AddmmActKernel:
        (<AddmmActKernel>kernel).run(root, inputs, outs, args)
    else:
        return False
    return True


cpdef run_node(Node node, dict slots, object check_nan):
    """Run one node's kernel into fresh transient memory (or its planned slot)."""
    op = node.op
    cdef list outs = outputs(node)
    dev_type = node.device.type
    cdef bint is_row = type(op) is OpDef
    kernel = ((<OpDef>op).kernels if is_row else op.kernels).get(dev_type)
    if kernel is None:
        raise NotImplementedError(f"op {op.name!r} has no {dev_type} kernel yet")
    for x in node.inputs:
        check_storage((<TensorBase>x)._storage)
    cdef TensorBase o
    cdef Py_ssize_t j = 0, size
    cdef bint empty
    cdef TensorBase src
    cdef unsigned long long t0
    if (<OpDef>op).view if is_row else op.view:
        o = <TensorBase>outs[0]
        if kernel is _K_view:  # kernels.view, inlined: share the input's storage
            src = <TensorBase>node.inputs[0]
            o._storage = src._storage
            o._strides = node.args[-2]
            o._offset = src._offset + <Py_ssize_t>node.args[-1]
        else:
            storage, strides, offset = kernel(node, node.inputs, outs)
            o._storage = storage
            o._strides = strides
            o._offset = offset
    else:
        arena = _transient(dev_type)
        empty = True  # every output holds no element: nothing to compute (its dims may still be huge)
        for x in outs:
            o = <TensorBase>x
            st = slots.get((id(node), j)) if slots else None
            size = nbytes(o)
            empty = empty and size == 0
            o._storage = st if st is not None else _alloc(arena, size)
            j += 1
        t0 = now_ns() if _timing[0] else 0
        try:
            if empty and outs:
                pass
            elif not outs or not _run_c(kernel, node, node.inputs, outs):
                kernel(node, node.inputs, outs)
        except BaseException:
            unallocate(outs)
            raise
        if t0:
            add_time(_timing_mod.node_key(node, outs), t0)
        if tape._tape is not None:
            tape.note_kernel(kernel, node, node.inputs, outs)
        if autograd_state.anomaly_detection:
            check_nan(node, outs)
    finish_node(node, outs)


@cython.final
cdef class _GroupKernel:
    """A fused group's kernel with its arguments bound: the ``kernel(node, inputs, outputs)`` a jit tape
    replays."""

    cdef readonly object kernel, args
    cdef public str label  # the group's op names, joined by "+"

    def __init__(self, kernel, args):
        self.kernel = kernel
        self.args = args
        self.label = None

    def __call__(self, node, inputs, outputs):
        return self.kernel(node, inputs, outputs, self.args)


cpdef run_group(object g, dict slots):
    """Run a fused group: one kernel for its nodes, writing the root's outputs (into fresh transient memory or
    the storage `slots` names for them)."""
    cdef Node root = <Node?>g.nodes[-1]
    cdef list outs = outputs(root)
    arena = _transient(root.device.type)
    cdef TensorBase o
    cdef Py_ssize_t j = 0
    cdef bint empty = True  # as in run_node: no element to compute
    cdef Py_ssize_t size
    cdef unsigned long long t0
    for x in outs:
        o = <TensorBase>x
        st = slots.get((id(root), j)) if slots else None
        size = nbytes(o)
        empty = empty and size == 0
        o._storage = st if st is not None else _alloc(arena, size)
        j += 1
    inputs = g.inputs
    for x in inputs:
        check_storage((<TensorBase>x)._storage)
    kernel, args = g.kernel, g.args
    t0 = now_ns() if _timing[0] else 0
    try:
        if empty and outs:
            pass
        elif not outs or not _run_group_c(kernel, root, inputs, outs, args):
            kernel(root, inputs, outs, args)
    except BaseException:
        unallocate(outs)
        raise
    if t0:
        add_time(_timing_mod.group_key(g.nodes, outs), t0)
    if tape._tape is not None:
        gk = _GroupKernel(kernel, args)
        gk.label = "+".join([n.op.name for n in g.nodes])  # the profiler's row when the tape is replayed
        tape.note_kernel(gk, root, inputs, outs)
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


cdef unsigned long long _epoch = 0


cdef inline unsigned long long _mix(unsigned long long h, unsigned long long v) noexcept:
    # one step of a 64-bit hash over a stream of words (multiply-xorshift)
    h = (h ^ v) * 0x9E3779B97F4A7C15ULL
    return h ^ (h >> 31)


def analyze(list order):
    """What the plan cache needs to know about `order` (topological): the set of (id(node), output index) of
    the outputs fusion may leave unmaterialized, and the graph's structural key.

    An output is *internal* when exactly one node of `order` consumes it, nothing else holds it, and that
    consumer's backward does not read it. The key hashes ops, arguments, shapes, dtypes, devices, edges and the
    internal flags, never data; the plan stores the op sequence too, so a hash collision is caught, not run."""
    global _epoch
    _epoch += 1
    cdef unsigned long long ep = _epoch
    cdef Py_ssize_t i = 0, total = 0, k, j, nout
    cdef Node n, p, c
    cdef TensorBase t
    for x in order:
        n = <Node>x
        n._pos = i
        n._mark = ep
        n._out0 = total
        total += len(n.specs)
        i += 1
    # per output of the graph: how many reads inside it, and by which node (-1 none yet, -2 several)
    cdef list uses = [0] * total
    cdef list consumer = [-1] * total
    cdef Py_ssize_t cur
    for x in order:
        n = <Node>x
        for y in n.inputs:
            t = <TensorBase>y
            if t._node is None or t._storage is not None or (<Node>t._node)._mark != ep:
                continue
            k = (<Node>t._node)._out0 + t._index
            uses[k] += 1
            cur = consumer[k]
            consumer[k] = n._pos if cur == -1 or cur == n._pos else -2
    # NOTE: drop the loop variables' references, or the refcount test below would see them.
    t = None
    y = None
    x = None
    cdef set internal = set()
    cdef bytearray flag = bytearray(total)
    cdef PyObject *obj
    for x in order:
        p = <Node>x
        j = 0
        for ref in p.outputs:
            k = p._out0 + j
            cur = consumer[k]
            j += 1
            if cur < 0:
                continue
            c = <Node>order[cur]
            if c.needs_grad and c.op.saves_inputs:
                continue
            obj = PyWeakref_GetObject(ref)
            if obj == NULL or <object>obj is None:
                continue
            # Every reference to the output must come from the consumer's inputs (the C API's count holds no
            # temporary of ours here: `obj` is borrowed).
            if Py_REFCNT(<object>obj) != <Py_ssize_t>uses[k]:
                continue
            internal.add((id(p), j - 1))
            flag[k] = 1
    x = None
    c = None
    cdef unsigned long long h = <unsigned long long>len(order)
    for x in order:
        n = <Node>x
        h = _mix(h, <unsigned long long><size_t><PyObject *>n.op)
        h = _mix(h, <unsigned long long>hash(n.args))
        for shape, dtype in n.specs:
            h = _mix(h, <unsigned long long>hash(shape))
            h = _mix(h, <unsigned long long>dtype.code)
        dev = n.device
        h = _mix(h, <unsigned long long>hash(dev.type))
        h = _mix(h, <unsigned long long>hash(dev.index))
        for y in n.inputs:
            t = <TensorBase>y
            if t._node is not None and t._storage is None and (<Node>t._node)._mark == ep:
                h = _mix(h, 1)
                h = _mix(h, <unsigned long long>(<Node>t._node)._pos)
                h = _mix(h, <unsigned long long>t._index)
            else:
                h = _mix(h, 2)
                h = _mix(h, <unsigned long long>hash(t._shape))
                h = _mix(h, <unsigned long long>t.dtype.code)
                h = _mix(h, <unsigned long long>hash(t._strides))
        nout = len(n.specs)
        for j in range(nout):
            h = _mix(h, 3 + flag[n._out0 + j])
    return internal, <long long>h


def op_sequence(list order):
    """The ops of `order`, in order: what a cached plan checks a fingerprint match against."""
    return tuple([(<Node>x).op for x in order])


def chain_inputs(list nodes_in_order):
    """The chain's external input tensors in the order compile_chain loads them, and its alias pattern: for every
    external operand read, the index of its tensor in that list (two reads of one tensor share an index)."""
    cdef set member = set()
    for n in nodes_in_order:
        member.add(id(n))
    cdef list ext = [], pattern = []
    cdef dict index = {}
    cdef TensorBase t
    for n in nodes_in_order:
        for y in (<Node>n).inputs:
            t = <TensorBase>y
            if t._node is not None and t._storage is None and id(t._node) in member:
                continue
            k = index.get(id(t))
            if k is None:
                k = index[id(t)] = len(ext)
                ext.append(t)
            pattern.append(k)
    return ext, tuple(pattern)


cdef object _Group = fusion.Group, _chain_rule = chains.RULE, _chain_kernel = chains.kernel
cdef object _compile_chain = chains.compile_chain


CHAIN = 0  # plan entry: (CHAIN, member positions, {alias pattern: program})
RULE = 1  # plan entry: (RULE, rule, covered positions, root position, ((capture, position, input index), ...))


def rebuild_groups(list entries, list order):
    """A cached plan's fused groups bound to this graph's nodes and tensors: ({id(root): Group}, covered ids).

    NOTE: which external inputs of a chain are one tensor (a shared constant, x used twice) is data the
    fingerprint does not see, and the chain's program depends on it: programs are kept per alias pattern."""
    cdef dict groups = {}
    cdef set covered = set()
    cdef list nodes
    for e in entries:
        if e[0] == CHAIN:
            nodes = [order[i] for i in e[1]]
            ext, pattern = chain_inputs(nodes)
            programs = e[2]
            program = programs.get(pattern)
            if program is None:
                program, ext = _compile_chain(nodes)
                programs[pattern] = program
            groups[id(nodes[-1])] = _Group(_chain_rule, nodes, _chain_kernel, ext, (program,))
        else:
            rule = e[1]
            nodes = [order[i] for i in e[2]]
            root = order[e[3]]
            caps = {}
            for name, p, k in e[4]:
                caps[name] = (<Node>order[p]).inputs[k]
            kernel, inputs, args = rule.build(caps, root)
            nodes.append(root)
            groups[id(root)] = _Group(rule, nodes, kernel, inputs, args)
        for n in nodes[:-1]:
            covered.add(id(n))
    return groups, covered


def planned_slots(list order, list spec, object block, object place):
    """{(id(node), output): storage}: the plan's intermediates as slices of `block` (spec: Plan.slots, [(position,
    output, byte offset, bytes)]), plus the storages `place` names."""
    cdef dict out = dict(place) if place else {}
    cdef Storage s, parent
    cdef Py_ssize_t off, size
    if type(block) is not Storage:  # a device block (memory/cuda.py)
        for i, j, off, size in spec:
            out[(id(order[i]), j)] = _arenas.view_of(block, off, size)
        return out
    parent = <Storage>block
    for i, j, off, size in spec:
        if off < 0 or size < 0 or off + size > parent.nbytes:
            raise ValueError(f"planned slot [{off}, {off + size}) is outside a {parent.nbytes}-byte block")
        s = Storage.__new__(Storage)  # memory.arena.view_of, inlined
        s.ptr = parent.ptr + off
        s.nbytes = size
        s.block_bytes = 0
        s.arena = None
        s.owner = parent
        out[(id(order[i]), j)] = s
    return out
