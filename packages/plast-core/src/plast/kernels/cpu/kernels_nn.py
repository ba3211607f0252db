"""CPU kernels (numpy) for the NN primitives: the softmax family, losses, addmm, embedding, norms, conv, pooling.

Same contract as kernels.py: ``kernel(node, inputs, outputs)``, inputs with any strides, outputs freshly
allocated and contiguous. These numpy kernels are the correctness baseline; C versions replace the hot ones.
Targets and ids are data, so their range is checked here (numpy), never trusted for indexing.
"""

import numpy as np

from . import _fast, _matmul
from .fastpath import as3d, contiguous_block
from .kernels import address, gemm_into, np_view, row_bias

_FLOAT = (_fast.F32, _fast.F64)  # dtype codes the C kernels of _fast take


def _addr(a):
    return a.__array_interface__["data"][0]


def _rows_contig(a):
    """A 2-d float numpy array as (rows, row stride in elements) with contiguous rows (copied when they aren't)."""
    isz = a.itemsize
    if a.strides[1] != isz or a.strides[0] % isz or a.strides[0] < 0:
        a = np.ascontiguousarray(a)
    return a, (a.strides[0] // isz if a.shape[0] > 1 else a.shape[1])


_as_strided = np.lib.stride_tricks.as_strided


def _fail(outputs, exc):
    # NOTE: the scheduler allocates outputs before calling the kernel; drop that memory so a later read runs
    # this kernel again (and raises again) instead of returning uninitialized values.
    for o in outputs:
        o._storage = None
    raise exc


# ---- softmax family ----


def _softmax_into(x, axis, out, safe=False):
    m = np.max(x, axis=axis, keepdims=True)
    if safe:
        # rows that are entirely -inf (fully masked attention rows) give zeros instead of nan
        m = np.where(np.isneginf(m), 0, m).astype(x.dtype, copy=False)
    np.subtract(x, m, out=out)
    np.exp(out, out=out)
    s = np.sum(out, axis=axis, keepdims=True)
    if safe:
        s[s == 0] = 1
    np.divide(out, s, out=out)


def _softmax_fast(mode, dim, x, out):
    """The C softmax/log_softmax when x is float32/float64 and lays out as (outer, n, inner); False otherwise."""
    code = x.dtype.code
    if code not in _FLOAT or out.dtype.code != code:
        return False
    dim = dim % x.ndim if x.ndim else 0  # the backward ops may be recorded with a negative dim
    v = as3d(x, dim, dim + 1)
    if v is None:
        return False
    if out.numel():
        vo = as3d(out, dim, dim + 1)
        _fast.softmax3d(mode, v[0], v[1], v[2], address(x), v[3], address(out), vo[3], code)
    return True


def softmax(node, inputs, outputs):
    dim, safe = node.args
    mode = _fast.SM_SAFE_SOFTMAX if safe else _fast.SM_SOFTMAX
    if _softmax_fast(mode, dim, inputs[0], outputs[0]):
        return
    out = np_view(outputs[0])
    if out.size:
        _softmax_into(np_view(inputs[0]), dim, out, safe)


def log_softmax(node, inputs, outputs):
    (dim,) = node.args
    if _softmax_fast(_fast.SM_LOG_SOFTMAX, dim, inputs[0], outputs[0]):
        return
    out = np_view(outputs[0])
    if not out.size:
        return
    x = np_view(inputs[0])
    m = np.max(x, axis=dim, keepdims=True)
    np.subtract(x, m, out=out)
    s = np.sum(np.exp(out), axis=dim, keepdims=True)
    out -= np.log(s)


def _softmax_bw_fast(mode, dim, g, y, out):
    code = y.dtype.code
    if code not in _FLOAT or not (g.dtype.code == out.dtype.code == code):
        return False
    dim = dim % y.ndim if y.ndim else 0  # the backward ops may be recorded with a negative dim
    vg, vy = as3d(g, dim, dim + 1), as3d(y, dim, dim + 1)
    if vg is None or vy is None:
        return False
    if out.numel():
        vo = as3d(out, dim, dim + 1)
        _fast.softmax_bw3d(
            mode, vo[0], vo[1], vo[2], address(g), vg[3], address(y), vy[3], address(out), vo[3], code
        )
    return True


def softmax_backward(node, inputs, outputs):
    (dim,) = node.args
    if _softmax_bw_fast(_fast.SM_SOFTMAX, dim, inputs[0], inputs[1], outputs[0]):
        return
    out = np_view(outputs[0])
    if not out.size:
        return
    g, y = np_view(inputs[0]), np_view(inputs[1])
    gy = g * y
    np.subtract(g, np.sum(gy, axis=dim, keepdims=True), out=out)
    out *= y


def log_softmax_backward(node, inputs, outputs):
    (dim,) = node.args
    if _softmax_bw_fast(_fast.SM_LOG_SOFTMAX, dim, inputs[0], inputs[1], outputs[0]):
        return
    out = np_view(outputs[0])
    if not out.size:
        return
    g, y = np_view(inputs[0]), np_view(inputs[1])
    out[...] = g - np.exp(y) * np.sum(g, axis=dim, keepdims=True)


def logsumexp(node, inputs, outputs):
    dims, keepdim = node.args
    x, o = inputs[0], outputs[0]
    code = x.dtype.code
    if code in _FLOAT and o.dtype.code == code and x.numel():
        block = contiguous_block(dims)
        v = as3d(x, *block) if block else None
        if v is not None:
            if o.numel():
                _fast.logsumexp3d(v[0], v[1], v[2], address(x), v[3], address(o), (v[2], 0, 1), code)
            return
    out = np_view(o)
    if not out.size:
        return
    x = np_view(inputs[0])
    if x.size == 0:
        out.fill(-np.inf)
        return
    m = np.max(x, axis=dims, keepdims=True)
    m = np.where(np.isinf(m), 0, m).astype(x.dtype, copy=False)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(x - m), axis=dims, keepdims=True)) + m
    out[...] = r if keepdim else r.reshape(out.shape)


