# cython: boundscheck=True, wraparound=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is engine code, not a kernel.
"""The backward pass's loops, compiled (DESIGN §2.6): the differentiable subgraph in reverse topological order,
gradient delivery (cast, sum back to the input's shape, accumulate), hooks, and the realize of what is left.
autograd/api.py is the public face (backward, grad, grad modes); the rules themselves are plast ops.
"""

from cpython.ref cimport PyObject, Py_REFCNT
from cpython.weakref cimport PyWeakref_GetObject

import weakref

from .._core._structs cimport Node, TensorBase, nbytes, new_lazy, shape_numel
from .._core.codes cimport PLAST_DT_F32, PLAST_DT_F64
from ..memory.arena cimport Storage
from ..memory import arenas as _arenas
from ..graph.realize import realize
from ..graph.tape import note_state, tracing
from ..ops.elementwise import add
from ..ops.movement import cast
from ..ops.reduce import sum_to_shape
from .._core.errors import ShapeError
from ..ops.creation import ones_like


def root_ones(r):
    """The implicit root gradient of `r` (autograd/backward_replay.py passes it explicitly to see it)."""
    return _ones(<TensorBase?>r)


cdef object _ones(TensorBase r):
    """The implicit root gradient: ones shaped like `r`, a fresh persistent leaf (filled here for float CPU
    tensors; creation.ones_like otherwise)."""
    cdef int code = r.dtype.code
    if r.device.type != "cpu" or (code != PLAST_DT_F32 and code != PLAST_DT_F64):
        return ones_like(r)
    cdef Py_ssize_t n = shape_numel(r._shape), i
    cdef Storage st = <Storage>_arenas.persistent("cpu").new(nbytes(r))
    cdef TensorBase g = new_lazy(type(r), r._shape, r.dtype, r.device, None, 0)
    g._storage = st
    if code == PLAST_DT_F32:
        for i in range(n):
            (<float *>st.ptr)[i] = 1.0
    else:
        for i in range(n):
            (<double *>st.ptr)[i] = 1.0
    return g


cdef inline Node _producer(TensorBase t):
    n = t._node
    if n is not None and (<Node>n).needs_grad and t.requires_grad:
        return <Node>n
    return None


def topo(list roots):
    """Nodes reachable from `roots` through differentiable edges, outputs before inputs."""
    cdef list order = []
    cdef set seen = set()
    cdef list stack = [(n, False) for n in roots]
    cdef Node node, p
    cdef TensorBase t
    cdef bint done
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        if node.inputs is None:
            raise RuntimeError(
                "trying to backward through the graph a second time (or to reach tensors whose saved values "
                "were freed after the first backward); pass retain_graph=True to the first backward"
            )
        stack.append((node, True))
        for x in node.inputs:
            t = <TensorBase>x
            if not t.requires_grad:
                continue
            p = _producer(t)
            if p is not None and p not in seen:
                stack.append((p, False))
    order.reverse()
    return order


cdef check_versions(Node node):
    cdef tuple inputs = node.inputs if type(node.inputs) is tuple else tuple(node.inputs)
    cdef tuple versions = node.versions if type(node.versions) is tuple else tuple(node.versions)
    cdef Py_ssize_t i
    cdef TensorBase t
    for i in range(len(inputs)):
        t = <TensorBase?>inputs[i]
        st = t._storage
        if st is None:
            continue
        v = (<Storage>st).version if type(st) is Storage else st.version
        if v != versions[i]:
            _version_error(node, i, t)


cdef _version_error(Node node, Py_ssize_t i, TensorBase t):
    raise RuntimeError(
        f"one of the tensors needed for gradient computation has been modified by an in-place operation: "
        f"input {i} of {node.op.name} (shape {tuple(t.shape)}, {t.dtype}) is at version "
        f"{t._storage.version}, but backward expected version {node.versions[i]}. Make the in-place change on a "
        f".clone(), or make it after backward()"
    )


