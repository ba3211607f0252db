"""CPU kernels for reductions and sorting (numpy over arena memory; the correctness baseline).

Every kernel reads inputs with arbitrary strides through `np_view` and writes the contiguous outputs the
engine allocated. The op layer (ops/reduce.py) has already checked dims, sizes and dtypes; kernels that see
data-dependent bad input (multinomial weights) raise a Python exception, never crash.
"""

import numpy as np

from . import _fast
from .fastpath import as3d, contiguous_block
from .kernels import address, np_view


def _write(out, value):
    np_view(out)[...] = value


def minmax(node, inputs, outputs):
    """amax / amin over `dims` (NaN propagates, as in torch)."""
    dims, keepdim = node.args
    x, out = inputs[0], outputs[0]
    code = x.dtype.code
    if code in (_fast.F32, _fast.F64) and out.dtype.code == code and x.numel() and out.numel():
        block = contiguous_block(dims) if x.ndim else (0, 0)
        v = as3d(x, *block) if block else None
        if v is not None:
            op = _fast.RD_MAX if node.op.name == "amax" else _fast.RD_MIN
            _fast.reduce3d(op, v[0], v[1], v[2], address(x), v[3], address(out), code)
            return
    fn = np.max if node.op.name == "amax" else np.min
    _write(outputs[0], fn(np_view(inputs[0]), axis=dims, keepdims=keepdim))


def tie_weights(node, inputs, outputs):
    """1/count at the positions equal to the reduced extreme `m` (NaN matches NaN), 0 elsewhere: how
    whole-tensor max/amax split their gradient among ties, like torch."""
    (dims,) = node.args
    x, m = np_view(inputs[0]), np_view(inputs[1])
    mask = (x == m) | (np.isnan(x) & np.isnan(m))
    count = mask.sum(axis=dims, keepdims=True)
    _write(outputs[0], mask / np.maximum(count, 1))


def argminmax(node, inputs, outputs):
    dim, keepdim = node.args
    x = np_view(inputs[0])
    fn = np.argmax if node.op.name == "argmax" else np.argmin
    if x.ndim == 0:
        _write(outputs[0], 0)
        return
    _write(outputs[0], fn(x, axis=dim, keepdims=keepdim))


def take_along(node, inputs, outputs):
    (dim,) = node.args
    _write(outputs[0], np.take_along_axis(np_view(inputs[0]), np_view(inputs[1]), axis=dim))


def put_along(node, inputs, outputs):
    """Zeros of the output's shape with `g` written at `idx` along `dim` (indices are unique along `dim`:
    they come from sort/topk/argmax)."""
    dim, _shape = node.args
    out = np_view(outputs[0])
    out[...] = 0
    if out.size:
        np.put_along_axis(out, np_view(inputs[1]), np_view(inputs[0]), axis=dim)