# ---- cross-entropy / nll ----


def _rows(a, k):
    """(N, K, d1, ...) -> (M, K) with the class dim last."""
    return np.moveaxis(a, 1, -1).reshape(-1, k)


def _unrows(r, shape):
    """(M, K) -> (N, K, d1, ...)."""
    return np.moveaxis(r.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],)), -1, 1)


def _log_softmax_rows(xr):
    m = np.max(xr, axis=1, keepdims=True)
    z = xr - m
    return z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))


def _index_terms(t, k, w, ignore_index, reduction, op, dtype):
    """Checks class-index targets; returns (valid, clipped targets, per-row weight, mean divisors)."""
    t = np.asarray(t).reshape(-1)
    valid = t != ignore_index
    bad = valid & ((t < 0) | (t >= k))
    if bad.any():
        v = int(t[bad][0])
        raise IndexError(
            f"{op}: target {v} is out of bounds for {k} classes (expected 0 <= target < {k}, "
            f"or ignore_index={ignore_index})"
        )
    tc = np.where(valid, t, 0)
    wt = (w[tc] if w is not None else np.ones(t.shape, dtype)).astype(dtype, copy=False) * valid
    if reduction == "mean":
        # torch divides the smoothing term by the same (weighted) count of non-ignored targets
        dn_nll = dn_smooth = wt.sum(dtype=dtype)
    else:
        dn_nll = dn_smooth = dtype.type(1)
    return valid, tc, wt, dn_nll, dn_smooth


def _coeffs(kind, target, w, k, ignore_index, reduction, eps, op, dtype, m):
    """Dense (M, K) coefficients C with loss = -sum(C * log_softmax(x)) (per row for reduction='none')."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "index":
            valid, tc, wt, dn_nll, dn_smooth = _index_terms(target, k, w, ignore_index, reduction, op, dtype)
            c = np.zeros((m, k), dtype)
            # ignored targets get exactly zero (not 0/0 when every target is ignored), as in torch
            c[np.arange(m), tc] = np.where(valid, (1 - eps) * wt / dn_nll, 0)
            if eps:
                ws = w[None, :] if w is not None else np.ones((1, k), dtype)
                c += np.where(valid[:, None], (eps / k) * ws / dn_smooth, 0).astype(dtype, copy=False)
            return c
        tr = _rows(target, k)
        c = (1 - eps) * tr + eps / k
        if w is not None:
            c = c * w[None, :]
        if reduction == "mean":
            c = c / dtype.type(m)
        return c.astype(dtype, copy=False)


def _loss_args(node, inputs, xshape):
    kind, ignore_index, reduction, eps = node.args[:4]
    target = np_view(inputs[1])
    w = np_view(inputs[2]) if len(inputs) > 2 else None
    k = xshape[1]
    m = int(np.prod(xshape)) // k if k else 0
    return kind, ignore_index, reduction, eps, target, w, k, m


def _xent_fast_args(node, inputs, xt):
    """(x layout, targets, weights) for the C cross-entropy, or None when the case isn't covered."""
    kind = node.args[0]
    if kind != "index" or xt.dtype.code not in _FLOAT or xt.ndim < 2:
        return None
    v = as3d(xt, 1, 2)
    if v is None:
        return None
    t = np.ascontiguousarray(np_view(inputs[1])).reshape(-1)
    if t.dtype not in (np.int64, np.int32):
        return None
    w = np.ascontiguousarray(np_view(inputs[2]), dtype=xt.dtype.np) if len(inputs) > 2 else None
    return v, t, w


