"""Casts, copies and views."""

from .. import dtypes
from ..backends.cpu import kernels as cpu
from ..engine.graph import record
from ..errors import ShapeError
from .registry import register
from .shapes import contiguous_strides, norm_dim, numel


def _cast_bw(node, g):
    x = node.inputs[0]
    return (cast(g, x.dtype),)


CAST = register("cast", cpu=cpu.copy, backward=_cast_bw, fusible=True, saves_inputs=False)
COPY = register("copy", cpu=cpu.copy, backward=lambda node, g: (g,), fusible=True, saves_inputs=False)


def cast(x, dtype):
    """x converted to `dtype` (x itself when it already has it)."""
    dtype = dtypes.as_dtype(dtype)
    if x.dtype is dtype:
        return x
    return record(CAST, (x,), (dtype.code,), [(x.shape, dtype)], x.device)[0]


def contiguous(x):
    if x.is_contiguous():
        return x
    return record(COPY, (x,), (), [(x.shape, x.dtype)], x.device)[0]


def clone(x):
    """A copy of x. Outside a graph (``t.detach().clone()``) the copy is made now, in persistent memory, so it
    survives reset_transient_arenas() (DESIGN §3); inside a graph it is an op like any other."""
    from ..engine import autograd_state

    if x.requires_grad and autograd_state.grad_enabled:
        return record(COPY, (x,), (), [(x.shape, x.dtype)], x.device)[0]
    from ..engine.autograd import _persistent_copy

    x._realized()
    return _persistent_copy(x)


def _view_bw(node, g):
    x = node.inputs[0]
    return (reshape(g, x.shape),)


VIEW = register("view", cpu=cpu.view, backward=_view_bw, view=True, saves_inputs=False)


def _infer_shape(shape, n, op):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {tuple(shape)}")
    for s in shape:
        if not isinstance(s, int) or s < -1:
            raise ShapeError(f"{op}: invalid shape {tuple(shape)}")
    if neg:
        rest = numel([s for s in shape if s != -1])
        if rest == 0 or n % rest:
            raise ShapeError(f"{op}: shape {tuple(shape)} is invalid for input of size {n}")
        shape[neg[0]] = n // rest
    if numel(shape) != n:
        raise ShapeError(f"{op}: shape {tuple(shape)} is invalid for input of size {n}")
    return tuple(shape)


def _view_strides(x, shape):
    """Strides that view x's memory as `shape`, or None when a copy is needed (the rule torch's view uses:
    every run of new dims must map onto one run of old dims that is contiguous within itself)."""
    if x.is_contiguous() or x.numel() == 0 or x.ndim == 0:
        return contiguous_strides(shape)
    old_shape, old_strides = x.shape, x._strides
    new_strides = [0] * len(shape)
    vd = len(shape) - 1
    base = old_strides[-1]
    t_numel = v_numel = 1
    for td in range(len(old_shape) - 1, -1, -1):
        t_numel *= old_shape[td]
        if td == 0 or (old_shape[td - 1] != 1 and old_strides[td - 1] != t_numel * base):
            while vd >= 0 and (v_numel < t_numel or shape[vd] == 1):
                new_strides[vd] = v_numel * base
                v_numel *= shape[vd]
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
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = _infer_shape(shape, x.numel(), "view")
    strides = _view_strides(x, shape)
    if strides is None:
        raise ShapeError(
            f"view: shape {shape} is not compatible with the input's size {x.shape} and strides {x._strides}; "
            "use .reshape(...) (which copies when it must)"
        )
    return record(VIEW, (x,), (shape, strides, 0), [(shape, x.dtype)], x.device)[0]


def reshape(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = _infer_shape(shape, x.numel(), "reshape")
    if shape == x.shape:
        return x
    strides = _view_strides(x, shape)
    if strides is None:
        x = contiguous(x)
        strides = contiguous_strides(shape)
    return record(VIEW, (x,), (shape, strides, 0), [(shape, x.dtype)], x.device)[0]


def _expand_bw(node, g):
    from .reduce import sum_to_shape

    return (sum_to_shape(g, node.inputs[0].shape),)


EXPAND = register("expand", cpu=cpu.view, backward=_expand_bw, view=True, saves_inputs=False)


def expand(x, *shape):
    """A view of x repeated along size-1 dims (no copy); -1 keeps a dim."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if len(shape) < x.ndim:
        raise ShapeError(
            f"expand: target shape {tuple(shape)} has fewer dims than the input {tuple(x.shape)}"
        )
    pad = len(shape) - x.ndim
    out_shape, strides = [], []
    for i, s in enumerate(shape):
        if i < pad:
            if s < 0:
                raise ShapeError(f"expand: -1 is not allowed for a new leading dim, got {tuple(shape)}")
            out_shape.append(s)
            strides.append(0)
            continue
        d, st = x.shape[i - pad], x._strides[i - pad]
        if s == -1:
            s = d
        if d == s:
            out_shape.append(s)
            strides.append(st)
        elif d == 1:
            out_shape.append(s)
            strides.append(0)
        else:
            raise ShapeError(
                f"expand: the size of dim {i} ({d}) must match {s} or be 1; input {tuple(x.shape)}, "
                f"target {tuple(shape)}"
            )
    out_shape = tuple(out_shape)
    if out_shape == x.shape:
        return x
    return record(EXPAND, (x,), (out_shape, tuple(strides), 0), [(out_shape, x.dtype)], x.device)[0]


def _permute_bw(node, g):
    perm = node.args[0]
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return (permute(g, tuple(inv)),)


PERMUTE = register("permute", cpu=cpu.view, backward=_permute_bw, view=True, saves_inputs=False)


def permute(x, *dims):
    """A view with dims reordered (no copy)."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    nd = x.ndim
    perm = tuple([norm_dim(d, nd, "permute") for d in dims])
    ident = tuple(range(nd))
    if len(perm) != nd or tuple(sorted(perm)) != ident:
        raise ShapeError(f"permute: dims {tuple(dims)} are not a permutation of {nd} dims")
    if perm == ident:
        return x
    xs, xst = x._shape, x._strides
    shape = tuple([xs[p] for p in perm])
    strides = tuple([xst[p] for p in perm])
    return record(PERMUTE, (x,), (perm, strides, 0), [(shape, x.dtype)], x.device)[0]


def transpose(x, dim0, dim1):
    d0, d1 = norm_dim(dim0, x.ndim, "transpose"), norm_dim(dim1, x.ndim, "transpose")
    perm = list(range(x.ndim))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return permute(x, tuple(perm))


__all__ = ["cast", "contiguous", "clone", "view", "reshape", "expand", "permute", "transpose"]

TENSOR_METHODS = {
    "contiguous": contiguous,
    "clone": clone,
    "view": view,
    "reshape": reshape,
    "expand": expand,
    "permute": permute,
    "transpose": transpose,
    "T": property(lambda x: permute(x, tuple(range(x.ndim - 1, -1, -1)))),
    "mT": property(lambda x: transpose(x, -2, -1)),
}
