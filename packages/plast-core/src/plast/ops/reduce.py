"""Reductions and sorting: sum, mean, max/min, amax/amin, argmax/argmin, var/std, norm, prod, cumsum, sort,
argsort, topk, multinomial, all/any.

Primitives with kernels: sum, amax/amin, argmax/argmin, prod, cumsum, norm (p-norms other than 1 and inf),
argsort, topk (indices), all/any, multinomial, plus private helpers for backward rules (take/put along a dim,
tie weights, products of the other elements). Values of max(dim)/sort/topk are the input taken at the
indices, so their gradient flows back through those indices to exactly one element each, like torch.
"""

from __future__ import annotations

import builtins
import collections
import math

from .._core import autocast_state as _ac
from .._core import dtypes
from .._core._structs import TensorBase
from .._core.errors import DTypeError, RepeatedDimError, ShapeError
from .._core.hints import Dims, DTypeLike
from .._core.shapes import norm_dim, numel
from ..graph._graph import record
from ..graph.tape import tracing
from ..kernels.cpu import kernels_reduce as rk
from . import _reduce, movement, unary
from . import autocast as _autocast
from .creation import eye, rand
from .elementwise import add, div, mul, sub
from .linalg import matmul
from .pointwise import maximum, minimum, where
from .random import Generator
from .registry import register
from .unary import exp, log, sign

# torch.return_types look-alikes: tuples with .values and .indices
_MaxResult = collections.namedtuple("max", ["values", "indices"])
_MinResult = collections.namedtuple("min", ["values", "indices"])
_SortResult = collections.namedtuple("sort", ["values", "indices"])
_TopkResult = collections.namedtuple("topk", ["values", "indices"])


_dims, _reduced_shape = _reduce.reduced_dims, _reduce.reduced_shape  # compiled (ops/_reduce.pyx)


def _one_dim(x, dim, op):
    """(x viewed as at least 1-d, normalized dim): torch lets 0-d tensors reduce over dim 0 or -1."""
    d = norm_dim(dim, x.ndim, op)
    if x.ndim == 0:
        return movement.reshape(x, (1,)), 0
    return x, d


def _output(node, i=0):
    """Output `i` of `node` (reused in backward); recomputed if the caller dropped it."""
    t = node.outputs[i]()
    if t is None:
        t = record(node.op, node.inputs, node.args, node.specs, node.inputs[0].device)[i]
    return t


def _need_float(x, op):
    if not x.dtype.is_floating_point:
        raise DTypeError(
            f"{op}(): needs a floating point input, got {x.dtype}; convert it with .float() first"
        )


def _need_nonempty(x, dims, op):
    for d in dims:
        if x.shape[d] == 0:
            raise IndexError(
                f"{op}(): Expected reduction dim {d} to have non-zero size (input shape {tuple(x.shape)}); "
                "the operation has no identity"
            )


# ---------------------------------------------------------------- sum, mean


# compiled (ops/_reduce.pyx, with the sum row): losses end in a mean, and autograd sums broadcast gradients with
# sum_to_shape
SUM = _reduce.SUM
sum, mean, sum_to_shape = _reduce.sum, _reduce.mean, _reduce.sum_to_shape  # noqa: A001


# ---------------------------------------------------------------- gather/scatter along a dim (private)
# NOTE: backward helpers for sort/topk/max(dim); the indices they get are unique along `dim`.


def _take_bw(node, g):
    x, idx = node.inputs
    return (_put_along(g, idx, node.args[0], x.shape), None)


def _put_bw(node, g):
    _, idx = node.inputs
    return (_take_along(g, idx, node.args[0]), None)


TAKE = register("reduce_take_along", cpu=rk.take_along, backward=_take_bw)
PUT = register("reduce_put_along", cpu=rk.put_along, backward=_put_bw)


def _take_along(x, idx, dim):
    return record(TAKE, (x, idx), (dim,), [(idx.shape, x.dtype)], x.device)[0]


def _put_along(g, idx, dim, shape):
    shape = tuple(shape)
    return record(PUT, (g, idx), (dim, shape), [(shape, g.dtype)], g.device)[0]


