"""Shape ops: squeeze/unsqueeze, flatten, narrow/select/diagonal, cat/stack/split/chunk, tril/triu, pad, flip,
roll, repeat/tile.

Everything that can be a view is one (no copy): the ``strided_view`` row describes a view as a map from each
output dim to the input dims it walks (``dims_map``: per output dim a tuple of ``(input_dim, step)``) plus a start
index per input dim (``base``), so slices, selects, diagonals and new axes are all one row whose strides are
computed from the input's strides at record time. Its backward is ``strided_scatter`` (zeros, with the gradient
written into the same window), whose backward is the view again, so double backward works.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

from .._core import autocast_state as _ac
from .._core import dtypes
from .._core._structs import TensorBase
from .._core.errors import DeviceMismatchError, RepeatedDimError, ShapeError
from .._core.hints import Dims, ShapeLike, SizeArg
from .._core.shapes import contiguous_strides, norm_dim, numel
from ..graph._graph import record
from ..kernels.cpu import kernels as cpu
from ..kernels.cpu import kernels_indexing as kix
from . import autocast as _autocast
from . import movement
from .creation import zeros
from .registry import register


def _identity_map(ndim):
    return tuple(((d, 1),) for d in range(ndim))


def _strided_view_bw(node, g):
    x = node.inputs[0]
    dims_map, base = node.args[0], node.args[1]
    return (strided_scatter(g, x.shape, dims_map, base),)


def _strided_scatter_bw(node, g):
    _, dims_map, base, _ = node.args
    return (strided_view(g, node.inputs[0].shape, dims_map, base),)


STRIDED_VIEW = register(
    "strided_view", cpu=cpu.view, backward=_strided_view_bw, view=True, saves_inputs=False
)
STRIDED_SCATTER = register(
    "strided_scatter", cpu=kix.strided_scatter, backward=_strided_scatter_bw, saves_inputs=False
)


def strided_view(x, shape, dims_map, base):
    """A view of x: output dim i walks input dims ``dims_map[i]`` (pairs of (dim, step)) from index ``base``.

    Internal building block of slicing, select, narrow, diagonal and new axes.
    """
    shape = tuple(shape)
    base = tuple(base)
    if shape == tuple(x.shape) and dims_map == _identity_map(x.ndim) and not any(base):
        return x
    if numel(shape) == 0:
        base = (0,) * x.ndim  # an empty view reads nothing; keep its offset inside the storage
    st = x._strides
    strides = tuple(sum(c * st[d] for d, c in m) for m in dims_map)
    offset = sum(b * st[d] for d, b in enumerate(base))
    return record(STRIDED_VIEW, (x,), (dims_map, base, strides, offset), [(shape, x.dtype)], x.device)[0]


def strided_scatter(g, out_shape, dims_map, base, fill=0):
    """A new tensor of `out_shape` filled with `fill`, holding g in the window strided_view would select."""
    out_shape = tuple(out_shape)
    if numel(g.shape) == 0:
        base = (0,) * len(out_shape)
    args = (out_shape, dims_map, tuple(base), fill)
    return record(STRIDED_SCATTER, (g,), args, [(out_shape, g.dtype)], g.device)[0]


def _view_as_shape(x, shape, strides):
    """A VIEW row with explicit strides (dims of size 1 added or removed)."""
    shape = tuple(shape)
    if shape == tuple(x.shape):
        return x
    return record(movement.VIEW, (x,), (shape, tuple(strides), 0), [(shape, x.dtype)], x.device)[0]


# ---- squeeze, unsqueeze, flatten, unflatten, movedim ----


def squeeze(x: TensorBase, dim: Dims | None = None) -> TensorBase:
    """Remove dims of size 1 (all of them, or those in `dim`; a dim whose size isn't 1 is left alone).

    >>> plast.zeros(2, 1, 3, 1).squeeze().shape
    plast.Size([2, 3])
    """
    if dim is None:
        dims = set(range(x.ndim))
    else:
        listed = [norm_dim(d, x.ndim, "squeeze") for d in ((dim,) if isinstance(dim, int) else dim)]
        dims = set(listed)
        if len(dims) != len(listed):
            # torch raises, as reductions do (ops/_reduce.pyx reduced_dims)
            dup = next(d for d in listed if listed.count(d) > 1)
            raise RuntimeError(f"squeeze: dim {dup} appears multiple times in the list of dims")
    keep = [i for i in range(x.ndim) if not (i in dims and x.shape[i] == 1)]
    return _view_as_shape(x, [x.shape[i] for i in keep], [x._strides[i] for i in keep])


def unsqueeze(x: TensorBase, dim: int) -> TensorBase:
    """Insert a dim of size 1 at `dim` (negative counts from the end of the result).

    >>> plast.zeros(2, 3).unsqueeze(-1).shape
    plast.Size([2, 3, 1])
    """
    d = norm_dim(dim, x.ndim + 1, "unsqueeze")
    shape = list(x.shape)
    strides = list(x._strides)
    st = strides[d] * shape[d] if d < x.ndim else 1
    shape.insert(d, 1)
    strides.insert(d, st)
    return record(
        movement.VIEW, (x,), (tuple(shape), tuple(strides), 0), [(tuple(shape), x.dtype)], x.device
    )[0]


def flatten(x: TensorBase, start_dim: int = 0, end_dim: int = -1) -> TensorBase:
    """Merge dims start_dim..end_dim into one (a view when the memory allows it, else a copy, as in torch).

    >>> plast.zeros(2, 3, 4).flatten(1).shape
    plast.Size([2, 12])
    """
    if x.ndim == 0:
        return movement.reshape(x, (1,))
    s = norm_dim(start_dim, x.ndim, "flatten")
    e = norm_dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise ValueError(f"flatten: start_dim ({start_dim}) must not come after end_dim ({end_dim})")
    if s == e:
        return x
    shape = x.shape[:s] + (numel(x.shape[s : e + 1]),) + x.shape[e + 1 :]
    return movement.reshape(x, shape)


def unflatten(x: TensorBase, dim: int, sizes: ShapeLike) -> TensorBase:
    """Split dim `dim` into `sizes` (one entry may be -1). Always a view.

    >>> plast.zeros(2, 12).unflatten(1, (3, -1)).shape
    plast.Size([2, 3, 4])
    """
    d = norm_dim(dim, x.ndim, "unflatten")
    sizes = list(sizes)
    if not sizes:
        raise ValueError("unflatten: sizes must be non-empty")
    n = x.shape[d]
    if sizes.count(-1) > 1:
        raise ShapeError(f"unflatten: only one size can be -1, got {tuple(sizes)}")
    if -1 in sizes:
        rest = numel([s for s in sizes if s != -1])
        if rest == 0 or n % rest:
            raise ShapeError(f"unflatten: sizes {tuple(sizes)} don't multiply to the size of dim {d} ({n})")
        sizes[sizes.index(-1)] = n // rest
    if numel(sizes) != n:
        raise ShapeError(f"unflatten: sizes {tuple(sizes)} don't multiply to the size of dim {d} ({n})")
    inner = [x._strides[d] * s for s in contiguous_strides(sizes)]
    shape = x.shape[:d] + tuple(sizes) + x.shape[d + 1 :]
    strides = x._strides[:d] + tuple(inner) + x._strides[d + 1 :]
    return record(movement.VIEW, (x,), (shape, strides, 0), [(shape, x.dtype)], x.device)[0]


def movedim(x: TensorBase, source: Dims, destination: Dims) -> TensorBase:
    """Move dims `source` to positions `destination` (ints or sequences); a view.

    >>> plast.zeros(2, 3, 4).movedim(0, -1).shape
    plast.Size([3, 4, 2])
    """
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {source} and destination {destination} must have the same length")
    src = [norm_dim(s, x.ndim, "movedim") for s in src]
    dst = [norm_dim(s, x.ndim, "movedim") for s in dst]
    for what, given, ds in (("source", source, src), ("destination", destination, dst)):
        if len(set(ds)) != len(ds):
            raise RepeatedDimError(f"movedim: repeated dim in {what} {given} (each dim may be named once)")
    order = [None] * x.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    order = [next(rest) if o is None else o for o in order]
    return movement.permute(x, tuple(order))


moveaxis = movedim


def expand_as(x: TensorBase, other: TensorBase) -> TensorBase:
    """x expanded to other's shape (a view)."""
    return movement.expand(x, tuple(other.shape))


def view_as(x: TensorBase, other: TensorBase) -> TensorBase:
    """x viewed with other's shape."""
    return movement.view(x, tuple(other.shape))


def reshape_as(x: TensorBase, other: TensorBase) -> TensorBase:
    """x reshaped to other's shape."""
    return movement.reshape(x, tuple(other.shape))


# ---- narrow, select, diagonal ----


def narrow(x: TensorBase, dim: int, start: int, length: int) -> TensorBase:
    """The view x[..., start:start+length, ...] along `dim`.

    >>> plast.arange(6).narrow(0, 2, 3).tolist()
    [2, 3, 4]
    """
    d = norm_dim(dim, x.ndim, "narrow")
    n = x.shape[d]
    start, length = int(start), int(length)
    if not -n <= start <= n:
        raise IndexError(f"narrow: start {start} is out of range for dim {d} of size {n}")
    if start < 0:
        start += n
    if length < 0 or start + length > n:
        raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds the size of dim {d} ({n})")
    shape = x.shape[:d] + (length,) + x.shape[d + 1 :]
    base = [0] * x.ndim
    base[d] = start
    return strided_view(x, shape, _identity_map(x.ndim), base)


def select(x: TensorBase, dim: int, index: int) -> TensorBase:
    """The view x[..., index, ...] along `dim` (that dim removed).

    >>> plast.tensor([[1, 2], [3, 4]]).select(1, -1).tolist()
    [2, 4]
    """
    if x.ndim == 0:
        raise IndexError("select: can't index a 0-d tensor")
    d = norm_dim(dim, x.ndim, "select")
    n = x.shape[d]
    index = int(index)
    if not -n <= index < n:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {n}")
    base = [0] * x.ndim
    base[d] = index % n
    dims_map = tuple(((i, 1),) for i in range(x.ndim) if i != d)
    return strided_view(x, x.shape[:d] + x.shape[d + 1 :], dims_map, base)


def diagonal(x: TensorBase, offset: int = 0, dim1: int = 0, dim2: int = 1) -> TensorBase:
    """The view of the diagonal of dims (dim1, dim2), appended as the last dim (as torch.diagonal).

    >>> plast.tensor([[1, 2], [3, 4]]).diagonal().tolist()
    [1, 4]
    """
    d1 = norm_dim(dim1, x.ndim, "diagonal")
    d2 = norm_dim(dim2, x.ndim, "diagonal")
    if d1 == d2:
        raise ValueError(f"diagonal: dim1 and dim2 must differ, got {dim1} and {dim2}")
    n1, n2 = x.shape[d1], x.shape[d2]
    base = [0] * x.ndim
    if offset >= 0:
        size = max(0, min(n1, n2 - offset))
        base[d2] = offset
    else:
        size = max(0, min(n1 + offset, n2))
        base[d1] = -offset
    rest = [i for i in range(x.ndim) if i not in (d1, d2)]
    dims_map = tuple(((i, 1),) for i in rest) + (((d1, 1), (d2, 1)),)
    shape = tuple(x.shape[i] for i in rest) + (size,)
    return strided_view(x, shape, dims_map, base)


# ---- cat, stack, split, chunk, unbind ----


def _cat_bw(node, g):
    (dim,) = node.args
    out, start = [], 0
    for t in node.inputs:
        n = t.shape[dim]
        out.append(narrow(g, dim, start, n))
        start += n
    return tuple(out)


CAT = register("cat", cpu=kix.cat, backward=_cat_bw, saves_inputs=False)


def _tensor_list(tensors, op):
    if isinstance(tensors, TensorBase):
        raise TypeError(f"{op}: expected a sequence of tensors, got a single tensor (wrap it in a list)")
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty list of tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, TensorBase):
            raise TypeError(f"{op}: expected tensors, got {type(t).__name__} at position {i}")
    dev = tensors[0].device
    for t in tensors:
        if t.device != dev:
            raise DeviceMismatchError(
                f"{op}: tensors are on {dev} and {t.device}; move them to one device first"
            )
    return tensors


