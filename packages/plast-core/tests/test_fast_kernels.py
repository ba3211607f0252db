"""The vectorized kernels of _fast (unary math, softmax family, reductions, layer_norm, cross-entropy,
embedding): every SIMD path against float64 numpy or torch, at awkward lengths, unaligned addresses, strided
layouts, with 1 and 2 threads; and the op-level kernels really take these paths."""

import math

import numpy as np
import pytest
import torch

import plast
from plast.kernels.cpu import _fast, _runtime

LENGTHS = [0, 1, 15, 17, 1023, 100_003]
_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def unaligned(n, dtype=np.float32, shift=4, fill=None):
    """An array of n elements starting `shift` bytes past a 64-byte boundary."""
    isz = np.dtype(dtype).itemsize
    raw = np.empty(n * isz + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + shift
    a = raw[start : start + n * isz].view(dtype)
    if fill is not None:
        a[...] = fill
    return a


def _sigmoid64(x):
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def _gelu_tanh64(x):
    return x * _sigmoid64(2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))


# name -> (float64 reference, domain, max ulp). gelu_tanh's bound is relative: its inner polynomial is badly
# conditioned for large negative x (torch's float32 formula has the same error), checked separately.
UNARY_REF = {
    "exp": (np.exp, (-104, 89), 2),
    "log": (np.log, (0, 1e30), 2),
    "log1p": (np.log1p, (-0.999, 1e6), 3),
    "sqrt": (np.sqrt, (0, 1e30), 1),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (1e-30, 1e30), 2),
    "tanh": (np.tanh, (-20, 20), 2),
    "sigmoid": (_sigmoid64, (-80, 80), 3),
    "silu": (lambda x: x * _sigmoid64(x), (-80, 80), 4),
    "erf": (_erf, (-6, 6), 3),
    "gelu_erf": (lambda x: 0.5 * x * _erfc(-x / math.sqrt(2)), (-13, 8), 8),
    "gelu_tanh": (_gelu_tanh64, (-3, 8), 16),
    "relu": (lambda x: np.maximum(x, 0), (-10, 10), 0),
    "abs": (np.abs, (-10, 10), 0),
    "neg": (np.negative, (-10, 10), 0),
    "square": (np.square, (-1e3, 1e3), 1),
    "reciprocal": (lambda x: 1 / x, (0.01, 1e3), 1),
    "sign": (np.sign, (-10, 10), 0),
}


