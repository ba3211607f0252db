# cython: boundscheck=True, wraparound=True, binding=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is op-layer code, not a kernel.
"""Argument checks of the fused optimizer updates (ops/optim.py, ops/optim_rmsprop.py), compiled: an update
checks every parameter, gradient and state tensor on every step, so the loops read the tensors' C fields."""

from plast.graph._graph cimport TensorBase

from .._core.errors import DeviceMismatchError, DTypeError, ShapeError


def tensor_list(xs, n, str op, str name, *, same_shape_as=None):
    """`xs` as a list of floating point tensors (n of them unless n is None; each shaped like its parameter in
    `same_shape_as`, and of its dtype except for gradients), or a clear error naming the bad entry."""
    if isinstance(xs, TensorBase) or not isinstance(xs, (list, tuple)):
        raise TypeError(f"{op}: {name} must be a list of tensors, got {type(xs).__name__}")
    cdef list out = list(xs)
    if n is not None and len(out) != n:
        raise ValueError(f"{op}: {name} has {len(out)} tensors but there are {n} parameters")
    cdef Py_ssize_t i
    cdef TensorBase t, ref
    cdef bint grads = name == "grads"
    for i in range(len(out)):
        x = out[i]
        if not isinstance(x, TensorBase):
            raise TypeError(f"{op}: {name}[{i}] must be a tensor, got {type(x).__name__}")
        t = <TensorBase>x
        if not t.dtype.is_floating_point:
            raise DTypeError(f"{op}: {name}[{i}] must be floating point, got {t.dtype}")
        if same_shape_as is not None:
            ref = <TensorBase?>same_shape_as[i]
            if t._shape != ref._shape:
                raise ShapeError(
                    f"{op}: {name}[{i}] has shape {tuple(t._shape)} but its parameter has shape "
                    f"{tuple(ref._shape)}"
                )
            if not grads and t.dtype is not ref.dtype:
                raise DTypeError(f"{op}: {name}[{i}] is {t.dtype} but its parameter is {ref.dtype}")
    return out


def scalar_list(xs, n, str op, str name):
    """tensor_list of one-element tensors."""
    cdef list out = tensor_list(xs, n, op, name)
    cdef Py_ssize_t i
    for i in range(len(out)):
        if (<TensorBase>out[i]).numel() != 1:
            raise ShapeError(f"{op}: {name}[{i}] must hold one number, got shape {tuple(out[i].shape)}")
    return out


def hypers(hyper, n, Py_ssize_t width, str op, str fields):
    """One hyperparameter tensor for all parameters, or one per parameter (usually repeated per group) ->
    (unique tensors, index of each parameter's tensor)."""
    cdef list hs = [hyper] * n if isinstance(hyper, TensorBase) else tensor_list(hyper, n, op, "hyper")
    cdef list uniq = [], index = []
    cdef dict pos = {}
    cdef TensorBase t
    for h in hs:
        if not isinstance(h, TensorBase) or not (<TensorBase>h).dtype.is_floating_point:
            raise DTypeError(f"{op}: hyper must be a floating point tensor [{fields}]")
        t = <TensorBase>h
        if t.numel() != width:
            raise ShapeError(f"{op}: hyper must hold {width} numbers [{fields}], got shape {tuple(t._shape)}")
        k = pos.get(id(h))
        if k is None:
            k = pos[id(h)] = len(uniq)
            uniq.append(h)
        index.append(k)
    return uniq, tuple(index)


def check_distinct(list params, str op):
    """No parameter (no memory) appears twice."""
    cdef set seen = set()
    cdef TensorBase p
    cdef Py_ssize_t i
    for i in range(len(params)):
        p = <TensorBase>params[i]
        key = (id(p._storage), p._offset) if p._storage is not None else id(p)
        if key in seen:
            raise ValueError(f"{op}: params[{i}] appears twice; each parameter can be updated once per call")
        seen.add(key)


def check_devices(str op, list tensors):
    """Every tensor on the first one's device."""
    dev = (<TensorBase?>tensors[0]).device
    for t in tensors:
        d = (<TensorBase>t).device
        if d is not dev and d != dev:
            raise DeviceMismatchError(f"{op}: every tensor must be on {dev}, found one on {d}")