def cross_entropy(node, inputs, outputs):
    fast = _xent_fast_args(node, inputs, inputs[0])
    o = outputs[0]
    if fast is not None and o.dtype is inputs[0].dtype:
        (outer, k, inner, xs), t, w = fast
        _, ignore_index, reduction, eps = node.args[:4]
        if reduction == "none" and not o.numel():
            return
        try:
            _fast.cross_entropy(
                outer,
                k,
                inner,
                address(inputs[0]) if inputs[0].numel() else 0,
                xs,
                _addr(t),
                t.dtype == np.int64,
                _addr(w) if w is not None else 0,
                ignore_index,
                eps,
                reduction,
                address(o),
                o.dtype.code,
            )
        except IndexError as e:
            _fail(outputs, e)
        return
    x = np_view(inputs[0])
    kind, ignore_index, reduction, eps, target, w, k, m = _loss_args(node, inputs, x.shape)
    out = np_view(outputs[0])
    dtype = x.dtype
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            logp = _log_softmax_rows(_rows(x, k))
            if kind == "index":
                valid, tc, wt, dn_nll, dn_smooth = _index_terms(
                    target, k, w, ignore_index, reduction, "cross_entropy", dtype
                )
                nll = -wt * logp[np.arange(m), tc]
                if eps:
                    smooth = -(logp * w[None, :] if w is not None else logp).sum(1) * valid
                if reduction == "none":
                    loss = (1 - eps) * nll + (eps / k) * smooth if eps else nll
                    out[...] = loss.reshape(out.shape)
                else:
                    total = nll.sum(dtype=dtype) / dn_nll
                    if eps:
                        total = (1 - eps) * total + (eps / k) * smooth.sum(dtype=dtype) / dn_smooth
                    out[...] = total
            else:
                c = _coeffs(kind, target, w, k, ignore_index, reduction, eps, "cross_entropy", dtype, m)
                rows = -(c * logp).sum(1)
                if reduction == "none":
                    out[...] = rows.reshape(out.shape)
                else:
                    out[...] = rows.sum(dtype=dtype) if m else (np.nan if reduction == "mean" else 0)
    except IndexError as e:
        _fail(outputs, e)


def cross_entropy_backward(node, inputs, outputs):
    """d loss / d input = g * (softmax(x) * sum_c(C) - C), with the coefficients C of `_coeffs`."""
    fast = _xent_fast_args(node, inputs[1:], inputs[1])
    gx = outputs[0]
    if fast is not None and inputs[0].dtype is inputs[1].dtype is gx.dtype:
        (outer, k, inner, xs), t, w = fast
        _, ignore_index, reduction, eps = node.args[:4]
        if not gx.numel():
            return
        g = np.ascontiguousarray(np_view(inputs[0]))
        try:
            _fast.cross_entropy_bw(
                outer,
                k,
                inner,
                address(inputs[1]),
                xs,
                _addr(t),
                t.dtype == np.int64,
                _addr(w) if w is not None else 0,
                ignore_index,
                eps,
                reduction,
                _addr(g),
                address(gx),
                as3d(gx, 1, 2)[3],
                gx.dtype.code,
            )
        except IndexError as e:
            _fail(outputs, e)
        return
    g = np_view(inputs[0])
    x = np_view(inputs[1])
    kind, ignore_index, reduction, eps, target, w, k, m = _loss_args(node, inputs[1:], x.shape)
    out = np_view(outputs[0])
    if not out.size:
        return
    dtype = x.dtype
    try:
        c = _coeffs(kind, target, w, k, ignore_index, reduction, eps, "cross_entropy", dtype, m)
    except IndexError as e:
        _fail(outputs, e)
    p = np.exp(_log_softmax_rows(_rows(x, k)))
    gr = g.reshape(-1, 1) if reduction == "none" else g
    out[...] = _unrows(gr * (p * c.sum(1, keepdims=True) - c), x.shape)