def cat(tensors: Sequence[TensorBase], dim: int = 0) -> TensorBase:
    """Concatenate tensors along an existing dim (dtypes promote as in torch).

    >>> plast.cat([plast.zeros(2, 3), plast.ones(1, 3)]).shape
    plast.Size([3, 3])
    """
    if _ac.active:  # autocast: on its PROMOTE list
        tensors = _autocast.promote_args(tensors)
    tensors = _tensor_list(tensors, "cat")
    # torch keeps accepting 1-D empty tensors next to tensors of any rank, and skips them
    real = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]
    ref = real[0]
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise ShapeError(f"cat: zero-dimensional tensor (at position {i}) can't be concatenated")
    d = norm_dim(dim, ref.ndim, "cat")
    for t in real:
        if t.ndim != ref.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape)) if i != d):
            raise ShapeError(
                f"cat: sizes of tensors must match except in dimension {d}; got {tuple(ref.shape)} and "
                f"{tuple(t.shape)}"
            )
    dt = real[0].dtype
    for t in real[1:]:
        dt = dtypes.promote(dt, t.dtype)
    real = [movement.cast(t, dt) for t in real]
    if len(real) == 1:
        return movement.clone(real[0])
    shape = ref.shape[:d] + (sum(t.shape[d] for t in real),) + ref.shape[d + 1 :]
    return record(CAT, tuple(real), (d,), [(shape, dt)], ref.device)[0]


