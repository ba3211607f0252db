# The engine's C structs (DESIGN §2): a tensor's fields (TensorBase), an op-table row (OpDef) and a graph node
# (Node), so recording an op and walking a graph touch no per-object dicts. The lowest layer holds them: kernels
# read tensors' fields, the graph records nodes, ops build rows.

from libc.stdlib cimport getenv

from plast._core._dtype cimport dtype as DType

cdef extern from "sizes.h":
    bint mul_ovf "plast_mul_ovf"(Py_ssize_t a, Py_ssize_t b, Py_ssize_t *r) noexcept nogil

cdef class TensorBase:
    # NOTE: an exact tuple, never a plast.Size: CPython gives a Python subclass of tuple a generic item slot (a
    # Python-level __getitem__ call per item, about 0.2 us) that C code indexing a shape would take; typed as a
    # tuple, Cython reads the items directly. The shape property hands out a plast.Size, made once (_size, from
    # the _shape object _size_of: .data = x may assign another shape).
    cdef public tuple _shape
    cdef object _size, _size_of
    cdef public object _strides      # tuple, in elements
    cdef public Py_ssize_t _offset   # in elements
    cdef public DType dtype          # typed: compiled code reads itemsize, code, is_floating_point as C fields
    cdef public object device
    cdef public object _storage      # Storage while realized, else None
    cdef public object _node         # the Node that produces this tensor, or None (a leaf or a computed value)
    cdef public Py_ssize_t _index    # which output of _node
    cdef public bint requires_grad
    cdef public object _grad         # .grad (a property: assignments are checked as torch checks them)
    cdef public Py_ssize_t _version
    cdef public bint _retains_grad
    cdef public object _hooks
    cdef public object _npcache      # (storage, offset, strides, ndarray): kernels' numpy view of this tensor
    cdef public object _readers      # weakrefs to nodes recorded while this tensor had no memory
    # scratch of a backward replay's scan (autograd/_backward_replay.scan): the scan that last met this tensor
    # as a graph input, and its index among that scan's inputs (a mark, not a dict of ids, per input)
    cdef unsigned long long _mark
    cdef Py_ssize_t _slot
    cdef object __weakref__

    cpdef bint is_contiguous(self)


cdef class OpDef:
    cdef public object name
    cdef public dict kernels           # device type -> kernel
    cdef public object backward
    cdef public object chain           # its opcode in the elementwise-chain bytecode, or None
    cdef public bint reads_output      # its backward reads its own output
    cdef public bint view
    cdef public Py_ssize_t n_outputs
    cdef public bint saves_inputs
    cdef public dict window_kernels
    cdef public bint half            # its kernels take bfloat16/float16; other rows compute in float32


cdef class Node:
    cdef public object op
    cdef public object inputs        # tuple of tensors; () once nothing needs them; None once backward freed them
    cdef public object args
    cdef public object specs         # [(shape, dtype)] per output
    cdef public object outputs       # [weakref] per output
    cdef public bint needs_grad
    cdef public object versions      # storage versions of the inputs when recorded (when backward reads them)
    cdef public bint done            # computed
    cdef public object device
    cdef public object scratch       # what a kernel packed for this node, kept while it runs again (a Plan)
    cdef public bint reruns          # its kernel will run again (a jit plan's step, a replayed eager update)
    # scratch of the scheduler's analysis of one graph (graph/_scheduler.analyze): this node's position in the
    # order, the index of its first output among all outputs, and which analysis set them
    cdef Py_ssize_t _pos, _out0
    cdef unsigned long long _mark
    cdef object __weakref__


cdef inline bint env_zero(const char *name) noexcept:
    """The environment variable `name` is exactly "0" (a PLAST_* switch turned off). Read from the C environment,
    which os.environ writes through to, so a switch set at run time (tests' monkeypatch.setenv) is seen."""
    cdef const char *v = getenv(name)
    return v != NULL and v[0] == 48 and v[1] == 0


cdef tuple contiguous_strides(tuple shape)
cdef Py_ssize_t shape_numel(tuple shape, Py_ssize_t itemsize=*) except -1
cdef TensorBase alloc_tensor(type cls)
cdef TensorBase new_lazy(type cls, object shape, object dtype, object device, object node, Py_ssize_t index)


cdef inline Py_ssize_t nbytes(TensorBase t) except -1:
    """Bytes of t's elements (its shape times its dtype's size); RuntimeError naming the shape when that does not
    fit in a Py_ssize_t (record() refuses such outputs, so a scheduler never asks for one)."""
    cdef Py_ssize_t n = 1, d
    for s in t._shape:
        d = <Py_ssize_t>s
        if mul_ovf(n, d, &n):
            return shape_numel(t._shape, t.dtype.itemsize)  # a zero dim later, or the error
    if mul_ovf(n, <Py_ssize_t>t.dtype.itemsize, &n):
        return shape_numel(t._shape, t.dtype.itemsize)
    return n