def loss_coeffs(node, inputs, outputs):
    """The dense coefficients C (shaped like the input) for the backward rules written in plast ops."""
    kind, ignore_index, reduction, eps, xshape = node.args
    out = np_view(outputs[0])
    if not out.size:
        return
    target = np_view(inputs[0])
    w = np_view(inputs[1]) if len(inputs) > 1 else None
    k = xshape[1]
    m = int(np.prod(xshape)) // k
    try:
        c = _coeffs(kind, target, w, k, ignore_index, reduction, eps, "loss", out.dtype, m)
    except IndexError as e:
        _fail(outputs, e)
    out[...] = _unrows(c, xshape)


def nll_loss(node, inputs, outputs):
    x = np_view(inputs[0])
    ignore_index, reduction = node.args
    target = np_view(inputs[1])
    w = np_view(inputs[2]) if len(inputs) > 2 else None
    k = x.shape[1]
    out = np_view(outputs[0])
    dtype = x.dtype
    xr = _rows(x, k)
    m = xr.shape[0]
    try:
        valid, tc, wt, dn, _ = _index_terms(target, k, w, ignore_index, reduction, "nll_loss", dtype)
    except IndexError as e:
        _fail(outputs, e)
    rows = -wt * xr[np.arange(m), tc] if m else np.zeros(0, dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        if reduction == "none":
            out[...] = rows.reshape(out.shape)
        else:
            out[...] = rows.sum(dtype=dtype) / dn


# ---- elementwise losses ----


def _reduce_into(out, loss, reduction):
    if reduction == "none":
        out[...] = loss
    elif reduction == "sum":
        out[...] = loss.sum(dtype=loss.dtype)
    else:
        out[...] = loss.mean(dtype=loss.dtype) if loss.size else np.nan


def binary_cross_entropy(node, inputs, outputs):
    (reduction,) = node.args
    x, t = np_view(inputs[0]), np_view(inputs[1])
    bad = (x < 0) | (x > 1)
    if bad.any():
        _fail(
            outputs,
            ValueError(
                f"binary_cross_entropy: all elements of input should be between 0 and 1, got {x[bad].flat[0]!r}; "
                "pass probabilities (e.g. sigmoid(logits)) or use binary_cross_entropy_with_logits"
            ),
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))
    if len(inputs) > 2:
        loss = loss * np_view(inputs[2])
    _reduce_into(np_view(outputs[0]), loss.astype(x.dtype, copy=False), reduction)


def binary_cross_entropy_backward(node, inputs, outputs):
    g, x, t = np_view(inputs[0]), np_view(inputs[1]), np_view(inputs[2])
    r = g * (x - t) / np.maximum(x * (1 - x), 1e-12)
    if len(inputs) > 3:
        r = r * np_view(inputs[3])
    np_view(outputs[0])[...] = r


def _softplus_neg(x):
    """log(1 + exp(-x)), stable for any x."""
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0)


def binary_cross_entropy_with_logits(node, inputs, outputs):
    reduction, has_w, has_pw = node.args
    x, t = np_view(inputs[0]), np_view(inputs[1])
    i = 2
    w = pw = None
    if has_w:
        w = np_view(inputs[i])
        i += 1
    if has_pw:
        pw = np_view(inputs[i])
    sp = _softplus_neg(x)
    loss = (1 - t) * x + ((1 + (pw - 1) * t) * sp if pw is not None else sp)
    if w is not None:
        loss = loss * w
    _reduce_into(np_view(outputs[0]), loss.astype(x.dtype, copy=False), reduction)


# ---- addmm, embedding, one_hot, dropout mask ----


def _addmm_numpy(node, inputs, outputs):
    """addmm for what plast's GEMM does not take (other betas, layouts, dtypes)."""
    beta, alpha = node.args
    bias, a, b = (np_view(t) for t in inputs)
    out = np_view(outputs[0])
    if not out.size:
        return
    rb = row_bias(bias, out.shape[-1]) if beta == 1 else None
    if rb is not None:
        gemm_into(out, a, b, alpha=float(alpha), bias=rb)
        return
    gemm_into(out, a, b, alpha=float(alpha))
    if beta != 0:
        out += bias * beta if beta != 1 else bias


addmm = _matmul.AddmmKernel(_addmm_numpy)  # the op table's addmm kernel (compiled; numpy fallback)


def _check_ids(ids, n, op, what="index"):
    if ids.size:
        lo, hi = ids.min(), ids.max()
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise IndexError(
                f"{op}: {what} {int(bad)} is out of range for {n} rows (expected 0 <= {what} < {n})"
            )