def _unary(name, x, out=None, dtype_code=3):
    out = np.empty_like(x) if out is None else out
    isz = x.itemsize
    _fast.unary_nd(
        _fast.UNARY_CODES[name],
        dtype_code,
        x.shape,
        x.__array_interface__["data"][0],
        tuple(s // isz for s in x.strides),
        out.__array_interface__["data"][0],
        tuple(s // isz for s in out.strides),
    )
    return out


def _ulps(y, ref):
    with np.errstate(over="ignore"):
        ref32 = ref.astype(np.float32)
    ok = np.isfinite(ref32) & (np.abs(ref) >= np.finfo(np.float32).tiny)
    err = np.abs(y[ok].astype(np.float64) - ref[ok]) / np.spacing(np.abs(ref32[ok])).astype(np.float64)
    return err, ok


@pytest.mark.parametrize("name", sorted(UNARY_REF))
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("threads", [1, 2])
def test_unary_paths_ulp(simd_paths, rng, name, n, threads):
    ref_fn, (lo, hi), bound = UNARY_REF[name]
    x = unaligned(n, fill=rng.uniform(lo, hi, n).astype(np.float32))
    if n > 20 and lo < 0 < hi:
        x[:5] = [0.0, -0.0, lo, hi, 1e-3]
    ref = ref_fn(x.astype(np.float64))
    for path in simd_paths:
        _runtime.set_simd(path)
        _runtime.set_num_threads(threads)
        y = _unary(name, x, unaligned(n, shift=12))
        err, _ = _ulps(y, ref)
        assert err.size == 0 or err.max() <= bound, (
            f"{name} on {path}: {err.max():.2f} ulp at x={x[np.isfinite(ref)][np.argmax(err)]!r}"
        )


@pytest.mark.parametrize("name", sorted(UNARY_REF))
def test_unary_wide_ranges(simd_paths, rng, name):
    """Log-spaced magnitudes of both signs over the whole float32 range (subnormals included)."""
    ref_fn, (lo, hi), bound = UNARY_REF[name]
    mags = np.float32(2.0) ** np.arange(-149, 128, 0.25).astype(np.float32)
    x = np.concatenate([mags, -mags, np.linspace(lo, hi, 20001, dtype=np.float32)]).astype(np.float32)
    if name == "silu":
        x = x[x >= -87]  # below, x * e^x needs e^x as a float32 subnormal: a few bits are lost there
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
        if name == "gelu_tanh":  # conditioned by its inner cubic: bound the relative error instead
            ref32 = ref.astype(np.float32)
            for path in simd_paths:
                _runtime.set_simd(path)
                y = _unary(name, x).astype(np.float64)
                ok = np.isfinite(ref32) & (np.abs(ref) > 1e-30)
                rel = np.abs(y[ok] - ref[ok]) / np.abs(ref[ok])
                cond = 1 + np.abs(x[ok]) ** 3 * 0.3
                assert np.all(rel <= 1e-6 * cond + 1e-6), path
            return
        for path in simd_paths:
            _runtime.set_simd(path)
            y = _unary(name, x)
            err, ok = _ulps(y, ref)
            assert err.max() <= bound, f"{name} on {path}: {err.max():.2f} ulp at {x[ok][np.argmax(err)]!r}"
            # outside float32's normal range: same inf / nan / zero classification as the reference
            ref32 = ref.astype(np.float32)
            special = ~ok & (np.isnan(ref32) | np.isinf(ref32))
            np.testing.assert_array_equal(y[special], ref32[special], err_msg=f"{name} on {path}")


@pytest.mark.parametrize(
    "name", ["exp", "log", "log1p", "tanh", "sigmoid", "erf", "gelu_erf", "sqrt", "relu"]
)
def test_unary_special_values(simd_paths, name):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0] * 4, np.float32)
    ref_fn = UNARY_REF[name][0]
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64)).astype(np.float32)
    if name == "gelu_erf":
        ref[2::5] = -0.0  # -inf * Phi(-inf): torch gives -0 / nan depending on the path; we give the limit
    for path in simd_paths:
        _runtime.set_simd(path)
        y = _unary(name, x)
        keep = ~((name == "gelu_erf") & np.isinf(x))
        np.testing.assert_array_equal(y[keep], ref[keep], err_msg=f"{name} on {path}")


@pytest.mark.parametrize("name", sorted(UNARY_REF))
def test_unary_float64_and_strided(rng, name):
    ref_fn, (lo, hi), _ = UNARY_REF[name]
    base = rng.uniform(lo, min(hi, 80), (33, 70))
    x = base[::-1, ::3]  # negative and non-unit strides
    y = np.empty(x.shape)
    _unary(name, x, y, dtype_code=4)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(y, ref_fn(x), rtol=1e-13, atol=1e-300)
    x32 = base.astype(np.float32).T[::2]
    y32 = _unary(name, x32, np.empty(x32.shape, np.float32))
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(y32, ref_fn(x32.astype(np.float64)), rtol=1e-5, atol=1e-30)


# ---- softmax family ----


