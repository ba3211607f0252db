# cython: boundscheck=True, wraparound=True, binding=True
# NOTE: Python indexing semantics here (negative indices, bounds checks): this is op-layer code, not a kernel.
"""cast, contiguous, view, reshape, expand, permute and transpose, compiled: a Linear layer's forward and
backward alone call transpose and cast several times per step, so these shape rules run on the tensors' C fields
and end in a C call to ``record``. Their rows of the op table (copy, view, expand, permute) are registered here,
with their backward rules, and read at C level; ops/movement.py re-exports the functions and rows with the rest of
the module.
"""

from plast._core._structs cimport TensorBase, nbytes, new_lazy
from plast.graph._graph cimport convert, record
from plast.kernels.cpu._kernels cimport copy_run

from .._core import dtypes as _dtypes
from ..graph import tape
from ..memory import arenas as _arenas
from ..kernels.host import copy_values
from .._core.errors import RepeatedDimError, ShapeError
from .._core._shapes import contiguous_strides, norm_dim
from ..kernels.cpu import kernels as cpu
from .registry import register

cdef object _dtype_type = _dtypes.dtype


# ---- backward rules: one gradient per input ----


def _copy_bw(node, g):
    return (g,)


def _view_bw(node, g):
    return (reshape(g, node.inputs[0].shape),)


def _expand_bw(node, g):
    # the engine sums a gradient back to its input's shape (DESIGN §2.6: sum_to_shape, autograd/_backward.pyx's
    # deliver), and an expanded input's gradient is exactly that sum
    return (g,)


def _permute_bw(node, g):
    perm = node.args[0]
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return (permute(g, tuple(inv)),)


# ---- the rows (Python names below, for ops/movement.py and ops/shape.py) ----

cdef object _COPY = register("copy", cpu=cpu.copy, backward=_copy_bw, saves_inputs=False, half=True)
cdef object _VIEW = register("view", cpu=cpu.view, backward=_view_bw, view=True, saves_inputs=False)
cdef object _EXPAND = register("expand", cpu=cpu.view, backward=_expand_bw, view=True, saves_inputs=False)
cdef object _PERMUTE = register("permute", cpu=cpu.view, backward=_permute_bw, view=True, saves_inputs=False)
COPY, VIEW, EXPAND, PERMUTE = _COPY, _VIEW, _EXPAND, _PERMUTE


cdef inline Py_ssize_t _numel(object shape) except -1:
    cdef Py_ssize_t n = 1
    for s in shape:
        n *= <Py_ssize_t>s
    return n


cdef inline Py_ssize_t _dim(object d, Py_ssize_t nd, str op) except? -1:
    """A dim wrapped into range (the common int case here; errors from shapes.norm_dim)."""
    cdef Py_ssize_t n = nd if nd > 1 else 1, v
    if type(d) is int:
        v = d
        if -n <= v < n:
            return v + n if v < 0 else v
    return norm_dim(d, nd, op)


def cast(x, dtype):
    """x converted to `dtype` (x itself when it already has it)."""
    if type(dtype) is not _dtype_type:
        dtype = _dtypes.as_dtype(dtype)
    return convert(x, dtype)  # the recorder's cast row (graph/_graph.pyx)


def contiguous(x):
    """x itself when row-major without gaps, else a contiguous copy."""
    cdef TensorBase t = <TensorBase?>x
    if t.is_contiguous():
        return x
    return record(_COPY, (t,), (), [(t._shape, t.dtype)], t.device)[0]


