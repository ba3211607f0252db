"""The engine's C structs, compiled (DESIGN §2): TensorBase (a tensor's fields; the Python ``plast.Tensor``
subclasses it and adds the methods), OpDef (a row of the op table), Node (one op application), and Size (a
tensor's shape as torch prints it).

They are the lowest layer's so that every layer can read them: kernels read tensors' fields, graph/_graph.pyx
records nodes, ops/registry.py builds rows.
"""

cimport cython
from cpython.object cimport PyTypeObject
from cpython.type cimport PyType_IsSubtype
from cpython.ref cimport PyObject, Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from .devices import CPU


class Size(tuple):
    """A tensor's shape: a tuple, printed as torch prints it.

    >>> import plast
    >>> plast.zeros(2, 3).shape
    plast.Size([2, 3])
    """

    def __repr__(self):
        return f"plast.Size([{', '.join(map(str, self))}])"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


# While a @plast.jit trace records (graph/tape.py), the .grad each tensor had when the call began, for those whose
# .grad the traced function assigns (zero_grad): autograd then knows whether a traced backward's gradient depends on
# the .grad a later call starts with. None outside a trace: one pointer compare per assignment.
cdef dict _grads_at_start = None


def record_grads_at_start(dict d):
    """Collect into `d` (or stop collecting, with None) each tensor's .grad before its first assignment."""
    global _grads_at_start
    _grads_at_start = d


def grad_assigned_in_trace(t):
    """Whether the @plast.jit function being traced has assigned t's .grad (then what the call began with is
    not what its backward reads)."""
    return _grads_at_start is not None and id(t) in _grads_at_start


@cython.auto_pickle(False)
cdef class TensorBase:
    """A tensor's fields and its most-read metadata. Other methods live on plast.Tensor (_tensor.py and the op
    modules)."""

    @property
    def shape(self):
        if self._size_of is not self._shape:
            self._size = Size(self._shape)
            self._size_of = self._shape
        return self._size

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            _check_grad(self, value)
        if _grads_at_start is not None and id(self) not in _grads_at_start:
            _grads_at_start[id(self)] = (self, self._grad)
        self._grad = value

    @grad.deleter
    def grad(self):
        self.grad = None

    @property
    def ndim(self):
        return len(self._shape)

    def dim(self):
        return len(self._shape)

    def numel(self):
        return shape_numel(self._shape)

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


cdef _check_grad(TensorBase t, object value):
    """A gradient assigned to ``t.grad`` must be a tensor of t's shape, dtype and device, as torch requires: an
    optimizer would otherwise broadcast or cast it silently, or read past its end."""
    if not isinstance(value, TensorBase):
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}")
    cdef TensorBase g = <TensorBase>value
    if g._shape != t._shape:
        raise RuntimeError(
            f"attempting to assign a gradient of size '{list(g._shape)}' to a tensor of size '{list(t._shape)}'. "
            f"Please ensure that the gradient and the tensor are the same size"
        )
    if g.dtype is not t.dtype:
        raise RuntimeError(
            f"attempting to assign a gradient with dtype '{g.dtype}' to a tensor with dtype '{t.dtype}'. "
            f"Please ensure that the gradient and the tensor have the same dtype"
        )
    if g.device is not t.device and g.device != t.device:
        raise RuntimeError(
            f"attempting to assign a gradient on device '{g.device}' to a tensor on device '{t.device}'. "
            f"Please ensure that the gradient and the tensor are on the same device"
        )


@cython.auto_pickle(False)
@cython.final
cdef class OpDef:
    """One row of the op table (ops/registry.py documents the fields): a C struct, because recording,
    scheduling and backward read its fields for every node."""

    def __init__(
        self,
        name,
        kernels=None,
        backward=None,
        chain=None,
        view=False,
        n_outputs=1,
        saves_inputs=True,
        reads_output=False,
        half=False,
    ):
        self.name = name
        self.kernels = dict(kernels or {})
        self.backward = backward
        self.chain = chain
        self.reads_output = reads_output
        self.view = view
        self.n_outputs = n_outputs
        self.saves_inputs = saves_inputs
        self.window_kernels = {}
        # a view only re-reads its input's memory, whatever the element type
        self.half = half or view

    @property
    def fusible(self):
        """Elementwise-chain fusion merges it with its neighbours (it has a chain opcode)."""
        return self.chain is not None

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
    """Row-major strides of `shape` (a size-1 or size-0 dim counts as 1), or RuntimeError naming the shape when a
    stride does not fit in a Py_ssize_t (torch's "Stride calculation overflowed")."""
    cdef Py_ssize_t n = len(shape), i, acc = 1, d = 0
    cdef bint huge
    if n == 0:
        return ()
    cdef list out = [0] * n
    for i in range(n - 1, -1, -1):
        out[i] = acc
        if i:
            try:
                d = <Py_ssize_t>shape[i]
                huge = False
            except OverflowError:
                huge = True  # a dim past int64: certainly an overflow
            if huge or (d > 1 and mul_ovf(acc, d, &acc)):
                raise RuntimeError(
                    f"Stride calculation overflowed with sizes={list(shape)}: a stride exceeds 2**63-1 elements"
                )
    return tuple(out)


