"""Layout helpers for the vectorized kernels in _fast: describe a strided tensor as the 3-d (outer, n, inner)
array those kernels take, or say that it can't be (the caller then copies or keeps its numpy path)."""

from . import _fast  # noqa: F401  (imported here so a failed build shows up at import, not mid-step)


def _merge(shape, strides, lo, hi):
    """(size, stride) of dims lo..hi merged into one, or None when they don't merge. Size-1 dims are ignored;
    an empty or all-ones group is (size, 0) with stride 0 (never read for size 1)."""
    size, stride = 1, None
    for d in range(lo, hi):
        s = shape[d]
        if s == 1:
            continue
        if stride is not None and stride != strides[d] * s:
            return None
        size *= s
        stride = strides[d]
    return size, 0 if stride is None else stride


def as3d(t, a, b):
    """(outer, n, inner, (s_outer, s_n, s_inner)) for dims [0, a), [a, b), [b, ndim) of tensor `t`, strides in
    elements; None when a group of dims can't be merged into one stride."""
    return as3d_raw(t._shape, t._strides, a, b)


def as3d_raw(shape, strides, a, b):
    nd = len(shape)
    o = _merge(shape, strides, 0, a)
    n = _merge(shape, strides, a, b)
    i = _merge(shape, strides, b, nd)
    if o is None or n is None or i is None:
        return None
    # a group of size 1 gets the stride that keeps the kernels on their contiguous paths
    sn = n[1] if n[0] > 1 else 1
    si = i[1] if i[0] > 1 else 1
    return o[0], n[0], i[0], (o[1], sn, si)


def contiguous_block(dims):
    """(a, b) when sorted `dims` are the consecutive range a..b-1, else None."""
    if not dims:
        return None
    a, b = dims[0], dims[-1] + 1
    return (a, b) if tuple(dims) == tuple(range(a, b)) else None