def _argsort(x, axis, descending):
    """Stable argsort; descending keeps equal elements in their original order (and puts NaN first)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    idx = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.flip(n - 1 - idx, axis)


def argsort(node, inputs, outputs):
    dim, descending = node.args
    _write(outputs[0], _argsort(np_view(inputs[0]), dim, descending))


def topk(node, inputs, outputs):
    k, dim, largest = node.args
    idx = _argsort(np_view(inputs[0]), dim, largest)
    _write(outputs[0], np.take(idx, np.arange(k), axis=dim))


def cumsum(node, inputs, outputs):
    dim, reverse = node.args
    x = np_view(inputs[0])
    dt = outputs[0].dtype.np
    if reverse:
        _write(outputs[0], np.flip(np.cumsum(np.flip(x, dim), axis=dim, dtype=dt), dim))
    else:
        _write(outputs[0], np.cumsum(x, axis=dim, dtype=dt))


def prod(node, inputs, outputs):
    dim, keepdim = node.args
    x = np_view(inputs[0])
    _write(outputs[0], np.prod(x, axis=dim, keepdims=keepdim, dtype=outputs[0].dtype.np))


def _exclusive(xm):
    """Exclusive prefix and suffix products along the last axis."""
    left = np.ones_like(xm)
    right = np.ones_like(xm)
    if xm.shape[-1] > 1:
        left[..., 1:] = np.cumprod(xm[..., :-1], axis=-1)
        right[..., :-1] = np.flip(np.cumprod(np.flip(xm[..., 1:], -1), axis=-1), -1)
    return left, right


def prod_others(node, inputs, outputs):
    """out[k] = product of x[j] for j != k along `dim` (exact with zeros, no division)."""
    (dim,) = node.args
    xm = np.moveaxis(np_view(inputs[0]), dim, -1)
    left, right = _exclusive(xm)
    _write(outputs[0], np.moveaxis(left * right, -1, dim))


def prod_others_bw(node, inputs, outputs):
    """out[k] = sum_{i != k} g[i] * prod_{j != i, k} x[j] along `dim`: the derivative of sum(g * prod_others(x))."""
    (dim,) = node.args
    xm = np.moveaxis(np_view(inputs[0]), dim, -1)
    gm = np.moveaxis(np_view(inputs[1]), dim, -1)
    n = xm.shape[-1]
    left, right = _exclusive(xm)
    if np.all(xm != 0) and np.all(np.isfinite(xm)):
        # no zeros: prod_{j != i,k} = others[k] / x[i]
        others = left * right
        s = np.sum(gm / xm, axis=-1, keepdims=True)
        res = others * (s - gm / xm)
    else:
        # running sums of the terms left and right of k (division-free)
        acc_l = np.zeros_like(xm)
        acc_r = np.zeros_like(xm)
        for k in range(1, n):
            acc_l[..., k] = acc_l[..., k - 1] * xm[..., k - 1] + gm[..., k - 1] * left[..., k - 1]
        for k in range(n - 2, -1, -1):
            acc_r[..., k] = acc_r[..., k + 1] * xm[..., k + 1] + gm[..., k + 1] * right[..., k + 1]
        res = acc_l * right + left * acc_r
    _write(outputs[0], np.moveaxis(res, -1, dim))


def _nilpotent_mul(a, b, r):
    """Product of polynomials in r variables t_s with t_s^2 = 0, stored as coefficients on axis 0 indexed by the
    bitmask of the variables in each monomial (2^r of them): out[S] = sum over T in S of a[T] * b[S - T]."""
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape), np.result_type(a, b))
    for sub in range(1 << r):
        t = sub
        while True:
            out[sub] += a[t] * b[sub ^ t]
            if t == 0:
                break
            t = (t - 1) & sub
    return out


def _inclusive_products(f, r):
    """Running products of f along the last axis (log-depth doubling, so there is no loop over the axis)."""
    n = f.shape[-1]
    d = 1
    while d < n:
        nxt = f.copy()
        nxt[..., d:] = _nilpotent_mul(f[..., :-d], f[..., d:], r)
        f, d = nxt, d * 2
    return f


def prod_excl(node, inputs, outputs):
    """out[k] = sum over distinct i_1..i_r (all != k) of g_1[i_1] ... g_r[i_r] * prod_{j not in {k, i_1..i_r}} x[j]
    along `dim`, for r >= 2 vectors g: prod's derivative of order r + 1 contracted with g_1..g_r.

    It is the coefficient of t_1 ... t_r in prod_{j != k} (x[j] + sum_s t_s g_s[j]) with t_s^2 = 0, taken from
    exclusive prefix and suffix products of those polynomials (no division, exact with zeros)."""
    (dim,) = node.args
    out = np_view(outputs[0])
    if out.size == 0:
        return
    xm = np.moveaxis(np_view(inputs[0]), dim, -1)
    gs = [np.moveaxis(np_view(g), dim, -1) for g in inputs[1:]]
    r = len(gs)
    f = np.zeros((1 << r,) + xm.shape, outputs[0].dtype.np)
    f[0] = xm
    for s, g in enumerate(gs):
        f[1 << s] = g
    one = np.zeros_like(f[..., :1])
    one[0] = 1
    pre = _inclusive_products(f, r)
    suf = np.flip(_inclusive_products(np.flip(f, -1), r), -1)
    left = np.concatenate([one, pre[..., :-1]], axis=-1)
    right = np.concatenate([suf[..., 1:], one], axis=-1)
    full = (1 << r) - 1
    res = sum(left[t] * right[full ^ t] for t in range(1 << r))
    _write(outputs[0], np.moveaxis(res, -1, dim))


def svd(node, inputs, outputs):
    """Reduced SVD of a stack of matrices: U (..., m, k), S (..., k), Vh (..., k, n) with k = min(m, n)."""
    if any(o.numel() == 0 for o in outputs):
        return
    a = np_view(inputs[0])
    try:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
    except np.linalg.LinAlgError as e:
        raise RuntimeError(
            f"svd of a {tuple(a.shape[-2:])} matrix did not converge ({e}); the input may hold inf or nan"
        ) from None
    for o, v in zip(outputs, (u, s, vh)):
        _write(o, v)


def sqrt(node, inputs, outputs):
    _write(outputs[0], np.sqrt(np_view(inputs[0])))


def norm(node, inputs, outputs):
    p, dims, keepdim = node.args
    x = np_view(inputs[0])
    if p == 2.0:
        r = np.sqrt(np.sum(x * x, axis=dims, keepdims=keepdim))
    else:
        r = np.sum(np.abs(x) ** p, axis=dims, keepdims=keepdim) ** (1.0 / p)
    _write(outputs[0], r)


def all_any(node, inputs, outputs):
    dims, keepdim = node.args
    fn = np.all if node.op.name == "all" else np.any
    _write(outputs[0], fn(np_view(inputs[0]), axis=dims, keepdims=keepdim))


def check_weights(w):
    """Raise like torch for weights multinomial can't sample from (w: 2-D numpy array)."""
    if w.size and not (np.all(np.isfinite(w)) and np.all(w >= 0)):
        raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or element < 0")
    if w.shape[0] and (w.shape[1] == 0 or np.any(w.sum(axis=1) <= 0)):
        raise RuntimeError(
            "multinomial: invalid distribution (sum of probabilities <= 0): every row needs a positive weight"
        )


def multinomial(node, inputs, outputs):
    """Draw category indices per row from uniforms `u`.

    With replacement: inverse CDF. Without: the exponential-race trick (the k largest w / E with E ~ Exp(1)
    are a weighted sample without replacement); zero weights are taken last, in index order.
    """
    num_samples, replacement = node.args
    w = np.asarray(np_view(inputs[0]), dtype=np.float64)
    u = np_view(inputs[1])
    check_weights(w)
    out = np_view(outputs[0])
    if out.size == 0:
        return
    if replacement:
        cdf = np.cumsum(w, axis=1)
        last = w.shape[1] - 1 - np.argmax(w[:, ::-1] > 0, axis=1)  # last category with weight > 0
        for r in range(w.shape[0]):
            idx = np.searchsorted(cdf[r], u[r] * cdf[r, -1], side="right")
            out[r] = np.minimum(idx, last[r])
    else:
        e = -np.log1p(-u)
        with np.errstate(divide="ignore"):
            keys = np.where(w > 0, w / e, -1.0)
        out[...] = _argsort(keys, 1, True)[:, :num_samples]