cdef object _run_hooks(TensorBase t, object g):
    """t's tensor hooks (``register_hook``) on the gradient `g` arriving at t, in registration order: a returned
    tensor replaces it, and must keep its size, dtype and device (torch's checks and words)."""
    cdef TensorBase r, before
    for h in list(t._hooks):
        res = h(g)
        if res is None:
            continue
        if not isinstance(res, TensorBase):
            raise TypeError(f"expected Tensor, but hook returned '{type(res).__name__}'")
        r, before = <TensorBase>res, <TensorBase>g
        name = getattr(h, "__name__", type(h).__name__)
        if r._shape != before._shape:
            raise RuntimeError(f"hook '{name}' has changed the size of value")
        if r.dtype is not before.dtype:
            raise RuntimeError(f"hook '{name}' has changed the type of value (was {before.dtype} got {r.dtype})")
        if r.device != before.device:
            raise RuntimeError(
                f"hook '{name}' has changed the device of value (was {before.device} got {r.device})"
            )
        g = res
    return g


def _hook_key(ref):
    def key():
        t = ref()
        return tuple(map(id, t._hooks)) if t is not None and t._hooks else ()

    return key


cdef class _Pass:
    """One backward pass's gradient bookkeeping."""

    cdef dict slots        # (id(node), index) -> gradient flowing into that output
    cdef dict leaf_grads   # id(tensor) -> [tensor, gradient]
    cdef dict want         # id(tensor) -> tensor, or None: the tensors whose gradients are returned

    def __init__(self, want):
        self.slots = {}
        self.leaf_grads = {}
        self.want = None if want is None else {id(t): t for t in want}

    cdef deliver(self, TensorBase t, object g):
        if g is None:
            return
        if g.dtype is not t.dtype:
            g = cast(g, t.dtype)
        if g.shape != t._shape:
            g = sum_to_shape(g, t._shape)
        cdef Node p = _producer(t)
        if p is not None and (self.want is None or id(t) not in self.want):
            key = (id(p), t._index)
            prev = self.slots.get(key)
            self.slots[key] = g if prev is None else add(prev, g)
            if t._retains_grad:
                self.leaf_grads.setdefault(id(t), [t, None])
            return
        if self.want is not None and id(t) not in self.want:
            return
        entry = self.leaf_grads.get(id(t))
        if entry is None:
            self.leaf_grads[id(t)] = [t, g]
        else:
            entry[1] = g if entry[1] is None else add(entry[1], g)


def run_backward(list roots, list grad_roots, want=None, list checked=None):
    """Propagate gradients from `roots` (grad mode already set by the caller). Returns ({id(tensor): [tensor,
    grad]} for leaves or for the `want` tensors, the nodes visited). `checked`, when given, collects the nodes
    whose saved inputs' versions were checked (autograd/backward_replay.py checks them again on a replay)."""
    cdef _Pass ps = _Pass(want)
    cdef list root_nodes = []
    cdef TensorBase r, t
    cdef Node node, p
    for x, g in zip(roots, grad_roots):
        r = <TensorBase?>x
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
            g = _ones(r)
        elif tuple(g.shape) != tuple(r.shape):
            raise ShapeError(f"backward: gradient has shape {tuple(g.shape)}, the output has {tuple(r.shape)}")
        p = _producer(r)
        if p is not None:
            root_nodes.append(p)
        ps.deliver(r, g)
    cdef list order = topo(root_nodes)
    cdef dict by_output = {}
    cdef list gs
    cdef Py_ssize_t i, n_out
    cdef PyObject *obj
    cdef bint any_grad
    for x in order:
        node = <Node>x
        n_out = len(node.specs)
        gs = [ps.slots.pop((id(node), i), None) for i in range(n_out)]
        # hooks and retain_grad on non-leaf outputs see their complete gradient here
        any_grad = False
        i = 0
        for ref in node.outputs:
            if gs[i] is not None:
                any_grad = True
                obj = PyWeakref_GetObject(ref)
                if obj != NULL and <object>obj is not None:
                    t = <TensorBase>obj
                    if t._hooks:
                        gs[i] = _run_hooks(t, gs[i])
                    if t._retains_grad and id(t) in ps.leaf_grads:
                        ps.leaf_grads[id(t)][1] = gs[i]
                    by_output[id(t)] = gs[i]
            i += 1
        if not any_grad:
            continue
        if node.versions is not None:
            check_versions(node)
            if checked is not None:
                checked.append(node)
        if n_out == 1:
            in_grads = node.op.backward(node, gs[0])
        else:
            in_grads = node.op.backward(node, *gs)
        if len(in_grads) != len(node.inputs):
            raise AssertionError(
                f"backward of {node.op.name} returned {len(in_grads)} grads for {len(node.inputs)} inputs"
            )
        for y, g in zip(node.inputs, in_grads):
            t = <TensorBase>y
            if g is not None and t.requires_grad:
                ps.deliver(t, g)
    # A leaf's hooks (and those of a non-leaf whose gradient is returned, not propagated) see the sum of what
    # reached it in this pass, before it is accumulated into .grad, as torch's AccumulateGrad pre-hooks do.
    # (A retained non-leaf's entry already holds its hooked gradient, from the loop above.)
    cdef bint traced = tracing()
    for entry in ps.leaf_grads.values():
        t = <TensorBase>entry[0]
        if entry[1] is None or not (_producer(t) is None or (ps.want is not None and id(t) in ps.want)):
            continue
        if traced:
            # a @plast.jit plan replays the hooks' kernels as traced: one registered or removed later traces again
            note_state(t, _hook_key(weakref.ref(t)))
        if t._hooks:
            entry[1] = _run_hooks(t, entry[1])
    t = None
    if ps.want is not None:
        for tid in ps.want:
            if tid in by_output and tid not in ps.leaf_grads:
                ps.leaf_grads[tid] = [ps.want[tid], by_output[tid]]
    return ps.leaf_grads, order


