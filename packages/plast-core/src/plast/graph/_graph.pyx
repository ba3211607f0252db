# cython: boundscheck=True, wraparound=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is engine code, not a kernel.
"""Graph nodes and op recording, compiled (DESIGN §2).

``record`` is what every op call ends in: it makes the node, the lazy output tensors and the reader edges. It
runs once per op call, so it is Cython over C-struct objects (``TensorBase`` holds a tensor's fields; the Python
``plast.Tensor`` subclasses it and adds the methods).

Outputs are held weakly by their node: a node is kept alive by the tensors it produced, never the other way
round, so a graph nobody can reach is freed by reference counting alone.
"""

cimport cython
from cpython.object cimport PyTypeObject
from cpython.weakref cimport PyWeakref_NewRef, PyWeakref_GetObject
from cpython.ref cimport PyObject

from .._core import grad_mode as autograd_state
from .._core.devices import CPU
from ..memory.arena cimport Storage
from .._core._state cimport flag

cdef dict _AG = autograd_state.__dict__

# plast.Tensor and plast.Size: Python classes defined in tensor.py, which binds them here when it is imported.
cdef type _Tensor = None
cdef type _Size = tuple


def bind(tensor_cls, size_cls):
    global _Tensor, _Size
    _Tensor = tensor_cls
    _Size = size_cls


def tensor_class():
    return _Tensor


def fusion_enabled():
    """The fusion rules are on (PLAST_FUSION is not "0"); read on every realize."""
    return not env_zero(b"PLAST_FUSION")


def plan_cache_enabled():
    """The scheduler's plan cache (and eager backward replays) are on (PLAST_PLAN_CACHE is not "0")."""
    return not env_zero(b"PLAST_PLAN_CACHE")


@cython.auto_pickle(False)
cdef class TensorBase:
    """A tensor's fields and its most-read metadata. Other methods live on plast.Tensor (tensor.py and the op
    modules)."""

    @property
    def shape(self):
        if self._size_of is not self._shape:
            self._size = _Size(self._shape)
            self._size_of = self._shape
        return self._size

    @property
    def ndim(self):
        return len(self._shape)

    def dim(self):
        return len(self._shape)

    def numel(self):
        cdef Py_ssize_t n = 1
        for s in self._shape:
            n *= <Py_ssize_t>s
        return n

    cpdef bint is_contiguous(self):
        """Row-major with no gaps (size-1 dims may have any stride), as torch defines it."""
        shape, strides = self._shape, self._strides
        cdef Py_ssize_t expected = 1, i, d
        for i in range(len(shape) - 1, -1, -1):
            d = shape[i]
            if d != 1 and <Py_ssize_t>strides[i] != expected:
                return False
            expected *= d
        return True

    @classmethod
    def _lazy(cls, shape, dtype, device, node, index=0):
        return new_lazy(cls, shape, dtype, device, node, index)

    @classmethod
    def _from_storage(cls, storage, shape, dtype, device=None, strides=None, offset=0):
        cdef TensorBase t
        if device is None:
            device = CPU
        t = new_lazy(cls, shape, dtype, device, None, 0)
        t._storage = storage
        if strides is not None:
            t._strides = tuple(strides)
        t._offset = offset
        return t


@cython.auto_pickle(False)
@cython.final
cdef class OpDef:
    """One row of the op table (ops/registry.py documents the fields): a C struct, because recording,
    scheduling and backward read its fields for every node."""

    def __init__(
        self, name, kernels=None, backward=None, fusible=False, view=False, n_outputs=1, saves_inputs=True
    ):
        self.name = name
        self.kernels = dict(kernels or {})
        self.backward = backward
        self.fusible = fusible
        self.view = view
        self.n_outputs = n_outputs
        self.saves_inputs = saves_inputs
        self.window_kernels = {}

    def __repr__(self):
        devs = ",".join(sorted(self.kernels))
        return f"<op {self.name} [{devs}]{' view' if self.view else ''}{' fusible' if self.fusible else ''}>"


@cython.auto_pickle(False)
@cython.final
cdef class Node:
    """One op application: the op row, its input tensors, its (hashable) arguments and its outputs."""

    def __init__(self, op, inputs, args, specs, device=None):
        self.op = op
        self.inputs = inputs
        self.args = args
        self.specs = specs
        self.device = device

    def __repr__(self):
        return f"<Node {self.op.name} args={self.args!r}>"


cdef tuple contiguous_strides(tuple shape):
    cdef Py_ssize_t n = len(shape), i, acc = 1
    if n == 0:
        return ()
    cdef list out = [0] * n
    for i in range(n - 1, -1, -1):
        out[i] = acc
        acc *= max(<Py_ssize_t>shape[i], 1)
    return tuple(out)


cdef tuple _NO_ARGS = ()


cdef inline TensorBase _alloc(type cls):
    """``TensorBase.__new__(cls)`` without the Python-level call Cython makes of it for a `cls` it can't see at
    compile time (~800 instructions, for every tensor an op records): TensorBase's own tp_new, on `cls`, which is
    what ``TensorBase.__new__`` runs (so a subclass's Python ``__new__``, Parameter's, is not called either)."""
    if cls is not _Tensor and not issubclass(cls, TensorBase):
        raise TypeError(f"{cls.__name__} is not a subtype of TensorBase")
    return <TensorBase>(<PyTypeObject *>TensorBase).tp_new(cls, <PyObject *>_NO_ARGS, NULL)