def _op3(a):
    """(outer, n, inner, strides) of a 3-d numpy float32 array."""
    return a.shape, tuple(s // 4 for s in a.strides)


def _addr(a):
    return a.__array_interface__["data"][0]


def _softmax64(x, axis, log=False):
    m = x.max(axis=axis, keepdims=True)
    z = x - m
    lse = np.log(np.exp(z).sum(axis=axis, keepdims=True))
    return z - lse if log else np.exp(z - lse)


def _layouts(rng, o, n, i):
    """(o, n, i) float32 arrays in several layouts: contiguous, n-strided (transposed), unaligned."""
    base = rng.standard_normal((o, n, i)).astype(np.float32) * 3
    yield "contiguous", base
    t = np.ascontiguousarray(base.transpose(2, 0, 1)).transpose(1, 2, 0)  # inner dim outermost in memory
    yield "strided", t
    u = unaligned(base.size, shift=8, fill=base.reshape(-1)).reshape(base.shape)
    yield "unaligned", u


@pytest.mark.parametrize(
    "shape",
    [(1, 1, 1), (3, 15, 1), (4, 17, 1), (1024, 65, 1), (2, 1023, 1), (3, 7, 19), (2, 33, 16), (5, 0, 3)],
)
@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("threads", [1, 2])
def test_softmax_paths(simd_paths, rng, shape, mode, threads):
    for label, x in _layouts(rng, *shape):
        if shape[1] == 0:  # nothing to do, and nothing may be touched
            y = np.empty(shape, np.float32)
            _fast.softmax3d(mode, *shape, _addr(x), _op3(x)[1], _addr(y), _op3(y)[1])
            continue
        ref = _softmax64(x.astype(np.float64), 1, log=mode == 2)
        g = rng.standard_normal(shape).astype(np.float32)
        for path in simd_paths:
            _runtime.set_simd(path)
            _runtime.set_num_threads(threads)
            y = np.empty(shape, np.float32)
            _fast.softmax3d(mode, *shape, _addr(x), _op3(x)[1], _addr(y), _op3(y)[1])
            np.testing.assert_allclose(y, ref, rtol=2e-6, atol=2e-6, err_msg=f"{label} {path}")
            out = np.empty(shape, np.float32)
            gx = g if label != "strided" else np.asfortranarray(g)
            _fast.softmax_bw3d(
                mode, *shape, _addr(gx), _op3(gx)[1], _addr(y), _op3(y)[1], _addr(out), _op3(out)[1]
            )
            y64, g64 = y.astype(np.float64), g.astype(np.float64)
            if mode == 2:
                want = g64 - np.exp(y64) * g64.sum(1, keepdims=True)
            else:
                want = y64 * (g64 - (g64 * y64).sum(1, keepdims=True))
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=2e-5, err_msg=f"backward {label} {path}")


def test_softmax_extremes(simd_paths):
    x = np.array(
        [[-np.inf] * 19, [0.0] * 18 + [np.nan], [1e30] + [-1e30] * 18, [-np.inf] * 18 + [5.0]], np.float32
    )
    for path in simd_paths:
        _runtime.set_simd(path)
        for mode in (0, 1, 2):
            y = np.empty_like(x)
            _fast.softmax3d(mode, 1, 4, 19, _addr(x), (0, 19, 1), _addr(y), (0, 19, 1))  # rows as columns
            y2 = np.empty_like(x)
            _fast.softmax3d(mode, 4, 19, 1, _addr(x), (19, 1, 1), _addr(y2), (19, 1, 1))
            t = torch.from_numpy(x)
            want = (torch.log_softmax(t, 1) if mode == 2 else torch.softmax(t, 1)).numpy()
            if mode == 1:
                want[0] = 0  # the safe softmax: a row of only -inf gives zeros
            np.testing.assert_allclose(y2, want, rtol=1e-6, atol=1e-7, err_msg=f"rows {mode} {path}")
            yc = np.empty((19, 4), np.float32)
            xt = np.ascontiguousarray(x.T)
            _fast.softmax3d(mode, 1, 19, 4, _addr(xt), (0, 4, 1), _addr(yc), (0, 4, 1))
            np.testing.assert_allclose(yc.T, want, rtol=1e-6, atol=1e-7, err_msg=f"cols {mode} {path}")


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 17, 1), (2, 1023, 1), (4, 9, 21), (3, 0, 2)])
def test_logsumexp_paths(simd_paths, rng, shape):
    for label, x in _layouts(rng, *shape):
        with np.errstate(divide="ignore"):
            ref = np.log(np.exp(x.astype(np.float64)).sum(1))
        for path in simd_paths:
            _runtime.set_simd(path)
            out = np.empty((shape[0], shape[2]), np.float32)
            _fast.logsumexp3d(*shape, _addr(x), _op3(x)[1], _addr(out), (shape[2], 0, 1))
            np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6, err_msg=f"{label} {path}")


# ---- reductions ----