def _ids(t):
    ids = np.ascontiguousarray(np_view(t)).reshape(-1)
    return ids if ids.dtype in (np.int64, np.int32) else ids.astype(np.int64)


def embedding(node, inputs, outputs):
    padding_idx, zero_padding = node.args
    out = outputs[0]
    if out.numel():
        ids = _ids(inputs[0])
        w = np_view(inputs[1])
        if w.strides[1] != w.itemsize or w.strides[0] < 0 or w.strides[0] % w.itemsize:
            w = np.ascontiguousarray(w)
        try:
            _fast.embedding(
                ids.size,
                _addr(ids),
                ids.dtype == np.int64,
                w.shape[0],
                _addr(w),
                w.strides[0],
                w.shape[1] * w.itemsize,
                address(out),
                padding_idx,
                zero_padding,
            )
        except IndexError as e:
            _fail(outputs, e)
        return
    ids, w = np_view(inputs[0]), np_view(inputs[1])
    try:
        _check_ids(ids, w.shape[0], "embedding", "id")
    except IndexError as e:
        _fail(outputs, e)
    out = np_view(outputs[0])
    if not out.size:
        return
    np.take(w, ids, axis=0, out=out)
    if zero_padding and padding_idx is not None:
        out[ids == padding_idx] = 0


def embedding_backward(node, inputs, outputs):
    num, padding_idx = node.args
    o = outputs[0]
    if o.dtype.code in _FLOAT and inputs[0].dtype is o.dtype and o.numel():
        ids = _ids(inputs[1])
        dim = o._shape[1]
        g = np_view(inputs[0]).reshape(-1, dim)
        isz = g.itemsize
        if g.strides[1] != isz or g.strides[0] < 0 or g.strides[0] % isz:
            g = np.ascontiguousarray(g)
        try:
            _fast.embedding_bw(
                o.dtype.code,
                ids.size,
                _addr(ids),
                ids.dtype == np.int64,
                num,
                dim,
                _addr(g) if g.size else 0,
                g.strides[0] // isz,
                address(o),
                padding_idx,
            )
        except IndexError as e:
            _fail(outputs, e)
        return
    g, ids = np_view(inputs[0]), np_view(inputs[1])
    out = np_view(outputs[0])
    out.fill(0)
    if not g.size:
        return
    try:
        _check_ids(ids, num, "embedding", "id")
    except IndexError as e:
        _fail(outputs, e)
    np.add.at(out, ids.reshape(-1), g.reshape(-1, out.shape[1]))
    if padding_idx is not None:
        out[padding_idx] = 0


def one_hot(node, inputs, outputs):
    (k,) = node.args
    ids = np_view(inputs[0])
    try:
        _check_ids(ids, k, "one_hot", "class index")
    except IndexError as e:
        _fail(outputs, e)
    out = np_view(outputs[0])
    out.fill(0)
    if out.size:
        np.put_along_axis(out, ids[..., None].astype(np.int64), 1, axis=-1)


def dropout_mask(node, inputs, outputs):
    (p,) = node.args
    u = np_view(inputs[0])
    out = np_view(outputs[0])
    if p >= 1:
        out.fill(0)
    else:
        np.multiply(u >= p, 1.0 / (1.0 - p), out=out, casting="unsafe")


def bool_mask_to_additive(node, inputs, outputs):
    m = np_view(inputs[0])
    out = np_view(outputs[0])
    out.fill(0)
    out[~m] = -np.inf


# ---- norms ----


def _norm_rows(a, k):
    lead = a.shape[: a.ndim - k]
    return a.reshape(int(np.prod(lead, dtype=np.int64)), -1)


def _param(t, dtype):
    return np.ascontiguousarray(np_view(t), dtype=dtype).reshape(-1)


def _flat_param(t, dtype):
    """Address of a weight/bias tensor as a contiguous vector: its own memory when it already is one (the
    usual case), else a contiguous numpy copy kept alive in the returned tuple."""
    if t.dtype is dtype and t.is_contiguous():
        return address(t), None
    a = _param(t, dtype.np)
    return _addr(a), a


def _layer_norm_direct(node, inputs, outputs):
    """layer_norm straight from the tensors' strides (no numpy views): rows of the normalized dims must be
    contiguous with one row stride. Returns False when they aren't."""
    k, eps, has_w, has_b = node.args
    xt = inputs[0]
    v = as3d(xt, xt.ndim - k, xt.ndim)
    if v is None or (v[1] > 1 and v[3][1] != 1):
        return False
    rows, n = v[0], v[1]
    i = 1
    w = b = (0, None)
    if has_w:
        w = _flat_param(inputs[i], xt.dtype)
        i += 1
    if has_b:
        b = _flat_param(inputs[i], xt.dtype)
    y, mean, rstd = outputs
    row_stride = v[3][0] if rows > 1 else n
    _fast.layer_norm(
        rows,
        n,
        address(xt),
        row_stride,
        w[0],
        b[0],
        eps,
        address(y),
        address(mean),
        address(rstd),
        xt.dtype.code,
    )
    return True