# ---------------------------------------------------------------- amax / amin, max / min


TIE_WEIGHTS = register("reduce_tie_weights", cpu=rk.tie_weights)


def _minmax_bw(node, g):
    x = node.inputs[0]
    dims, keepdim = node.args
    m = _output(node)
    if not keepdim:
        keep = _reduced_shape(x.shape, dims, True)
        g, m = movement.reshape(g, keep), movement.reshape(m, keep)
    w = record(TIE_WEIGHTS, (x, m), (dims,), [(x.shape, x.dtype)], x.device)[0]
    return (mul(movement.expand(g, x.shape), w),)


AMAX = register("amax", cpu=rk.minmax, backward=_minmax_bw)
AMIN = register("amin", cpu=rk.minmax, backward=_minmax_bw)


def _full_empty_error(name, x):
    return RuntimeError(
        f"{name}(): Expected reduction dim to be specified for input.numel() == 0 (input shape {tuple(x.shape)}). "
        "Specify the reduction dim with the 'dim' argument."
    )


def _amaxmin(op, x, dim, keepdim, name=None):
    if x.numel() == 0 and (dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0)):
        raise _full_empty_error(name or op.name, x)
    dims = _dims(x, dim, op.name)
    _need_nonempty(x, dims, op.name)
    shape = _reduced_shape(x.shape, dims, keepdim)
    return record(op, (x,), (dims, keepdim), [(shape, x.dtype)], x.device)[0]


def amax(x: TensorBase, dim: Dims = (), keepdim: bool = False) -> TensorBase:
    """Maximum over `dim` (all dims when empty); the gradient is split evenly among ties, like torch.

    >>> plast.tensor([[1.0, 5.0], [3.0, 2.0]]).amax(0).tolist()
    [3.0, 5.0]
    """
    return _amaxmin(AMAX, x, dim, keepdim)


def amin(x: TensorBase, dim: Dims = (), keepdim: bool = False) -> TensorBase:
    """Minimum over `dim` (all dims when empty); the gradient is split evenly among ties, like torch.

    >>> plast.tensor([[1.0, 5.0], [3.0, 2.0]]).amin(1).tolist()
    [1.0, 2.0]
    """
    return _amaxmin(AMIN, x, dim, keepdim)


ARGMAX = register("argmax", cpu=rk.argminmax)
ARGMIN = register("argmin", cpu=rk.argminmax)


def _arg(op, x, dim, keepdim):
    if dim is None:
        if x.numel() == 0:
            raise IndexError(
                f"{op.name}(): Expected reduction dim to be specified for input.numel() == 0 "
                f"(input shape {tuple(x.shape)})"
            )
        shape = (1,) * x.ndim if keepdim else ()
        return record(op, (x,), (None, keepdim), [(shape, dtypes.int64)], x.device)[0]
    d = norm_dim(dim, x.ndim, op.name)
    if x.ndim == 0:
        return record(op, (x,), (None, False), [((), dtypes.int64)], x.device)[0]
    _need_nonempty(x, (d,), op.name)
    shape = _reduced_shape(x.shape, (d,), keepdim)
    return record(op, (x,), (d, keepdim), [(shape, dtypes.int64)], x.device)[0]


def argmax(x: TensorBase, dim: int | None = None, keepdim: bool = False) -> TensorBase:
    """Index of the maximum (of the flattened tensor when dim is None; the first one on ties), int64.

    >>> plast.tensor([[1.0, 5.0], [3.0, 2.0]]).argmax().item()
    1
    """
    return _arg(ARGMAX, x, dim, keepdim)


def argmin(x: TensorBase, dim: int | None = None, keepdim: bool = False) -> TensorBase:
    """Index of the minimum (of the flattened tensor when dim is None; the first one on ties), int64.

    >>> plast.tensor([[1.0, 5.0], [3.0, 2.0]]).argmin(1).tolist()
    [0, 1]
    """
    return _arg(ARGMIN, x, dim, keepdim)


