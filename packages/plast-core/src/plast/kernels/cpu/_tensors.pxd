# Raw access to a realized tensor's memory for kernel wrappers: its address and its (broadcast) strides as C
# arrays, read straight from the C structs (graph/_graph.pxd, memory/arena.pxd) without Python attribute calls.

from plast.graph._graph cimport TensorBase
from plast.memory.arena cimport Storage


cdef inline char *tensor_ptr(TensorBase t) except NULL:
    """Address of t's first element (t realized in host memory; stale memory raises StaleTensorError)."""
    st = t._storage
    if type(st) is not Storage:
        raise TypeError(f"a {t.device} tensor has no host memory for a CPU kernel")
    if (<Storage>st).stale():
        st.check()
    return (<Storage>st).ptr + t._offset * <Py_ssize_t>t.dtype.itemsize


cdef inline int fill_shape(object shape, Py_ssize_t *out, int maxd) except -1:
    cdef int nd = len(shape), i
    if nd > maxd:
        raise ValueError(f"at most {maxd} dimensions are supported, got {nd}")
    for i in range(nd):
        out[i] = shape[i]
    return nd


cdef inline void fill_bcast_strides(TensorBase t, const Py_ssize_t *shape, int nd, Py_ssize_t *out) except *:
    """t's strides (elements) broadcast to `shape` (nd dims): 0 along dims t lacks or has as size 1."""
    cdef object tshape = t._shape
    cdef object tstrides = t._strides
    cdef int tnd = len(tshape), pad = nd - tnd, i
    cdef Py_ssize_t d
    for i in range(pad):
        out[i] = 0
    for i in range(tnd):
        d = tshape[i]
        out[pad + i] = tstrides[i] if (d != 1 or shape[pad + i] == 1) else 0