def layer_norm(node, inputs, outputs):
    k, eps, has_w, has_b = node.args
    xt = inputs[0]
    code = xt.dtype.code
    if code in _FLOAT and all(o.dtype is xt.dtype for o in outputs) and xt.numel():
        if _layer_norm_direct(node, inputs, outputs):
            return
        n = int(np.prod(xt._shape[xt.ndim - k :], dtype=np.int64))
        x, x_row = _rows_contig(np_view(xt).reshape(-1, n))
        i = 1
        w = b = None
        if has_w:
            w = _param(inputs[i], x.dtype)
            i += 1
        if has_b:
            b = _param(inputs[i], x.dtype)
        y, mean, rstd = outputs
        _fast.layer_norm(
            x.shape[0],
            n,
            _addr(x),
            x_row,
            _addr(w) if w is not None else 0,
            _addr(b) if b is not None else 0,
            eps,
            address(y),
            address(mean),
            address(rstd),
            code,
        )
        return
    x = np_view(inputs[0])
    y, mean_o, rstd_o = (np_view(o) for o in outputs)
    if not x.size:
        mean_o.fill(np.nan)
        rstd_o.fill(np.nan)
        return
    xr = _norm_rows(x, k)
    mean = xr.mean(1, keepdims=True, dtype=x.dtype)
    xc = xr - mean
    var = np.mean(xc * xc, axis=1, keepdims=True, dtype=x.dtype)
    rstd = (1.0 / np.sqrt(var + x.dtype.type(eps))).astype(x.dtype, copy=False)
    r = (xc * rstd).reshape(x.shape)
    i = 1
    if has_w:
        r = r * np_view(inputs[i])
        i += 1
    if has_b:
        r = r + np_view(inputs[i])
    y[...] = r
    mean_o[...] = mean.reshape(mean_o.shape)
    rstd_o[...] = rstd.reshape(rstd_o.shape)


def layer_norm_backward(node, inputs, outputs):
    (k,) = node.args
    xt = inputs[1]
    code = xt.dtype.code
    same = all(t.dtype is xt.dtype for t in inputs) and all(o.dtype is xt.dtype for o in outputs)
    if code in _FLOAT and same and xt.numel():
        n = int(np.prod(xt._shape[xt.ndim - k :], dtype=np.int64))
        gy, gy_row = _rows_contig(np_view(inputs[0]).reshape(-1, n))
        x, x_row = _rows_contig(np_view(xt).reshape(-1, n))
        mean = np.ascontiguousarray(np_view(inputs[2])).reshape(-1)
        rstd = np.ascontiguousarray(np_view(inputs[3])).reshape(-1)
        w = _param(inputs[4], x.dtype) if len(inputs) > 4 else None
        gx, gw, gb = outputs
        _fast.layer_norm_bw(
            x.shape[0],
            n,
            _addr(gy),
            gy_row,
            _addr(x),
            x_row,
            _addr(mean),
            _addr(rstd),
            _addr(w) if w is not None else 0,
            address(gx),
            address(gw),
            address(gb),
            code,
        )
        return
    gy, x, mean, rstd = (np_view(t) for t in inputs[:4])
    gx, gw, gb = (np_view(o) for o in outputs)
    if not x.size:
        gw.fill(0)
        gb.fill(0)
        return
    n = int(np.prod(x.shape[x.ndim - k :], dtype=np.int64))
    gyr, xr = _norm_rows(gy, k), _norm_rows(x, k)
    mr, rr = mean.reshape(-1, 1), rstd.reshape(-1, 1)
    xhat = (xr - mr) * rr
    gw[...] = (gyr * xhat).sum(0).reshape(gw.shape)
    gb[...] = gyr.sum(0).reshape(gb.shape)
    gxh = gyr * np_view(inputs[4]).reshape(1, n) if len(inputs) > 4 else gyr
    r = rr * (gxh - gxh.mean(1, keepdims=True) - xhat * (gxh * xhat).mean(1, keepdims=True))
    gx[...] = r.reshape(gx.shape)


# ---- conv2d (im2col with as_strided + matmul) ----


