# cython: boundscheck=True, wraparound=True
"""Shape helpers of the op layer, compiled: every op call runs one or more of them (_core/shapes.py re-exports
them with their documentation)."""

from ._structs cimport contiguous_strides as _strides, mul_ovf, shape_numel
from .errors import ShapeError


def numel(shape):
    cdef Py_ssize_t n = 1, d
    for s in shape:
        d = <Py_ssize_t>s
        if mul_ovf(n, d, &n):  # a zero dim later, or RuntimeError naming the shape
            return shape_numel(tuple(shape))
    return n


def nbytes(shape, itemsize):
    return shape_numel(shape if type(shape) is tuple else tuple(shape), itemsize) * itemsize


def contiguous_strides(shape):
    return _strides(shape if type(shape) is tuple else tuple(shape))


def broadcast_shapes(*shapes, op="broadcast"):
    """numpy/torch broadcasting of several shapes, or ShapeError naming the op and the shapes."""
    cdef Py_ssize_t nd = 0, pad, i, j, n
    for s in shapes:
        n = len(s)
        if n > nd:
            nd = n
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return tuple(shapes[0])
    cdef list out = [1] * nd
    for s in shapes:
        pad = nd - len(s)
        i = 0
        for d in s:
            j = pad + i
            if out[j] == 1:
                out[j] = d
            elif d != 1 and d != out[j]:
                shown = " and ".join(str(tuple(x)) for x in shapes)
                raise ShapeError(
                    f"{op}: shapes {shown} cannot be broadcast together "
                    f"(dimension {j - nd} is {out[j]} in one and {d} in the other)"
                )
            i += 1
    return tuple(out)


def norm_dim(dim, ndim, op="op"):
    """Wrap a possibly negative dim into range, or IndexError as torch raises."""
    if type(dim) is not int and (not isinstance(dim, int) or isinstance(dim, bool)):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    cdef Py_ssize_t n = ndim if ndim > 1 else 1
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dimension(s)")
    return dim + n if dim < 0 else dim