@pytest.mark.parametrize(
    "shape",
    [
        (1, 1, 1),
        (1, 15, 1),
        (7, 17, 1),
        (1, 1023, 1),
        (3, 300_001, 1),
        (1, 4_000_037, 1),
        (5, 33, 300),
        (2, 1000, 17),
        (4, 0, 3),
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_reduce_paths(simd_paths, rng, shape, threads):
    for label, x in _layouts(rng, *shape):
        x64 = x.astype(np.float64)
        for path in simd_paths:
            _runtime.set_simd(path)
            _runtime.set_num_threads(threads)
            for op, ref in ((_fast.RD_SUM, x64.sum(1)), (_fast.RD_MAX, None), (_fast.RD_MIN, None)):
                if ref is None:
                    if shape[1] == 0:
                        continue
                    ref = x64.max(1) if op == _fast.RD_MAX else x64.min(1)
                out = np.empty((shape[0], shape[2]), np.float32)
                _fast.reduce3d(op, *shape, _addr(x), _op3(x)[1], _addr(out))
                tol = 1e-6 * np.sqrt(shape[1] + 1) * np.abs(x64).sum(1).max(initial=1) / max(shape[1], 1)
                np.testing.assert_allclose(out, ref, rtol=1e-6, atol=tol, err_msg=f"op {op} {label} {path}")


def test_reduce_nan_propagates(simd_paths):
    for n in (1, 17, 200_000):
        x = np.ones(n, np.float32)
        x[n // 2] = np.nan
        for path in simd_paths:
            _runtime.set_simd(path)
            for op in (_fast.RD_SUM, _fast.RD_MAX, _fast.RD_MIN):
                out = np.empty(1, np.float32)
                _fast.reduce3d(op, 1, n, 1, _addr(x), (0, 1, 1), _addr(out))
                assert np.isnan(out[0]), (op, n, path)
                cols = np.ones((n, 3), np.float32)
                cols[n // 2, 1] = np.nan
                out3 = np.empty(3, np.float32)
                _fast.reduce3d(op, 1, n, 3, _addr(cols), (0, 3, 1), _addr(out3))
                assert np.isnan(out3[1]) and not np.isnan(out3[0]), (op, n, path)


# ---- layer norm ----


@pytest.mark.parametrize("rows,n", [(1, 1), (3, 15), (4, 17), (1024, 128), (2, 1023), (0, 8)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_norm_paths(simd_paths, rng, rows, n, affine, threads):
    x = unaligned(rows * n, shift=4, fill=rng.standard_normal(rows * n) * 2 + 3).reshape(rows, n)
    w = rng.standard_normal(n).astype(np.float32) if affine else None
    b = rng.standard_normal(n).astype(np.float32) if affine else None
    gy = rng.standard_normal((rows, n)).astype(np.float32)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True) if affine else None
    bt = torch.tensor(b, dtype=torch.float64, requires_grad=True) if affine else None
    yt = torch.nn.functional.layer_norm(xt, (n,), wt, bt, 1e-5)
    yt.backward(torch.tensor(gy, dtype=torch.float64))
    for path in simd_paths:
        _runtime.set_simd(path)
        _runtime.set_num_threads(threads)
        y, mean, rstd = (
            np.empty((rows, n), np.float32),
            np.empty(rows, np.float32),
            np.empty(rows, np.float32),
        )
        _fast.layer_norm(
            rows,
            n,
            _addr(x),
            n,
            _addr(w) if affine else 0,
            _addr(b) if affine else 0,
            1e-5,
            _addr(y),
            _addr(mean),
            _addr(rstd),
        )
        np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-5, atol=1e-5, err_msg=path)
        np.testing.assert_allclose(mean, x.astype(np.float64).mean(1), rtol=1e-6, atol=1e-6)
        gx, gw, gb = np.empty((rows, n), np.float32), np.empty(n, np.float32), np.empty(n, np.float32)
        _fast.layer_norm_bw(
            rows,
            n,
            _addr(gy),
            n,
            _addr(x),
            n,
            _addr(mean),
            _addr(rstd),
            _addr(w) if affine else 0,
            _addr(gx),
            _addr(gw),
            _addr(gb),
        )
        if rows:
            np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=path)
        if affine:
            np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=path)
            np.testing.assert_allclose(gb, bt.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=path)


# ---- cross-entropy ----


def _xent_torch(x, t, w, ignore, eps, reduction, g):
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w, dtype=torch.float64) if w is not None else None
    loss = torch.nn.functional.cross_entropy(
        xt,
        torch.from_numpy(t.astype(np.int64)),
        wt,
        ignore_index=ignore,
        reduction=reduction,
        label_smoothing=eps,
    )
    loss.backward(torch.tensor(g, dtype=torch.float64))
    return loss.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("shape", [(1, 1), (4, 15), (1024, 65), (3, 17, 5), (2, 1023), (0, 7)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("variant", ["plain", "weights", "ignore", "smooth", "all", "int32"])
@pytest.mark.parametrize("threads", [1, 2])
def test_cross_entropy_paths(simd_paths, rng, shape, reduction, variant, threads):
    k = shape[1]
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    tshape = (shape[0],) + shape[2:]
    t = rng.integers(0, k, tshape).astype(np.int32 if variant == "int32" else np.int64)
    w = rng.uniform(0.2, 2, k).astype(np.float32) if variant in ("weights", "all") else None
    ignore = -100
    if variant in ("ignore", "all") and t.size:
        ignore = 0 if k > 1 else -100
        t.reshape(-1)[::3] = ignore
    eps = 0.1 if variant in ("smooth", "all") else 0.0
    g = rng.standard_normal(tshape).astype(np.float32) if reduction == "none" else np.float32(0.7)
    want, want_gx = _xent_torch(x, t, w, ignore, eps, reduction, g)
    xs = (x.strides[0] // 4, x.strides[1] // 4, 1)
    inner = int(np.prod(shape[2:], dtype=np.int64))
    for path in simd_paths:
        _runtime.set_simd(path)
        _runtime.set_num_threads(threads)
        out = np.empty(tshape if reduction == "none" else (), np.float32)
        _fast.cross_entropy(
            shape[0],
            k,
            inner,
            _addr(x),
            xs,
            _addr(t),
            t.dtype == np.int64,
            _addr(w) if w is not None else 0,
            ignore,
            eps,
            reduction,
            _addr(out),
        )
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, err_msg=path)
        gx = np.empty(shape, np.float32)
        gc = np.ascontiguousarray(g)
        _fast.cross_entropy_bw(
            shape[0],
            k,
            inner,
            _addr(x),
            xs,
            _addr(t),
            t.dtype == np.int64,
            _addr(w) if w is not None else 0,
            ignore,
            eps,
            reduction,
            _addr(gc),
            _addr(gx),
            xs,
        )
        np.testing.assert_allclose(gx, want_gx, rtol=1e-5, atol=1e-6, err_msg=path)


def test_cross_entropy_bad_target_raises():
    x = np.zeros((4, 5), np.float32)
    for bad in (5, -1, 1 << 40):
        t = np.array([0, 1, bad, 2], np.int64)
        out = np.full((), 7.0, np.float32)
        with pytest.raises(IndexError, match=f"target {bad} is out of bounds for 5 classes"):
            _fast.cross_entropy(
                4, 5, 1, _addr(x), (5, 1, 1), _addr(t), True, 0, -100, 0.0, "mean", _addr(out)
            )
        assert out == 7.0  # nothing written
    t32 = np.array([0, 9, 1, 1], np.int32)
    gx = np.zeros((4, 5), np.float32)
    g = np.float32(1)
    with pytest.raises(IndexError, match="target 9"):
        _fast.cross_entropy_bw(
            4,
            5,
            1,
            _addr(x),
            (5, 1, 1),
            _addr(t32),
            False,
            0,
            -100,
            0.0,
            "sum",
            _addr(np.array(g)),
            _addr(gx),
            (5, 1, 1),
        )


# ---- embedding ----


@pytest.mark.parametrize(
    "num,dim,nids", [(1, 1, 1), (10, 15, 7), (65, 128, 1024), (50, 17, 3000), (1000, 1023, 64), (5, 8, 0)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_embedding_paths(simd_paths, rng, num, dim, nids, dtype, threads):
    w = rng.standard_normal((num, dim)).astype(dtype)
    ids = rng.integers(0, num, nids)
    if nids > 4:
        ids[:4] = ids[0]  # repeated ids accumulate
    g = rng.standard_normal((nids, dim)).astype(dtype)
    pad = 0 if num > 1 else None
    want = np.zeros((num, dim))
    np.add.at(want, ids, g.astype(np.float64))
    if pad is not None:
        want[pad] = 0
    code = 3 if dtype == np.float32 else 4
    for path in simd_paths:
        _runtime.set_simd(path)
        _runtime.set_num_threads(threads)
        out = np.empty((nids, dim), dtype)
        _fast.embedding(
            nids, _addr(ids), True, num, _addr(w), w.strides[0], dim * w.itemsize, _addr(out), pad, False
        )
        np.testing.assert_array_equal(out, w[ids])
        gw = np.full((num, dim), 3.0, dtype)
        _fast.embedding_bw(code, nids, _addr(ids), True, num, dim, _addr(g), dim, _addr(gw), pad)
        np.testing.assert_allclose(gw, want, rtol=1e-5, atol=1e-5, err_msg=path)
        ids32 = ids.astype(np.int32)
        gw2 = np.empty_like(gw)
        _fast.embedding_bw(code, nids, _addr(ids32), False, num, dim, _addr(g), dim, _addr(gw2), pad)
        np.testing.assert_array_equal(gw2, gw)  # same order of additions for int32 ids and any thread count


def test_embedding_bad_id_raises():
    w = np.zeros((4, 3), np.float32)
    out = np.full((3, 3), 5.0, np.float32)
    for bad in (4, -1):
        ids = np.array([0, bad, 1], np.int64)
        with pytest.raises(IndexError, match=f"id {bad} is out of range for 4 rows"):
            _fast.embedding(3, _addr(ids), True, 4, _addr(w), 12, 12, _addr(out), None, False)
        with pytest.raises(IndexError, match=f"id {bad}"):
            _fast.embedding_bw(3, 3, _addr(ids), True, 4, 3, _addr(out), 3, _addr(w), None)
    assert (out == 5.0).all()


# ---- the op-level kernels take the C paths ----


def _counting(monkeypatch, name):
    calls = []
    real = getattr(_fast, name)
    monkeypatch.setattr(_fast, name, lambda *a: (calls.append(1), real(*a))[1])
    return calls


@pytest.mark.parametrize(
    "name,fn",
    [
        ("unary_nd", lambda x: plast.exp(x)),
        ("unary_nd", lambda x: plast.tanh(x.T)),
        ("reduce3d", lambda x: x.sum(-1)),
        ("reduce3d", lambda x: x.sum(0)),
        ("reduce3d", lambda x: x.amax(1)),
        ("softmax3d", lambda x: plast.softmax(x, -1)),
        ("softmax3d", lambda x: plast.log_softmax(x, 0)),
        ("logsumexp3d", lambda x: plast.logsumexp(x, -1)),
        ("layer_norm", lambda x: plast.layer_norm(x, (x.shape[-1],))),
        ("cross_entropy", lambda x: plast.cross_entropy(x, plast.tensor([1, 0, 3, 2, 2, 1]))),
    ],
)
def test_ops_use_fast_kernels(monkeypatch, name, fn):
    calls = _counting(monkeypatch, name)
    # the sum kernel calls the C reduction from Cython, past the spy: _fast counts those calls itself
    before = sum(_fast.reduce_calls().values())
    x = plast.randn(6, 5)
    fn(x).numpy()
    if name == "reduce3d" and sum(_fast.reduce_calls().values()) > before:
        calls.append(1)
    assert calls, f"{name} was not called"


def test_backward_kernels_use_fast_paths(monkeypatch):
    counts = {
        n: _counting(monkeypatch, n)
        for n in ("softmax_bw3d", "layer_norm_bw", "cross_entropy_bw", "embedding", "embedding_bw")
    }
    x = plast.randn(6, 5, requires_grad=True)
    w = plast.randn(7, 5, requires_grad=True)
    e = plast.embedding(plast.tensor([1, 2, 2, 6, 0, 3]), w)
    y = plast.layer_norm(x + e, (5,))
    loss = plast.cross_entropy(y, plast.tensor([1, 0, 3, 2, 2, 1])) + (plast.softmax(y, -1) * y).sum()
    loss.backward()
    assert all(counts.values()), {k: len(v) for k, v in counts.items()}