def _minmax(name, x, dim, keepdim, other):
    if isinstance(dim, TensorBase) or other is not None:
        fn = maximum if name == "max" else minimum  # torch.max(a, b) is torch.maximum(a, b)
        return fn(x, dim if isinstance(dim, TensorBase) else other)
    if dim is None:
        if keepdim:
            raise TypeError(
                f"{name}(): keepdim needs dim; use {name}(x, dim, keepdim=True) or a{name}(x, keepdim=True)"
            )
        return _amaxmin(AMAX if name == "max" else AMIN, x, None, False, name)
    x1, d = _one_dim(x, dim, name)
    _need_nonempty(x1, (d,), name)
    idx = _arg(ARGMAX if name == "max" else ARGMIN, x1, d, True)
    values = _take_along(x1, idx, d)
    if not keepdim or x.ndim == 0:
        shape = _reduced_shape(x.shape, (d,) if x.ndim else (), keepdim)
        values, idx = movement.reshape(values, shape), movement.reshape(idx, shape)
    return (_MaxResult if name == "max" else _MinResult)(values, idx)


def max(  # noqa: A001
    x: TensorBase,
    dim: int | TensorBase | None = None,
    keepdim: bool = False,
    *,
    other: TensorBase | None = None,
) -> TensorBase | tuple[TensorBase, TensorBase]:
    """torch.max: the maximum of all elements (a 0-d tensor; ties share the gradient), or with `dim` a
    ``(values, indices)`` tuple (the gradient goes to the returned index), or with a tensor as second argument
    the elementwise ``plast.maximum``.

    >>> v, i = plast.tensor([[1.0, 5.0], [3.0, 2.0]]).max(1)
    >>> v.tolist(), i.tolist()
    ([5.0, 3.0], [1, 0])
    """
    return _minmax("max", x, dim, keepdim, other)


def min(  # noqa: A001
    x: TensorBase,
    dim: int | TensorBase | None = None,
    keepdim: bool = False,
    *,
    other: TensorBase | None = None,
) -> TensorBase | tuple[TensorBase, TensorBase]:
    """torch.min: like ``max`` for the minimum.

    >>> plast.tensor([[1.0, 5.0], [3.0, 2.0]]).min().item()
    1.0
    """
    return _minmax("min", x, dim, keepdim, other)


# ---------------------------------------------------------------- var / std