cdef tuple _shape_arg(tuple shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return shape


cdef tuple _infer_shape(tuple shape, Py_ssize_t n, str op):
    """`shape` with its one -1 filled in for `n` elements, or ShapeError."""
    cdef Py_ssize_t neg = -1, i = 0, rest = 1, s
    for v in shape:
        if type(v) is not int and not isinstance(v, int):
            raise ShapeError(f"{op}: invalid shape {shape}")
        s = v
        if s == -1:
            if neg >= 0:
                raise ShapeError(f"{op}: only one dimension can be -1, got {shape}")
            neg = i
        elif s < -1:
            raise ShapeError(f"{op}: invalid shape {shape}")
        else:
            rest *= s
        i += 1
    if neg >= 0:
        if rest == 0 or n % rest:
            raise ShapeError(f"{op}: shape {shape} is invalid for input of size {n}")
        out = list(shape)
        out[neg] = n // rest
        return tuple(out)
    if rest != n:
        raise ShapeError(f"{op}: shape {shape} is invalid for input of size {n}")
    return tuple(shape)


cdef object _view_strides(TensorBase x, tuple shape):
    """Strides that view x's memory as `shape`, or None when a copy is needed (the rule torch's view uses:
    every run of new dims must map onto one run of old dims that is contiguous within itself)."""
    old_shape, old_strides = x._shape, x._strides
    cdef Py_ssize_t nold = len(old_shape), nnew = len(shape)
    if nold == 0 or x.is_contiguous() or _numel(old_shape) == 0:
        return contiguous_strides(shape)
    cdef list new_strides = [0] * nnew
    cdef Py_ssize_t vd = nnew - 1, td
    cdef Py_ssize_t base = old_strides[nold - 1], t_numel = 1, v_numel = 1
    for td in range(nold - 1, -1, -1):
        t_numel *= <Py_ssize_t>old_shape[td]
        if td == 0 or (
            <Py_ssize_t>old_shape[td - 1] != 1 and <Py_ssize_t>old_strides[td - 1] != t_numel * base
        ):
            while vd >= 0 and (v_numel < t_numel or <Py_ssize_t>shape[vd] == 1):
                new_strides[vd] = v_numel * base
                v_numel *= <Py_ssize_t>shape[vd]
                vd -= 1
            if v_numel != t_numel:
                return None
            if td > 0:
                base = old_strides[td - 1]
                t_numel = v_numel = 1
    if vd != -1:
        return None
    return tuple(new_strides)


def view(x, *shape):
    """A view of x's memory with another shape (no copy), or ShapeError when the strides don't allow one."""
    cdef TensorBase t = <TensorBase?>x
    cdef tuple shp = _infer_shape(_shape_arg(shape), _numel(t._shape), "view")
    strides = _view_strides(t, shp)
    if strides is None:
        raise ShapeError(
            f"view: shape {shp} is not compatible with the input's size {t._shape} and strides {t._strides}; "
            "use .reshape(...) (which copies when it must)"
        )
    return record(_VIEW, (t,), (shp, strides, 0), [(shp, t.dtype)], t.device)[0]


def reshape(x, *shape):
    """x with another shape: a view when the strides allow one, else a contiguous copy viewed."""
    cdef TensorBase t = <TensorBase?>x
    cdef tuple shp = _infer_shape(_shape_arg(shape), _numel(t._shape), "reshape")
    if shp == t._shape:
        return x
    strides = _view_strides(t, shp)
    if strides is None:
        t = <TensorBase>contiguous(t)
        strides = contiguous_strides(shp)
    return record(_VIEW, (t,), (shp, strides, 0), [(shp, t.dtype)], t.device)[0]


def expand(x, *shape):
    """A view of x repeated along size-1 dims (no copy); -1 keeps a dim."""
    cdef TensorBase t = <TensorBase?>x
    cdef tuple shp = _shape_arg(shape)
    xs, xst = t._shape, t._strides
    cdef Py_ssize_t nd = len(xs), n = len(shp), pad = n - nd, i, s, d
    if n < nd:
        raise ShapeError(f"expand: target shape {shp} has fewer dims than the input {tuple(xs)}")
    cdef list out_shape = [0] * n, strides = [0] * n
    for i in range(n):
        s = shp[i]
        if i < pad:
            if s < 0:
                raise ShapeError(f"expand: -1 is not allowed for a new leading dim, got {shp}")
            out_shape[i] = s
            continue
        d = xs[i - pad]
        if s == -1:
            s = d
        if d == s:
            out_shape[i] = s
            strides[i] = xst[i - pad]
        elif d == 1:
            out_shape[i] = s
        else:
            raise ShapeError(
                f"expand: the size of dim {i} ({d}) must match {s} or be 1; input {tuple(xs)}, target {shp}"
            )
    out = tuple(out_shape)
    if out == xs:
        return x
    return record(_EXPAND, (t,), (out, tuple(strides), 0), [(out, t.dtype)], t.device)[0]


cdef tuple _SWAP2 = (1, 0)


cdef object _permute(TensorBase t, tuple perm):
    """The view for a normalized permutation `perm` of t's dims (t itself for the identity)."""
    xs, xst = t._shape, t._strides
    cdef Py_ssize_t nd = len(perm), i, p
    if nd == 2 and perm == _SWAP2:  # a matrix transpose: the most common view of all (Linear layers)
        return record(_PERMUTE, (t,), (_SWAP2, (xst[1], xst[0]), 0), [((xs[1], xs[0]), t.dtype)], t.device)[0]
    cdef list shape = [0] * nd, strides = [0] * nd
    cdef bint ident = True
    for i in range(nd):
        p = perm[i]
        shape[i] = xs[p]
        strides[i] = xst[p]
        if p != i:
            ident = False
    if ident:
        return t
    return record(_PERMUTE, (t,), (perm, tuple(strides), 0), [(tuple(shape), t.dtype)], t.device)[0]


def permute(x, *dims):
    """A view with dims reordered (no copy)."""
    cdef TensorBase t = <TensorBase?>x
    cdef tuple ds = _shape_arg(dims)
    cdef Py_ssize_t nd = len(t._shape), i
    cdef list perm = [_dim(d, nd, "permute") for d in ds]
    cdef list seen = [False] * nd
    if len(perm) != nd:
        raise ShapeError(f"permute: dims {ds} are not a permutation of {nd} dims")
    for i in perm:
        if seen[i]:  # torch raises RuntimeError here: RepeatedDimError is a RuntimeError and a ShapeError
            raise RepeatedDimError(f"permute: dims {ds} are not a permutation of {nd} dims (dim {i} is repeated)")
        seen[i] = True
    return _permute(t, tuple(perm))


def transpose(x, dim0, dim1):
    """A view with dims `dim0` and `dim1` swapped (no copy)."""
    cdef TensorBase t = <TensorBase?>x
    cdef Py_ssize_t nd = len(t._shape)
    cdef Py_ssize_t d0 = _dim(dim0, nd, "transpose"), d1 = _dim(dim1, nd, "transpose")
    if nd == 0:  # dims 0 and -1 name the 0-d tensor itself, as in torch
        return x
    if nd == 2:
        return x if d0 == d1 else _permute(t, _SWAP2)
    cdef list perm = list(range(nd))
    perm[d0], perm[d1] = d1, d0
    return _permute(t, tuple(perm))


def persistent_copy(TensorBase t):
    """t's value (t is realized) in fresh persistent memory: gradients and clones outlive transient resets
    (DESIGN §3)."""
    if t._storage is None:
        raise RuntimeError("persistent_copy: the tensor has no value yet (realize it first)")
    t._storage.check()
    dev = t.device
    cdef Py_ssize_t size = nbytes(t)
    cdef TensorBase out = new_lazy(type(t), t._shape, t.dtype, dev, None, 0)
    out._storage = _arenas.persistent(dev.type).new(size)
    if size:
        if dev.type == "cpu":
            copy_run(t, out)  # one dtype, any strides
        else:  # GPU memory is no host buffer: a device-side copy (plast.ops.device)
            copy_values(out, t)
    if tape._tape is not None:
        tape.note_copy(out, t, "persist")
    return out
