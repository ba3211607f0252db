# cython: boundscheck=True, wraparound=True, binding=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is op-layer code, not a kernel.
"""sum, mean and sum_to_shape, compiled: losses end in a mean, and the autograd engine sums every broadcast
gradient back to its input's shape with sum_to_shape. The sum row of the op table is registered here, with its
backward rule, and read at C level; ops/reduce.py re-exports the functions and the row.
"""

from plast._core._structs cimport TensorBase
from plast.graph._graph cimport record

from .._core import dtypes as _dtypes
from .._core.errors import DTypeError
from .elementwise import div as _div
from ._movement import cast as _cast
from ._movement import expand as _expand
from ._movement import reshape as _reshape
from .._core._shapes import norm_dim
from ..kernels.cpu import kernels as cpu
from .registry import register

cdef object _int64 = _dtypes.int64
cdef tuple _ALL_DIMS = tuple(tuple(range(n)) for n in range(8))  # (0, ..., n - 1), made once


cpdef tuple reduced_dims(object x, object dim, str op, bint empty_is_all=True):
    """Reduced dims as a sorted tuple (all dims for None, and for an empty sequence when `empty_is_all`). A 0-d
    tensor accepts dim 0/-1 and reduces over nothing."""
    cdef Py_ssize_t nd = len((<TensorBase?>x)._shape)
    if dim is None or (empty_is_all and isinstance(dim, (tuple, list)) and len(dim) == 0):
        return _ALL_DIMS[nd] if nd < 8 else tuple(range(nd))
    if isinstance(dim, int):
        dim = (dim,)
    cdef list ds = [norm_dim(d, nd, op) for d in dim]
    cdef set seen = set()
    for d in ds:
        if d in seen:
            # torch raises; a set would have reduced the dim once, silently
            raise RuntimeError(f"{op}: dim {d} appears multiple times in the list of dims")
        seen.add(d)
    return tuple(sorted(ds)) if nd else ()


cpdef tuple reduced_shape(object shape, tuple dims, bint keepdim):
    """`shape` without `dims` (size 1 there with keepdim)."""
    cdef list out = []
    cdef Py_ssize_t i = 0
    for s in shape:
        if i in dims:
            if keepdim:
                out.append(1)
        else:
            out.append(s)
        i += 1
    return tuple(out)


def _sum_bw(node, g):
    x = node.inputs[0]
    dims, keepdim = node.args
    if not keepdim:
        g = _reshape(g, reduced_shape(x.shape, dims, True))
    return (_expand(g, x.shape),)


cdef object _SUM = register("sum", cpu=cpu.sum_, backward=_sum_bw)
SUM = _SUM  # the row, for ops/reduce.py


def sum(x, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    """Sum over `dim` (all dims when None). Integer and bool inputs sum in int64, like torch.

    >>> plast.tensor([[1.0, 2.0], [3.0, 4.0]]).sum(1).tolist()
    [3.0, 7.0]
    """
    cdef TensorBase t = <TensorBase?>x
    return _sum(t, reduced_dims(t, dim, "sum"), keepdim, dtype)


cdef object _sum(TensorBase t, tuple dims, bint keepdim, object dtype):
    """sum over normalized `dims` (mean calls it with the dims it has already worked out)."""
    if dtype is not None:
        out_dtype = _dtypes.as_dtype(dtype)
    else:
        out_dtype = t.dtype if t.dtype.is_floating_point else _int64
    if t.dtype is not out_dtype:
        t = <TensorBase>_cast(t, out_dtype)
    shape = reduced_shape(t._shape, dims, keepdim)
    return record(_SUM, (t,), (dims, keepdim), [(shape, out_dtype)], t.device)[0]


def mean(x, dim=None, keepdim=False, *, dtype=None):
    """Mean over `dim` (all dims when None); needs a floating input or dtype=.

    >>> plast.tensor([1.0, 2.0, 6.0]).mean().item()
    3.0
    """
    cdef TensorBase t = <TensorBase?>x
    if not (t.dtype.is_floating_point or dtype is not None):
        raise DTypeError(f"mean(): needs a floating point input or dtype=, got {t.dtype}")
    cdef tuple dims = reduced_dims(t, dim, "mean")
    cdef Py_ssize_t n = 1
    shape = t._shape
    for d in dims:
        n *= <Py_ssize_t>shape[d]
    return _div(_sum(t, dims, keepdim, dtype), float(n) if n else float("nan"))


def sum_to_shape(g, shape):
    """Sum a broadcast gradient back to `shape` (the engine does this for every op, DESIGN §2.6)."""
    cdef TensorBase t = <TensorBase?>g
    gs = t._shape
    shape = tuple(shape)
    if gs == shape:
        return g
    cdef Py_ssize_t lead = len(gs) - len(shape), i
    cdef list dims = list(range(lead))
    for i in range(len(shape)):
        if shape[i] == 1 and gs[lead + i] != 1:
            dims.append(lead + i)
    out = sum(t, tuple(dims), keepdim=True) if dims else g
    return _reshape(out, shape)