cdef TensorBase new_lazy(type cls, object shape, object dtype, object device, object node, Py_ssize_t index):
    cdef TensorBase t = _alloc(cls)
    if type(shape) is not tuple:
        shape = tuple(shape)
    t._shape = shape
    t._strides = contiguous_strides(<tuple>shape)
    if dtype is None:  # compiled code reads dtype fields unchecked (TensorBase.dtype is typed)
        raise TypeError("a tensor needs a dtype, got None")
    t.dtype = dtype
    t.device = device
    t._node = node
    t._index = index
    return t


cdef inline bint _live(object r):
    """A reader entry still matters: its node exists and either has not run or will read its inputs again in
    backward."""
    cdef PyObject *p = PyWeakref_GetObject(r)
    if p == NULL or <object>p is None:
        return False
    cdef Node n = <Node>p
    return not n.done or (n.needs_grad and bool(n.inputs))


cpdef add_readers(object holder, object refs):
    """Append reader refs to a Storage's or a Tensor's reader list (pruning it when it grows)."""
    cdef bint is_tensor = isinstance(holder, TensorBase)
    cdef object rd = (<TensorBase>holder)._readers if is_tensor else holder.readers
    cdef Py_ssize_t n
    if rd is None:
        rd = list(refs)
    else:
        n = len(rd)
        if n >= 64 and n & (n - 1) == 0:  # prune at powers of two: amortized O(1) per append
            rd = [r for r in rd if _live(r)]
        rd.extend(refs)
    if is_tensor:
        (<TensorBase>holder)._readers = rd
    else:
        holder.readers = rd


cdef inline void _note_reader(object ref, TensorBase t) except *:
    # On the input's memory when it has some, else on the tensor (moved to its memory when it is computed). An
    # in-place write first computes the pending readers, and an in-place rebinding points them at the old value
    # (graph/inplace.py), so a recorded op never sees a later value.
    cdef object st = t._storage
    cdef object holder = st if st is not None else t
    cdef list rd
    if type(st) is Storage:
        rd = (<Storage>st).readers
        if rd is not None and len(rd) < 64:
            rd.append(ref)
            return
    elif st is None and t._readers is not None and len(t._readers) < 64:
        t._readers.append(ref)
        return
    add_readers(holder, (ref,))


cdef unsigned long long _n_recorded = 0


def recorded_count():
    """How many nodes ``record`` has made in this process (bench/: graph nodes per training step)."""
    return _n_recorded


cpdef list record(object op, object inputs, object args, object specs, object device):
    """Record `op` applied to `inputs` (a tuple of tensors); return its output tensors (unrealized)."""
    global _n_recorded
    _n_recorded += 1
    cdef Node node = Node.__new__(Node)
    node.op = op
    node.inputs = inputs
    node.args = args
    node.specs = specs
    node.device = device
    cdef list outs = []
    cdef list refs = []
    cdef Py_ssize_t i = 0
    cdef TensorBase o, t
    cdef OpDef row = op if type(op) is OpDef else None
    cdef bint view = row.view if row is not None else op.view
    for shape, dtype in specs:
        if view:  # strides and offset are set below from the arguments: skip the contiguous ones
            o = _alloc(_Tensor)
            o._shape = shape if type(shape) is tuple else tuple(shape)
            if dtype is None:
                raise TypeError(f"{op.name}: an output needs a dtype, got None")
            o.dtype = dtype
            o.device = device
            o._node = node
            o._index = i
        else:
            o = new_lazy(_Tensor, shape, dtype, device, node, i)
        outs.append(o)
        refs.append(PyWeakref_NewRef(o, None))
        i += 1
    node.outputs = refs
    ref = PyWeakref_NewRef(node, None)
    for x in inputs:
        _note_reader(ref, <TensorBase?>x)
    if flag(_AG, "grad_enabled") and (row.backward if row is not None else op.backward) is not None:
        for x in inputs:
            t = <TensorBase>x
            if t.requires_grad:
                node.needs_grad = True
                for o in outs:
                    if o.dtype.is_floating_point:
                        o.requires_grad = True
                if row.saves_inputs if row is not None else op.saves_inputs:
                    versions = []
                    for y in inputs:
                        st = (<TensorBase>y)._storage
                        versions.append(0 if st is None else st.version)
                    node.versions = tuple(versions)
                break
    if view:
        # A view's layout is known now (args end with strides, offset), so ops recorded on it before it is
        # realized see its real strides.
        o = outs[0]
        t = <TensorBase>inputs[0]
        o._strides = args[-2]
        o._offset = t._offset + <Py_ssize_t>args[-1]
        src = t._storage
        if src is not None:
            # A view of a realized tensor costs nothing to realize: share the storage now, so in-place writes
            # through the view reach the base tensor's memory (as in torch).
            src.check()
            o._storage = src
            if not node.needs_grad:
                o._node = None
                node.inputs = ()
    return outs