cdef Py_ssize_t shape_numel(tuple shape, Py_ssize_t itemsize=0) except -1:
    """The element count of `shape`; with `itemsize`, also check that its byte size fits. RuntimeError naming the
    shape when either does not fit in a Py_ssize_t (int64): torch's rule, and its messages. The one place a
    tensor's size is checked (issue 23): record(), the scheduler and the allocators all come here."""
    cdef Py_ssize_t n = 1, d, b
    cdef bint over = False
    try:  # around the loop, not per dim (see _checked_strides)
        for s in shape:
            d = <Py_ssize_t>s
            if d == 0:
                return 0  # any other dim, however large, holds no element
            if d < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {d}: {list(shape)}")
            if not over and mul_ovf(n, d, &n):
                over = True
    except OverflowError:  # a dim past int64 itself (cat or repeat summed two huge dims)
        raise RuntimeError(
            f"numel: integer multiplication overflow: shape {list(shape)} has a dim over 2**63-1"
        ) from None
    if over:
        raise RuntimeError(
            f"numel: integer multiplication overflow: shape {list(shape)} has more than 2**63-1 elements"
        )
    if itemsize and mul_ovf(n, itemsize, &b):
        raise RuntimeError(
            f"Storage size calculation overflowed with sizes={list(shape)}: {n} elements of {itemsize} bytes "
            f"need more than 2**63-1 bytes"
        )
    return n


@cython.boundscheck(False)
@cython.wraparound(False)
cdef tuple _checked_strides(tuple shape, Py_ssize_t itemsize):
    """contiguous_strides(shape) and shape_numel(shape, itemsize)'s checks in one pass over the dims (record()
    runs this for every tensor it makes); the errors are theirs, in their order. A shape that no memory could hold
    is an error now, not when it is computed."""
    cdef Py_ssize_t n = len(shape), i, acc = 1, numel = 1, d
    cdef bint fits = True
    if n == 0:
        return ()
    # NOTE: the tuple is filled in place (no list, no tuple(list) copy): this runs for every tensor an op records
    cdef tuple out = PyTuple_New(n)
    cdef object v  # typed: an inferred Py_ssize_t would give SET_ITEM a second temporary, not the INCREF'd one
    try:  # NOTE: one try block around the loop, not one per dim (entering one saves the exception state)
        for i in range(n - 1, -1, -1):
            v = acc
            Py_INCREF(v)  # PyTuple_SET_ITEM steals the reference
            PyTuple_SET_ITEM(out, i, v)
            d = <Py_ssize_t>shape[i]
            if d > 1:
                if i and mul_ovf(acc, d, &acc):
                    break
                if fits and mul_ovf(numel, d, &numel):
                    fits = False
            elif d <= 0:
                fits = False  # zero (nothing to allocate) or negative: the slow path decides
        else:
            if fits and not mul_ovf(numel, itemsize, &d):
                return out
    except OverflowError:  # a dim past int64 itself: the stride or numel error, from the slow path
        pass
    # the exact checks and messages, for the rare shape that is not plain (a partly filled `out` is dropped:
    # its unset items are NULL, which tuple deallocation skips)
    strides = contiguous_strides(shape)
    shape_numel(shape, itemsize)
    return strides


cdef tuple _NO_ARGS = ()


cdef type _checked = None  # the class alloc_tensor last found to be a TensorBase subtype


cdef TensorBase alloc_tensor(type cls):
    """``TensorBase.__new__(cls)`` without the Python-level call Cython makes of it for a `cls` it can't see at
    compile time (~800 instructions, for every tensor an op records): TensorBase's own tp_new, on `cls`, which is
    what ``TensorBase.__new__`` runs (so a subclass's Python ``__new__``, Parameter's, is not called either)."""
    global _checked
    if cls is not _checked:  # NOTE: one compare on the hot path: nearly every call passes plast.Tensor
        if not PyType_IsSubtype(cls, TensorBase):
            raise TypeError(f"{cls.__name__} is not a subtype of TensorBase")
        _checked = cls
    return <TensorBase>(<PyTypeObject *>TensorBase).tp_new(cls, <PyObject *>_NO_ARGS, NULL)


cdef TensorBase new_lazy(type cls, object shape, object dtype, object device, object node, Py_ssize_t index):
    cdef TensorBase t = alloc_tensor(cls)
    if type(shape) is not tuple:
        shape = tuple(shape)
    t._shape = shape
    if dtype is None:  # compiled code reads dtype fields unchecked (TensorBase.dtype is typed)
        raise TypeError("a tensor needs a dtype, got None")
    t._strides = _checked_strides(<tuple>shape, (<DType?>dtype).itemsize)
    t.dtype = dtype
    t.device = device
    t._node = node
    t._index = index
    return t