concat = cat
concatenate = cat


def stack(tensors: Sequence[TensorBase], dim: int = 0) -> TensorBase:
    """Join equally shaped tensors along a new dim.

    >>> plast.stack([plast.zeros(2), plast.ones(2)], dim=1).shape
    plast.Size([2, 2])
    """
    if _ac.active:  # autocast: on its PROMOTE list
        tensors = _autocast.promote_args(tensors)
    tensors = _tensor_list(tensors, "stack")
    shape0 = tuple(tensors[0].shape)
    for i, t in enumerate(tensors):
        if tuple(t.shape) != shape0:
            raise ShapeError(
                f"stack: expects each tensor to be equal size, but got {shape0} at entry 0 and "
                f"{tuple(t.shape)} at entry {i}"
            )
    d = norm_dim(dim, len(shape0) + 1, "stack")
    return cat([unsqueeze(t, d) for t in tensors], d)


def hstack(tensors: Sequence[TensorBase]) -> TensorBase:
    """Concatenate along dim 1 (dim 0 for 1-D tensors)."""
    tensors = _tensor_list(tensors, "hstack")
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors: Sequence[TensorBase]) -> TensorBase:
    """Concatenate along dim 0, treating 1-D tensors as rows."""
    tensors = _tensor_list(tensors, "vstack")
    return cat([unsqueeze(t, 0) if t.ndim <= 1 else t for t in tensors], 0)