def finish(list order, list grads, retain_graph, create_graph, place=None):
    """Realize the gradients (into the memory `place` names for some of them, see place_gradients) together with
    every forward value that someone outside the graph still holds (fusion may leave intermediates
    unmaterialized, and a loss nobody's backward reads is not computed on the way), then (unless the graph is
    retained) free the graph's saved tensors."""
    if retain_graph is None:
        retain_graph = create_graph
    cdef dict occ = {}
    cdef Node node
    for x in order:
        node = <Node>x
        if node.inputs:
            for y in node.inputs:
                occ[id(y)] = occ.get(id(y), 0) + 1
    y = None
    cdef list held = []
    cdef PyObject *obj
    for x in order:
        node = <Node>x
        for ref in node.outputs:
            obj = PyWeakref_GetObject(ref)
            if obj == NULL or <object>obj is None or (<TensorBase>obj)._storage is not None:
                continue
            # `obj` is borrowed: every reference counted here is someone else's; graph edges are expected.
            if Py_REFCNT(<object>obj) > <Py_ssize_t>occ.get(id(<object>obj), 0):
                held.append(<object>obj)
    if not create_graph:
        held.extend(grads)
    realize(held, place)
    if not retain_graph:
        for x in order:
            (<Node>x).inputs = None


cdef TensorBase _placeable(TensorBase g):
    """The op output whose memory `g` will be: g itself, or the output g is a view of when the view has the same
    bytes in row-major order (a Linear weight's gradient arrives through a transpose's backward, a bias gradient
    through a reshape); None otherwise."""
    if g._storage is not None or g._node is None:
        return None
    cdef Node n = <Node>g._node
    if n.done:
        return None
    if not n.op.view:
        return g
    if g._offset != 0 or not g.is_contiguous():
        return None
    cdef TensorBase base = g
    while n.op.view:
        base = <TensorBase>n.inputs[0]
        if base._storage is not None or base._node is None:
            return None
        n = <Node>base._node
        if n.done:
            return None
    if base._offset != 0 or nbytes(base) != nbytes(g):
        return None
    return base


def place_gradients(list grads):
    """Persistent memory for the gradients in `grads` that the coming realize will compute, so their kernels
    write them where ``.grad`` keeps them and no copy follows. Returns ({(id(node), output): storage}, the key of
    each gradient or None). A gradient qualifies when it is a plain op's output, or a row-major view of one's
    whole output, and no earlier gradient took that memory; the others are copied after the realize
    (persistent_copy)."""
    cdef dict place = {}
    cdef list keys = []
    cdef TensorBase g, base
    for x in grads:
        g = <TensorBase>x
        base = _placeable(g)
        key = (id(base._node), base._index) if base is not None else None
        if key is None or key in place:
            keys.append(None)
            continue
        place[key] = _arenas.persistent(g.device.type).new(nbytes(g))
        keys.append(key)
    return place, keys