def var(
    x: TensorBase,
    dim: Dims | bool | None = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> TensorBase:
    """Variance over `dim` with Bessel's `correction` (default 1; ``unbiased=False`` means 0), like torch.

    >>> plast.tensor([1.0, 2.0, 3.0, 4.0]).var().item()
    1.6666666269302368
    """
    if isinstance(dim, bool):  # torch.var(x, unbiased)
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError("var()/std(): pass either unbiased= or correction=, not both")
    if correction is None:
        correction = 0 if unbiased is False else 1
    _need_float(x, "var/std")
    dims = _dims(x, dim, "var")
    n = numel([x.shape[d] for d in dims])
    d = sub(x, mean(x, dims, keepdim=True))
    s = sum(mul(d, d), dims, keepdim)
    return div(s, float(builtins.max(0, n - correction)))


def _safe_sqrt_bw(node, g):
    return (mul(g, mul(_safe_inv(_output(node)), 0.5)),)


# sqrt whose gradient is 0 (not inf) at 0, so std of constant data has a zero gradient, like torch
SAFE_SQRT = register("reduce_safe_sqrt", cpu=rk.sqrt, backward=_safe_sqrt_bw)


def std(
    x: TensorBase,
    dim: Dims | bool | None = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> TensorBase:
    """Standard deviation: sqrt of ``var`` with the same arguments.

    >>> round(plast.tensor([1.0, 3.0]).std().item(), 4)
    1.4142
    """
    v = var(x, dim, unbiased, keepdim, correction=correction)
    return record(SAFE_SQRT, (v,), (), [(v.shape, v.dtype)], v.device)[0]


# ---------------------------------------------------------------- norm


def _safe_inv(n):
    """1/n where n > 0 and 0 where n == 0 (n >= 0), in plast ops: a zero norm gets a zero gradient."""
    s = sign(n)
    return div(s, add(sub(n, s), 1.0))


def _pow_pos(t, e):
    """t ** e for t > 0, in plast ops (exp/log)."""
    return exp(mul(log(t), e))


def _norm_bw(node, g):
    x = node.inputs[0]
    p, dims, keepdim = node.args
    n = _output(node)
    if not keepdim:
        keep = _reduced_shape(x.shape, dims, True)
        g, n = movement.reshape(g, keep), movement.reshape(n, keep)
    if p == 2.0:
        scale = mul(g, _safe_inv(n))
        return (mul(x, movement.expand(scale, x.shape)),)
    # d/dx (sum |x|^p)^(1/p) = sign(x) |x|^(p-1) / n^(p-1); zeros of x (and a zero norm) get 0
    ax = unary.abs(x)
    nz = sign(ax)
    xt = mul(sign(x), _pow_pos(add(sub(ax, nz), 1.0), p - 1.0))
    ns = sign(n)
    scale = mul(g, _safe_inv(mul(_pow_pos(add(sub(n, ns), 1.0), p - 1.0), ns)))
    return (mul(xt, movement.expand(scale, x.shape)),)


NORM = register("norm", cpu=rk.norm, backward=_norm_bw)


def norm(
    x: TensorBase,
    p: float | str = "fro",
    dim: Dims | None = None,
    keepdim: bool = False,
    dtype: DTypeLike | None = None,
) -> TensorBase:
    """torch.norm: the vector p-norm over `dim` (all dims when None) for p = 2 / 'fro' (default), 1, inf, -inf,
    0 or any other number, even over two dims, as in torch; p='nuc' is the nuclear norm of the matrices over
    two dims (see ``matrix_norm``). A zero norm has a zero gradient, like torch.

    >>> plast.tensor([3.0, 4.0]).norm().item()
    5.0
    """
    if dtype is not None:
        x = movement.cast(x, dtype)
    _need_float(x, "norm")
    if isinstance(p, str):
        # as torch.norm: 'fro' over at most two dims is the vector 2-norm; 'nuc' (and 'fro' over more dims,
        # which then fails) is a matrix norm over two dims (all of a 2-D input's when dim is None)
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            p = 2.0
        else:
            mdim = tuple(range(x.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
            return matrix_norm(x, p, mdim, keepdim)
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"norm(): p must be a number or 'fro', got {type(p).__name__}")
    p = float(p)
    dims = _dims(x, dim, "norm")
    if math.isinf(p):
        if builtins.any(x.shape[d] == 0 for d in dims):
            raise RuntimeError(
                f"norm(): cannot compute the {'-' if p < 0 else ''}inf norm over an empty dim of shape "
                f"{tuple(x.shape)}: the operation has no identity"
            )
        return (amax if p > 0 else amin)(unary.abs(x), dims, keepdim)
    if p == 1.0:
        return sum(unary.abs(x), dims, keepdim)
    if p == 0.0:
        return sum(sign(unary.abs(x)), dims, keepdim)
    shape = _reduced_shape(x.shape, dims, keepdim)
    return record(NORM, (x,), (p, dims, keepdim), [(shape, x.dtype)], x.device)[0]


# ---------------------------------------------------------------- matrix norms (torch.linalg semantics)
# NOTE: plast has no plast.linalg namespace yet; matrix_norm and vector_norm below are torch.linalg's functions,
# ready to be re-exported there. torch.norm itself reaches only 'nuc' (and 'fro').


def _svd_outputs(node):
    outs = [r() for r in node.outputs]
    if builtins.any(o is None for o in outs):
        outs = record(node.op, node.inputs, node.args, node.specs, node.inputs[0].device)
    return outs


def _svd_bw(node, gu, gs, gvh):
    """Reduced SVD's backward for real matrices. With only gS (singular-value norms) it is U diag(gS) Vh; the
    gU / gVh terms (reached by higher derivatives of those norms) follow the standard formula with
    F[i, j] = 1 / (s_j^2 - s_i^2) off the diagonal, so repeated or zero singular values give inf/nan, as in torch."""
    u, s, vh = _svd_outputs(node)
    k = s.shape[-1]
    row = movement.reshape(s, tuple(s.shape[:-1]) + (1, k))  # scales columns
    col = movement.reshape(s, tuple(s.shape) + (1,))  # scales rows
    eye_k = eye(k, dtype=s.dtype, device=s.device)
    inner = mul(eye_k, movement.reshape(gs, tuple(gs.shape[:-1]) + (1, k))) if gs is not None else None
    extra = None
    if gu is not None or gvh is not None:
        diag = movement.cast(eye_k, dtypes.bool_)
        s2 = mul(s, s)
        e = sub(
            movement.reshape(s2, tuple(s2.shape[:-1]) + (1, k)), movement.reshape(s2, tuple(s2.shape) + (1,))
        )
        f = where(diag, 0.0, div(1.0, where(diag, 1.0, e)))
    if gu is not None:
        utgu = matmul(movement.transpose(u, -1, -2), gu)
        j = mul(mul(f, sub(utgu, movement.transpose(utgu, -1, -2))), row)
        inner = j if inner is None else add(inner, j)
        # (I - U U^T) gU S^-1 Vh
        extra = matmul(div(sub(gu, matmul(u, utgu)), row), vh)
    if gvh is not None:
        v = movement.transpose(vh, -1, -2)
        vtgv = matmul(vh, movement.transpose(gvh, -1, -2))
        kk = mul(col, mul(f, sub(vtgv, movement.transpose(vtgv, -1, -2))))
        inner = kk if inner is None else add(inner, kk)
        # U S^-1 gV^T (I - V V^T)
        ev = matmul(div(u, row), sub(gvh, matmul(matmul(gvh, v), vh)))
        extra = ev if extra is None else add(extra, ev)
    ga = matmul(matmul(u, inner), vh)
    return (ga if extra is None else add(ga, extra),)


SVD = register("reduce_svd", cpu=rk.svd, backward=_svd_bw, n_outputs=3)


def _svdvals(a):
    """Singular values of the matrices over a's last two dims (descending), differentiable."""
    m, n = a.shape[-2], a.shape[-1]
    k = builtins.min(m, n)
    batch = tuple(a.shape[:-2])
    specs = [(batch + (m, k), a.dtype), (batch + (k,), a.dtype), (batch + (k, n), a.dtype)]
    return record(SVD, (a,), (), specs, a.device)[1]


def _matrix_dims(x, dim, op):
    if x.ndim < 2:
        raise ShapeError(
            f"{op}: needs at least 2 dims (a matrix or a batch of them), got shape {tuple(x.shape)}"
        )
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ValueError(f"{op}: dim must be a 2-tuple of dims, got {dim!r}")
    d0, d1 = (norm_dim(d, x.ndim, op) for d in dim)
    if d0 == d1:
        raise RepeatedDimError(f"{op}: dims must be different, got {tuple(dim)}")
    return d0, d1


def matrix_norm(
    x: TensorBase,
    ord: float | str = "fro",  # noqa: A002
    dim: tuple[int, int] | list[int] = (-2, -1),
    keepdim: bool = False,
    *,
    dtype: DTypeLike | None = None,
) -> TensorBase:
    """torch.linalg.matrix_norm: the matrix norm of the matrices over the two dims `dim` (rows, columns):
    'fro', 'nuc' (sum of singular values), 2 / -2 (largest / smallest singular value), inf / -inf (max / min
    row sum of |x|), 1 / -1 (max / min column sum of |x|). Singular-value norms differentiate through the SVD
    (U diag(g) V^T); ties among maxima share the gradient, as in torch.

    >>> round(plast.ops.reduce.matrix_norm(plast.tensor([[3.0, 0.0], [0.0, 4.0]]), "nuc").item(), 4)
    7.0
    """
    if dtype is not None:
        x = movement.cast(x, dtype)
    _need_float(x, "linalg.matrix_norm")
    d0, d1 = _matrix_dims(x, dim, "linalg.matrix_norm")
    if isinstance(ord, bool) or not (isinstance(ord, str) or isinstance(ord, (int, float))):
        raise TypeError(
            f"linalg.matrix_norm: ord must be a number or 'fro' / 'nuc', got {type(ord).__name__}"
        )
    kept = tuple(1 if i in (d0, d1) else sz for i, sz in enumerate(x.shape))
    if ord == "fro":
        return norm(x, 2.0, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        perm = [i for i in range(x.ndim) if i not in (d0, d1)] + [d0, d1]
        sv = _svdvals(movement.permute(x, *perm))
        if ord == "nuc":
            r = sum(sv, -1)
        else:
            r = (amax if ord == 2 else amin)(sv, -1)
        return movement.reshape(r, kept) if keepdim else r
    if ord in (1, -1, math.inf, -math.inf):
        # |ord| = 1: column sums (over the row dim d0), then max/min over columns; inf: row sums, over rows
        summed, over = (d0, d1) if builtins.abs(ord) == 1 else (d1, d0)
        r = (amax if ord > 0 else amin)(sum(unary.abs(x), summed, keepdim=True), over, keepdim=True)
        return r if keepdim else movement.reshape(r, _reduced_shape(x.shape, (d0, d1), False))
    raise ValueError(
        f"linalg.matrix_norm: order {ord!r} is not supported; use 'fro', 'nuc', 2, -2, 1, -1, inf or -inf"
    )


def vector_norm(
    x: TensorBase,
    ord: float = 2,  # noqa: A002
    dim: Dims | None = None,
    keepdim: bool = False,
    *,
    dtype: DTypeLike | None = None,
) -> TensorBase:
    """torch.linalg.vector_norm: the `ord`-norm of x flattened (dim None) or over `dim` (ord a number).

    >>> plast.ops.reduce.vector_norm(plast.tensor([[3.0], [4.0]])).item()
    5.0
    """
    if isinstance(ord, (str, bool)) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    return norm(x, ord, dim, keepdim, dtype)


# ---------------------------------------------------------------- prod


# prod's derivatives of every order are contractions of "products of all elements but some": with vectors
# g_1..g_r along `dim`, out[k] = sum over distinct i_1..i_r != k of g_1[i_1]..g_r[i_r] prod_{j not in {k, i..}} x[j].
# r = 0 is prod_others, r = 1 its derivative; each derivative adds one vector (the upstream gradient), so one
# backward rule serves every order.


def _prod_excl(x, gs, dim):
    op = PROD_OTHERS if not gs else PROD_OTHERS_BW if len(gs) == 1 else PROD_EXCL
    return record(op, (x, *gs), (dim,), [(x.shape, x.dtype)], x.device)[0]


def _prod_excl_bw(node, h):
    x, gs = node.inputs[0], node.inputs[1:]
    (dim,) = node.args
    gx = _prod_excl(x, (h, *gs), dim) if x.requires_grad else None
    ggs = tuple(
        _prod_excl(x, (h, *gs[:i], *gs[i + 1 :]), dim) if g.requires_grad else None for i, g in enumerate(gs)
    )
    return (gx, *ggs)


PROD_OTHERS = register("reduce_prod_others", cpu=rk.prod_others, backward=_prod_excl_bw)
PROD_OTHERS_BW = register("reduce_prod_others_bw", cpu=rk.prod_others_bw, backward=_prod_excl_bw)
PROD_EXCL = register("reduce_prod_excl", cpu=rk.prod_excl, backward=_prod_excl_bw)


def _prod_bw(node, g):
    x = node.inputs[0]
    dim, keepdim = node.args
    if dim is None:
        flat = movement.reshape(x, (x.numel(),))
        others = movement.reshape(_prod_excl(flat, (), 0), x.shape)
        g = movement.reshape(g, (1,) * x.ndim)
    else:
        others = _prod_excl(x, (), dim)
        if not keepdim:
            g = movement.reshape(g, _reduced_shape(x.shape, (dim,), True))
    return (mul(movement.expand(g, x.shape), others),)


PROD = register("prod", cpu=rk.prod, backward=_prod_bw)


def prod(
    x: TensorBase, dim: int | None = None, keepdim: bool = False, *, dtype: DTypeLike | None = None
) -> TensorBase:
    """Product of all elements, or along one `dim`. Integer and bool inputs multiply in int64, like torch.
    The gradient is exact when inputs hold zeros (products of the other elements, no division).

    >>> plast.tensor([[1.0, 2.0], [3.0, 4.0]]).prod(0).tolist()
    [3.0, 8.0]
    """
    if _ac.active:  # autocast: on its FP32 list
        (x,) = _autocast.fp32_args(x)
    out_dtype = (
        dtypes.as_dtype(dtype)
        if dtype is not None
        else (x.dtype if x.dtype.is_floating_point else dtypes.int64)
    )
    if x.dtype is not out_dtype:
        x = movement.cast(x, out_dtype)
    if dim is None:
        return record(PROD, (x,), (None, False), [((), out_dtype)], x.device)[0]
    x1, d = _one_dim(x, dim, "prod")
    out = record(PROD, (x1,), (d, keepdim), [(_reduced_shape(x1.shape, (d,), keepdim), out_dtype)], x.device)[
        0
    ]
    return movement.reshape(out, ()) if x.ndim == 0 else out


# ---------------------------------------------------------------- cumsum


def _cumsum_bw(node, g):
    dim, reverse = node.args
    return (record(CUMSUM, (g,), (dim, not reverse), [(g.shape, g.dtype)], g.device)[0],)


CUMSUM = register("cumsum", cpu=rk.cumsum, backward=_cumsum_bw)


def cumsum(x: TensorBase, dim: int, *, dtype: DTypeLike | None = None) -> TensorBase:
    """Running sum along `dim`. Integer and bool inputs sum in int64, like torch.

    >>> plast.tensor([1, 2, 3]).cumsum(0).tolist()
    [1, 3, 6]
    """
    out_dtype = (
        dtypes.as_dtype(dtype)
        if dtype is not None
        else (x.dtype if x.dtype.is_floating_point else dtypes.int64)
    )
    if x.dtype is not out_dtype:
        x = movement.cast(x, out_dtype)
    x1, d = _one_dim(x, dim, "cumsum")
    out = record(CUMSUM, (x1,), (d, False), [(x1.shape, out_dtype)], x.device)[0]
    return movement.reshape(out, ()) if x.ndim == 0 else out


# ---------------------------------------------------------------- sort, argsort, topk

ARGSORT = register("argsort", cpu=rk.argsort)
TOPK = register("topk", cpu=rk.topk)


def sort(
    x: TensorBase, dim: int = -1, descending: bool = False, stable: bool = False
) -> tuple[TensorBase, TensorBase]:
    """Sorted values along `dim` and their indices (int64). Always stable: equal elements keep their order;
    NaN sorts as the largest value, like torch.

    >>> v, i = plast.tensor([3.0, 1.0, 2.0]).sort()
    >>> v.tolist(), i.tolist()
    ([1.0, 2.0, 3.0], [1, 2, 0])
    """
    x1, d = _one_dim(x, dim, "sort")
    idx = record(ARGSORT, (x1,), (d, bool(descending)), [(x1.shape, dtypes.int64)], x.device)[0]
    values = _take_along(x1, idx, d)
    if x.ndim == 0:
        values, idx = movement.reshape(values, ()), movement.reshape(idx, ())
    return _SortResult(values, idx)


def argsort(x: TensorBase, dim: int = -1, descending: bool = False, stable: bool = False) -> TensorBase:
    """Indices that sort `x` along `dim` (int64); see ``sort``.

    >>> plast.tensor([3.0, 1.0, 2.0]).argsort(descending=True).tolist()
    [0, 2, 1]
    """
    return sort(x, dim, descending, stable).indices


def topk(
    x: TensorBase,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,  # noqa: A002
) -> tuple[TensorBase, TensorBase]:
    """The `k` largest (or smallest) values along `dim`, sorted, and their indices (int64).

    >>> v, i = plast.tensor([1.0, 4.0, 2.0, 3.0]).topk(2)
    >>> v.tolist(), i.tolist()
    ([4.0, 3.0], [1, 3])
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"topk(): k must be an int, got {type(k).__name__}")
    x1, d = _one_dim(x, dim, "topk")
    if not 0 <= k <= x1.shape[d]:
        raise RuntimeError(
            f"topk(): selected index k={k} out of range: dim {dim} of shape {tuple(x.shape)} has {x1.shape[d]} elements"
        )
    shape = tuple(k if i == d else s for i, s in enumerate(x1.shape))
    idx = record(TOPK, (x1,), (k, d, bool(largest)), [(shape, dtypes.int64)], x.device)[0]
    values = _take_along(x1, idx, d)
    if x.ndim == 0:
        values, idx = movement.reshape(values, ()), movement.reshape(idx, ())
    return _TopkResult(values, idx)


# ---------------------------------------------------------------- all / any

ALL = register("all", cpu=rk.all_any)
ANY = register("any", cpu=rk.all_any)


def _all_any(op, x, dim, keepdim):
    dims = _dims(x, dim, op.name, empty_is_all=False)
    shape = _reduced_shape(x.shape, dims, keepdim)
    return record(op, (x,), (dims, keepdim), [(shape, dtypes.bool_)], x.device)[0]


def all(x: TensorBase, dim: Dims | None = None, keepdim: bool = False) -> TensorBase:  # noqa: A001
    """True where every element (over `dim`, or all) is nonzero; a bool tensor.

    >>> plast.tensor([[1, 0], [1, 1]]).all(1).tolist()
    [False, True]
    """
    return _all_any(ALL, x, dim, keepdim)


def any(x: TensorBase, dim: Dims | None = None, keepdim: bool = False) -> TensorBase:  # noqa: A001
    """True where some element (over `dim`, or all) is nonzero; a bool tensor.

    >>> plast.tensor([[1, 0], [0, 0]]).any(1).tolist()
    [True, False]
    """
    return _all_any(ANY, x, dim, keepdim)


# ---------------------------------------------------------------- multinomial

MULTINOMIAL = register("multinomial", cpu=rk.multinomial)


def multinomial(
    probs: TensorBase, num_samples: int, replacement: bool = False, *, generator: Generator | None = None
) -> TensorBase:
    """Sample category indices (int64) from rows of non-negative weights (1-D or 2-D `probs`), from the
    Philox stream of `generator` (the global one by default).

    >>> g = plast.Generator().manual_seed(0)
    >>> plast.multinomial(plast.tensor([0.0, 1.0, 0.0]), 2, replacement=True, generator=g).tolist()
    [1, 1]
    """
    if not probs.dtype.is_floating_point:
        raise DTypeError(f"multinomial(): only supports floating-point weights, got {probs.dtype}")
    if probs.ndim not in (1, 2):
        raise ShapeError(f"multinomial(): probs must be 1-D or 2-D, got shape {tuple(probs.shape)}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
        raise ValueError(f"multinomial(): num_samples must be a positive int, got {num_samples!r}")
    w = probs if probs.ndim == 2 else movement.reshape(probs, (1, probs.shape[0]))
    rows, cats = w.shape
    if not replacement and num_samples > cats:
        raise RuntimeError(
            f"multinomial(): cannot sample n_sample={num_samples} > prob_dist.size(-1)={cats} samples without "
            "replacement; pass replacement=True or ask for fewer samples"
        )
    if not tracing():
        rk.check_weights(w._np_array().reshape(rows, cats))
    u = rand(
        rows,
        num_samples if replacement else cats,
        generator=generator,
        dtype=dtypes.float64,
        device=probs.device,
    )
    out = record(
        MULTINOMIAL,
        (w, u),
        (num_samples, bool(replacement)),
        [((rows, num_samples), dtypes.int64)],
        probs.device,
    )[0]
    return out if probs.ndim == 2 else movement.reshape(out, (num_samples,))


__all__ = [
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "var",
    "std",
    "norm",
    "prod",
    "cumsum",
    "sort",
    "argsort",
    "topk",
    "all",
    "any",
    "multinomial",
]