def split(x: TensorBase, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[TensorBase, ...]:
    """Views of consecutive pieces along `dim`: pieces of one size (the last may be smaller) or of given sizes.

    >>> [t.shape[0] for t in plast.zeros(5).split(2)]
    [2, 2, 1]
    """
    d = norm_dim(dim, x.ndim, "split")
    n = x.shape[d]
    if isinstance(split_size_or_sections, numbers.Integral):
        s = int(split_size_or_sections)
        if s < 0 or (s == 0 and n != 0):
            raise ValueError(f"split: split_size must be positive, got {s} (dim {d} has size {n})")
        sizes = ([s] * (n // s) + ([n % s] if n % s else [])) if s else []
        sizes = sizes or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ShapeError(
                f"split: split sizes {tuple(sizes)} must be non-negative and sum exactly to the size of dim "
                f"{d} ({n})"
            )
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, d, start, s))
        start += s
    return tuple(out)


def _split_copy_bw(node, *grads):
    # one concatenation, as torch's split backward: the pieces' gradients, zeros for the pieces without one
    (dim,) = node.args
    specs = node.specs
    dev = node.inputs[0].device
    parts = [
        g if g is not None else zeros(s, dtype=dt, device=dev)
        for g, (s, dt) in zip(grads, specs, strict=True)
    ]
    return (cat(parts, dim),)


SPLIT_COPY = register("split_copy", cpu=kix.split_copy, backward=_split_copy_bw, saves_inputs=False)


def split_copy(
    x: TensorBase, split_size_or_sections: int | Sequence[int], dim: int = 0
) -> tuple[TensorBase, ...]:
    """``split`` with each piece a copy (torch.split_copy; with sections, torch.split_with_sizes_copy), made by one
    node whose backward is one concatenation of the pieces' gradients. Where many pieces of one tensor each get
    a gradient (a sequence projection split into time steps), the views of ``split`` would each scatter theirs
    into a zero tensor the size of the whole, and the sum of those costs the square of the piece count.

    >>> [t.shape[0] for t in plast.split_copy(plast.zeros(5), 2)]
    [2, 2, 1]
    """
    views = split(x, split_size_or_sections, dim)
    d = norm_dim(dim, x.ndim, "split_copy")
    return tuple(record(SPLIT_COPY, (x,), (d,), [(tuple(v.shape), x.dtype) for v in views], x.device))


def chunk(x: TensorBase, chunks: int, dim: int = 0) -> tuple[TensorBase, ...]:
    """Split into `chunks` views of (nearly) equal size along `dim` (possibly fewer, as torch does).

    >>> [t.shape[0] for t in plast.zeros(5).chunk(3)]
    [2, 2, 1]
    """
    chunks = int(chunks)
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    d = norm_dim(dim, x.ndim, "chunk")
    n = x.shape[d]
    if n == 0:
        return split(x, [0] * chunks, d)
    return split(x, -(-n // chunks), d)


def unbind(x: TensorBase, dim: int = 0) -> tuple[TensorBase, ...]:
    """The views x.select(dim, i) for every i.

    >>> [t.tolist() for t in plast.tensor([[1, 2], [3, 4]]).unbind(1)]
    [[1, 3], [2, 4]]
    """
    d = norm_dim(dim, x.ndim, "unbind")
    return tuple(select(x, d, i) for i in range(x.shape[d]))


# ---- tril, triu, flip, roll, repeat, tile ----


def _tril_bw(node, g):
    return (_tri(node.op, g, node.args[0]),)


TRIL = register("tril", cpu=kix.tril, backward=_tril_bw, saves_inputs=False)
TRIU = register("triu", cpu=kix.tril, backward=_tril_bw, saves_inputs=False)


def _tri(op, x, diagonal):
    if x.ndim < 2:
        raise ShapeError(f"{op.name}: needs a tensor with at least 2 dims, got shape {tuple(x.shape)}")
    return record(op, (x,), (int(diagonal),), [(x.shape, x.dtype)], x.device)[0]


def tril(x: TensorBase, diagonal: int = 0) -> TensorBase:
    """The lower triangle of the last two dims (elements above `diagonal` set to 0).

    >>> plast.ones(2, 2).tril().tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    return _tri(TRIL, x, diagonal)


def triu(x: TensorBase, diagonal: int = 0) -> TensorBase:
    """The upper triangle of the last two dims (elements below `diagonal` set to 0).

    >>> plast.ones(2, 2).triu().tolist()
    [[1.0, 1.0], [0.0, 1.0]]
    """
    return _tri(TRIU, x, diagonal)


def _flip_bw(node, g):
    return (flip(g, node.args[0]),)


FLIP = register("flip", cpu=kix.flip, backward=_flip_bw, saves_inputs=False)


def _dims_arg(dims, ndim, op):
    if isinstance(dims, int):
        dims = (dims,)
    out = tuple(norm_dim(d, ndim, op) for d in dims)
    if len(set(out)) != len(out):
        dup = next(d for d in out if out.count(d) > 1)
        raise RepeatedDimError(f"{op}: dim {dup} appears multiple times in the list of dims {tuple(dims)}")
    return out


def flip(x: TensorBase, dims: Dims) -> TensorBase:
    """Reverse the order of elements along `dims` (a copy, as in torch).

    >>> plast.tensor([1, 2, 3]).flip(0).tolist()
    [3, 2, 1]
    """
    dims = tuple(sorted(_dims_arg(dims, x.ndim, "flip")))
    if not dims or x.ndim == 0:
        return movement.clone(x)
    return record(FLIP, (x,), (dims,), [(x.shape, x.dtype)], x.device)[0]


def fliplr(x: TensorBase) -> TensorBase:
    if x.ndim < 2:
        raise ShapeError(f"fliplr: needs at least 2 dims, got shape {tuple(x.shape)}")
    return flip(x, 1)


def flipud(x: TensorBase) -> TensorBase:
    if x.ndim < 1:
        raise ShapeError("flipud: needs at least 1 dim, got a 0-d tensor")
    return flip(x, 0)


def roll(x: TensorBase, shifts: int | Sequence[int], dims: Dims | None = None) -> TensorBase:
    """Rotate elements along `dims` by `shifts` (the flattened tensor when dims is None).

    >>> plast.tensor([1, 2, 3, 4]).roll(1).tolist()
    [4, 1, 2, 3]
    """
    if dims is None:
        if not isinstance(shifts, int):
            if len(shifts) != 1:
                raise ValueError(f"roll: with dims=None, shifts must be one int, got {shifts}")
            shifts = shifts[0]
        return movement.reshape(roll(flatten(x), shifts, 0), x.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    out = x
    for s, d in zip(shifts, dims):
        d = norm_dim(d, x.ndim, "roll")
        n = x.shape[d]
        s = s % n if n else 0
        if s:
            out = cat([narrow(out, d, n - s, s), narrow(out, d, 0, n - s)], d)
    return movement.clone(out) if out is x else out


def repeat(x: TensorBase, *sizes: SizeArg) -> TensorBase:
    """Tile x `sizes[i]` times along each dim (len(sizes) >= x.ndim; extra leading dims are new).

    >>> plast.tensor([1, 2]).repeat(2, 2).tolist()
    [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) < x.ndim:
        raise ShapeError(
            f"repeat: the number of repeat sizes ({len(sizes)}) can't be smaller than the number of dims of the "
            f"tensor ({x.ndim})"
        )
    if any(s < 0 for s in sizes):
        raise ValueError(f"repeat: sizes must be non-negative, got {sizes}")
    shape = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
    xs = movement.reshape(x, shape)
    inter = []
    for s in shape:
        inter += [1, s]
    xs = movement.reshape(xs, tuple(inter))
    target = []
    for r, s in zip(sizes, shape):
        target += [r, s]
    out = movement.expand(xs, tuple(target))
    return movement.reshape(movement.contiguous(out), tuple(r * s for r, s in zip(sizes, shape)))


def tile(x: TensorBase, dims: int | Sequence[int]) -> TensorBase:
    """torch.tile: repeat, with `dims` padded with leading 1s to x's rank."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(dims) < x.ndim:
        dims = (1,) * (x.ndim - len(dims)) + dims
    return repeat(x, dims)


# ---- pad ----


__all__ = [
    "squeeze",
    "unsqueeze",
    "flatten",
    "unflatten",
    "movedim",
    "moveaxis",
    "narrow",
    "select",
    "diagonal",
    "cat",
    "concat",
    "concatenate",
    "stack",
    "hstack",
    "vstack",
    "split",
    "split_copy",
    "chunk",
    "unbind",
    "tril",
    "triu",
    "flip",
    "fliplr",
    "flipud",
    "roll",
    "tile",
]
