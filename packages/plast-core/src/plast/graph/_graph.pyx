# cython: boundscheck=True, wraparound=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is engine code, not a kernel.
"""Graph nodes and op recording, compiled (DESIGN §2).

``record`` is what every op call ends in: it makes the node, the lazy output tensors and the reader edges. It
runs once per op call, so it is Cython over the C structs of _core/_structs.pyx (TensorBase, Node, OpDef).

Outputs are held weakly by their node: a node is kept alive by the tensors it produced, never the other way
round, so a graph nobody can reach is freed by reference counting alone.
"""

from cpython.weakref cimport PyWeakref_NewRef, PyWeakref_GetObject
from cpython.ref cimport PyObject

from .._core import grad_mode as autograd_state
from .._core import dtypes as _dtypes
from .._core._dtype cimport dtype as DType
from .._core.codes cimport PLAST_DT_BF16
from .._core._structs cimport Node, OpDef, TensorBase, alloc_tensor, env_zero, new_lazy, shape_numel
from ..memory.arena cimport Storage
from .._core._state cimport grad_on
from ..kernels.cpu import kernels as _cpu_kernels

cdef dict _AG = autograd_state.__dict__
cdef unsigned long _AG_OWNER = autograd_state._owner

# plast.Tensor: the Python class defined in _tensor.py, which binds it here when it is imported (the class of
# every tensor record() makes).
cdef type _Tensor = None


def bind(tensor_cls):
    global _Tensor
    _Tensor = tensor_cls


cpdef type tensor_class():
    """plast.Tensor (the class bound above)."""
    return _Tensor


def fusion_enabled():
    """The fusion rules are on (PLAST_FUSION is not "0"); read on every realize."""
    return not env_zero(b"PLAST_FUSION")


def plan_cache_enabled():
    """The scheduler's plan cache (and eager backward replays) are on (PLAST_PLAN_CACHE is not "0")."""
    return not env_zero(b"PLAST_PLAN_CACHE")


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


cdef extern from "Python.h":
    # on a borrowed PyObject *: Cython's Py_REFCNT(obj.attr) counts the reference of its own temporary too
    Py_ssize_t _refcount "Py_REFCNT"(PyObject *o) noexcept


cdef inline bint _numpy_shared(Storage st):
    """numpy arrays the user holds can write this memory: exported ones (.numpy()), or the array from_numpy
    borrowed while anything besides this storage references it (the caller's name, a view's base)."""
    return st.numpy_refs != 0 or (st.numpy_owner and _refcount(<PyObject *>st.owner) > 1)


cdef inline int _note_reader(object ref, TensorBase t) except -1:
    # On the input's memory when it has some, else on the tensor (moved to its memory when it is computed). An
    # in-place write first computes the pending readers, and an in-place rebinding points them at the old value
    # (graph/inplace.py), so a recorded op never sees a later value. Returns 1 when the memory is shared with
    # numpy, whose writes no reader list sees: record() then computes the node at once.
    cdef object st = t._storage
    cdef object holder = st if st is not None else t
    cdef list rd
    if type(st) is Storage:
        rd = (<Storage>st).readers
        if rd is not None and len(rd) < 64:
            rd.append(ref)
            return _numpy_shared(<Storage>st)
        add_readers(holder, (ref,))
        return _numpy_shared(<Storage>st)
    elif st is None and t._readers is not None and len(t._readers) < 64:
        t._readers.append(ref)
        return 0
    add_readers(holder, (ref,))
    return 0


# ---- 16-bit storage types ------------------------------------------------------------------------------------
# bfloat16 and float16 are storage types. A row whose kernels take them says so (OpDef.half: casts, copies,
# views, the 16-bit GEMM); any other row computes in float32: record() widens its 16-bit inputs, records the row
# in float32, and rounds each output that should be 16-bit once, to nearest even, as torch's CPU kernels do.
# Autograd passes through the conversions (a conversion's backward converts the gradient back), so a bfloat16
# leaf gets a bfloat16 gradient, as in torch. The conversions are ordinary nodes: the scheduler, the jit tape
# and the plan cache see them like any other op.

# The small integer types (uint8, int8, int16) are storage types the same way: casts, copies and views take
# them; any other row computes in int32, and each output that should be small is cast back, wrapping around as
# torch's uint8/int8/int16 arithmetic does (two's complement: the low bits of the int32 result).

cdef DType _F32 = _dtypes.float32
cdef DType _I32 = _dtypes.int32


cdef inline bint _is16(object d):
    # (not a DType, None included: not 16-bit; new_lazy and the typed dtype field refuse it with a TypeError)
    return type(d) is DType and (<DType>d).itemsize == 2 and (<DType>d).is_floating_point


cdef inline bint _narrow(object d):
    """d is a storage type some rows compute in a wider one: bfloat16, float16, uint8, int8, int16 (the codes
    after float64: one compare on record()'s path)."""
    return type(d) is DType and (<DType>d).code >= PLAST_DT_BF16