def _pad2d(x, pads, value=0.0):
    pt, pb, pl, pr = pads
    if not (pt or pb or pl or pr):
        return x
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=value)


def _windows(xp, kh, kw, ho, wo, stride, dil):
    """(N, C, kh, kw, Ho, Wo) view of a padded (N, C, Hp, Wp) array."""
    n, c = xp.shape[:2]
    s_n, s_c, s_h, s_w = xp.strides
    return _as_strided(
        xp,
        (n, c, kh, kw, ho, wo),
        (s_n, s_c, dil[0] * s_h, dil[1] * s_w, stride[0] * s_h, stride[1] * s_w),
        writeable=False,
    )


def _cols(x, wshape, oshape, stride, pads, dil, groups):
    n, c = x.shape[:2]
    _, cg, kh, kw = wshape
    ho, wo = oshape[2:]
    cols = _windows(_pad2d(x, pads), kh, kw, ho, wo, stride, dil)
    return cols.reshape(n, groups, cg * kh * kw, ho * wo)


def conv2d(node, inputs, outputs):
    stride, pads, dil, groups = node.args
    x, w = np_view(inputs[0]), np_view(inputs[1])
    out = np_view(outputs[0])
    if not out.size:
        return
    o = w.shape[0]
    cols = _cols(x, w.shape, out.shape, stride, pads, dil, groups)
    wm = w.reshape(groups, o // groups, -1)
    res = np.matmul(wm, cols)  # (N, G, Og, L)
    out[...] = res.reshape(out.shape)
    if len(inputs) > 2:
        out += np_view(inputs[2])[:, None, None]


def conv2d_backward_input(node, inputs, outputs):
    xshape, stride, pads, dil, groups = node.args
    g, w = np_view(inputs[0]), np_view(inputs[1])
    gx = np_view(outputs[0])
    if not gx.size:
        return
    n, c, h, wd = xshape
    o, cg, kh, kw = w.shape
    ho, wo = g.shape[2:]
    pt, pb, pl, pr = pads
    gxp = np.zeros((n, c, h + pt + pb, wd + pl + pr), gx.dtype)
    if g.size:
        gm = g.reshape(n, groups, o // groups, ho * wo)
        wm = w.reshape(groups, o // groups, cg * kh * kw)
        gcols = np.matmul(wm.transpose(0, 2, 1), gm).reshape(n, c, kh, kw, ho, wo)
        sh, sw = stride
        dh, dw = dil
        for i in range(kh):
            for j in range(kw):
                gxp[
                    :, :, i * dh : i * dh + sh * (ho - 1) + 1 : sh, j * dw : j * dw + sw * (wo - 1) + 1 : sw
                ] += gcols[:, :, i, j]
    gx[...] = gxp[:, :, pt : pt + h, pl : pl + wd]


def conv2d_backward_weight(node, inputs, outputs):
    wshape, stride, pads, dil, groups = node.args
    g, x = np_view(inputs[0]), np_view(inputs[1])
    gw = np_view(outputs[0])
    if not gw.size:
        return
    if not g.size:
        gw.fill(0)
        return
    n = x.shape[0]
    o = wshape[0]
    cols = _cols(x, wshape, g.shape, stride, pads, dil, groups)  # (N, G, K, L)
    gm = g.reshape(n, groups, o // groups, -1)
    gw[...] = np.matmul(gm, cols.transpose(0, 1, 3, 2)).sum(0).reshape(wshape)


# ---- pooling ----


def _pool_pad(x, k, stride, pads, dil, ohw, value):
    """Pad (N, C, H, W) so every output window (ceil_mode included) lies inside."""
    h, w = x.shape[2:]
    need_h = (ohw[0] - 1) * stride[0] + dil[0] * (k[0] - 1) + 1
    need_w = (ohw[1] - 1) * stride[1] + dil[1] * (k[1] - 1) + 1
    pb = max(0, need_h - pads[0] - h)
    pr = max(0, need_w - pads[1] - w)
    return _pad2d(x, (pads[0], pb, pads[1], pr), value)


def max_pool2d(node, inputs, outputs):
    k, stride, pads, dil = node.args
    x = np_view(inputs[0])
    vals, idx = np_view(outputs[0]), np_view(outputs[1])
    if not vals.size:
        return
    n, c, h, w = x.shape
    ho, wo = vals.shape[2:]
    xp = _pool_pad(x, k, stride, pads, dil, (ho, wo), -np.inf)
    win = _windows(xp, k[0], k[1], ho, wo, stride, dil)  # (N, C, kh, kw, Ho, Wo)
    win = win.transpose(0, 1, 4, 5, 2, 3).reshape(n, c, ho, wo, k[0] * k[1])
    a = np.argmax(win, axis=-1)
    vals[...] = np.take_along_axis(win, a[..., None], axis=-1)[..., 0]
    i, j = np.divmod(a, k[1])
    hs = (np.arange(ho) * stride[0] - pads[0])[:, None]
    ws = (np.arange(wo) * stride[1] - pads[1])[None, :]
    row = hs + i * dil[0]
    col = ws + j * dil[1]
    inside = (row >= 0) & (row < h) & (col >= 0) & (col < w)
    if not inside.all():
        # windows whose max is -inf everywhere: report the first element inside the input, as torch does
        h0 = hs + (-hs).clip(0) // dil[0] * dil[0] + np.where((-hs).clip(0) % dil[0], dil[0], 0)
        w0 = ws + (-ws).clip(0) // dil[1] * dil[1] + np.where((-ws).clip(0) % dil[1], dil[1], 0)
        row = np.where(inside, row, h0)
        col = np.where(inside, col, w0)
    idx[...] = row * w + col


def max_pool2d_backward(node, inputs, outputs):
    (xshape,) = node.args
    g, idx = np_view(inputs[0]), np_view(inputs[1])
    gx = np_view(outputs[0])
    if not gx.size:
        return
    n, c, h, w = xshape
    plane = np.arange(n * c, dtype=np.int64).reshape(n, c, 1, 1) * (h * w)
    flat = (idx + plane).reshape(-1)
    r = np.bincount(flat, weights=g.reshape(-1), minlength=n * c * h * w)
    gx[...] = r.reshape(xshape)


def pool_gather(node, inputs, outputs):
    """out[n, c, i, j] = h[n, c, idx[n, c, i, j]] (the adjoint of max_pool2d_backward)."""
    hx, idx = np_view(inputs[0]), np_view(inputs[1])
    out = np_view(outputs[0])
    if not out.size:
        return
    n, c = hx.shape[:2]
    flat = hx.reshape(n, c, -1)
    out[...] = np.take_along_axis(flat, idx.reshape(n, c, -1), axis=-1).reshape(out.shape)


def _avg_divisor(hw, ohw, k, stride, pads, count_include_pad, divisor_override):
    if divisor_override:
        return float(divisor_override)

    def axis(size, osize, kk, s, p):
        start = np.arange(osize) * s - p
        end = np.minimum(start + kk, size + p)
        full = end - start
        return full, np.minimum(end, size) - np.maximum(start, 0)

    fh, rh = axis(hw[0], ohw[0], k[0], stride[0], pads[0])
    fw, rw = axis(hw[1], ohw[1], k[1], stride[1], pads[1])
    return (fh[:, None] * fw[None, :]) if count_include_pad else (rh[:, None] * rw[None, :])


def avg_pool2d(node, inputs, outputs):
    k, stride, pads, count_include_pad, divisor_override = node.args
    x = np_view(inputs[0])
    out = np_view(outputs[0])
    if not out.size:
        return
    ho, wo = out.shape[2:]
    xp = _pool_pad(x, k, stride, pads, (1, 1), (ho, wo), 0.0)
    win = _windows(xp, k[0], k[1], ho, wo, stride, (1, 1))
    div = _avg_divisor(x.shape[2:], (ho, wo), k, stride, pads, count_include_pad, divisor_override)
    out[...] = win.sum(axis=(2, 3)) / np.asarray(div, dtype=x.dtype)


def avg_pool2d_backward(node, inputs, outputs):
    xshape, k, stride, pads, count_include_pad, divisor_override = node.args
    g = np_view(inputs[0])
    gx = np_view(outputs[0])
    if not gx.size:
        return
    n, c, h, w = xshape
    ho, wo = g.shape[2:]
    div = _avg_divisor((h, w), (ho, wo), k, stride, pads, count_include_pad, divisor_override)
    gd = g / np.asarray(div, dtype=gx.dtype)
    need_h = (ho - 1) * stride[0] + k[0]
    need_w = (wo - 1) * stride[1] + k[1]
    gxp = np.zeros((n, c, max(need_h, h + pads[0]), max(need_w, w + pads[1])), gx.dtype)
    sh, sw = stride
    for i in range(k[0]):
        for j in range(k[1]):
            gxp[:, :, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw] += gd
    gx[...] = gxp[:, :, pads[0] : pads[0] + h, pads[1] : pads[1] + w]