cdef inline object _wide_of(OpDef row, object d):
    """The dtype `row` computes a `d` value in: d itself, or the wider type record() converts it to."""
    if not _narrow(d):
        return d
    if (<DType>d).is_floating_point:
        return d if row.half else _F32
    # small integers: only the rows that move bytes take them (a cast, a copy, a view)
    return d if row.view or row is CAST or row.name == "copy" else _I32


def _cast_bw(node, g):
    return (convert(g, (<TensorBase>node.inputs[0]).dtype),)


# The op table's ``cast`` row (ops/movement.py adopts it): the recorder inserts it, so it is built here, below
# the op layer. Its CPU kernel copies same-dtype tensors in C and casts through numpy (ml_dtypes for bfloat16:
# round to nearest even).
CAST = OpDef("cast", {"cpu": _cpu_kernels.copy}, _cast_bw, None, False, 1, False, False, True)


cpdef object convert(object x, object dtype):
    """x as `dtype` through the ``cast`` row (x itself when it has that dtype)."""
    cdef TensorBase t = <TensorBase?>x
    if t.dtype is dtype:
        return x
    _dtypes.check_16bit_device(dtype, t.device, "cast")
    return record(CAST, (t,), ((<DType?>dtype).code,), [(t._shape, dtype)], t.device)[0]


cdef list _record_widened(OpDef row, object inputs, object args, object specs, object device):
    wide = tuple([convert(x, _wide_of(row, (<TensorBase>x).dtype)) for x in inputs])
    wide_specs = [(shape, _wide_of(row, dt)) for shape, dt in specs]
    outs = record(row, wide, args, wide_specs, device)
    return [convert(o, spec[1]) for o, spec in zip(outs, specs)]


cdef bint _needs_widening(OpDef row, tuple ins, list sp) except -1:
    cdef Py_ssize_t i
    for x in ins:
        d = (<TensorBase?>x).dtype
        if _narrow(d) and _wide_of(row, d) is not d:
            return True
    for i in range(len(sp)):
        d = (<tuple?>sp[i])[1]
        if _narrow(d) and _wide_of(row, d) is not d:
            return True
    return False


cdef unsigned long long _n_recorded = 0


def recorded_count():
    """How many nodes ``record`` has made in this process (bench/: graph nodes per training step)."""
    return _n_recorded


cpdef list record(object op, object inputs, object args, object specs, object device):
    """Record `op` applied to `inputs` (a tuple of tensors); return its output tensors (unrealized)."""
    global _n_recorded
    # NOTE: typed locals (a tuple of inputs, a list of (shape, dtype) tuples): the loops below compile to
    # indexing, not to generic iteration with its fallbacks; record() runs for every op call
    cdef tuple ins = inputs if type(inputs) is tuple else tuple(inputs)
    cdef list sp = specs if type(specs) is list else list(specs)
    cdef OpDef row = op if type(op) is OpDef else None
    cdef Py_ssize_t i, n_out = len(sp)
    cdef tuple spec
    if row is not None and not row.view:  # (a view takes every dtype)
        for x in ins:
            if _narrow((<TensorBase?>x).dtype) and _needs_widening(row, ins, sp):
                return _record_widened(row, ins, args, sp, device)
        for i in range(n_out):
            if _narrow((<tuple?>sp[i])[1]) and _needs_widening(row, ins, sp):
                return _record_widened(row, ins, args, sp, device)
    _n_recorded += 1
    cdef Node node = Node.__new__(Node)
    node.op = op
    node.inputs = ins
    node.args = args
    node.specs = sp
    node.device = device
    cdef list outs = []
    cdef list refs = []
    cdef TensorBase o, t
    cdef bint view = row.view if row is not None else op.view
    for i in range(n_out):
        spec = <tuple?>sp[i]
        shape, dtype = spec[0], spec[1]
        if view:  # strides and offset are set below from the arguments: skip the contiguous ones
            o = alloc_tensor(_Tensor)
            o._shape = shape if type(shape) is tuple else tuple(shape)
            shape_numel(o._shape)  # a view needs no memory, but its element count must fit in an int64 (torch)
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
    node.outputs = refs
    ref = PyWeakref_NewRef(node, None)
    cdef int shared = 0
    for x in ins:
        shared |= _note_reader(ref, <TensorBase?>x)
    if grad_on(_AG, _AG_OWNER) and (row.backward if row is not None else op.backward) is not None:
        for x in ins:
            t = <TensorBase>x
            if t.requires_grad:
                node.needs_grad = True
                for o in outs:
                    if o.dtype.is_floating_point:
                        o.requires_grad = True
                if row.saves_inputs if row is not None else op.saves_inputs:
                    versions = []
                    for y in ins:
                        st = (<TensorBase>y)._storage
                        versions.append(0 if st is None else st.version)
                    node.versions = tuple(versions)
                break
    if view:
        # A view's layout is known now (args end with strides, offset), so ops recorded on it before it is
        # realized see its real strides.
        o = outs[0]
        t = <TensorBase>ins[0]
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
    elif shared:
        # NOTE: an input's memory is shared with numpy, which may write it before a lazy node runs (torch
        # computes at once): compute now. Later ops on the result stay lazy, its memory is plast's own.
        # (Through plast.Tensor's method: graph/realize.py sits above this module.)
        for o in outs:
            o._realized()
    return outs
