"""The float64 paths of the vectorized kernels in _fast (reductions, softmax family, logsumexp, layer_norm,
cross-entropy, embedding backward, the vectorized unary ops): every SIMD level against torch in float64 at
rtol 1e-12, at odd sizes, unaligned and strided layouts, 1 and 2 threads; sums against exactly rounded
references; and the op-level kernels take these C paths for float64 instead of their numpy fallbacks."""

import math

import numpy as np
import pytest
import torch
from helpers import helper_test_op

import plast
from plast.kernels.cpu import _fast, _runtime, kernels, kernels_nn, kernels_reduce

SIZES = [1, 3, 17, 1000, 4097]
EPS = np.finfo(np.float64).eps
F64 = _fast.F64


def _addr(a):
    return a.__array_interface__["data"][0]


def _st(a):
    """Element strides of a float64 array."""
    return tuple(s // 8 for s in a.strides)


def unaligned(shape, fill, shift=8):
    """A float64 array of `shape` holding `fill`, starting `shift` bytes past a 64-byte boundary."""
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(n * 8 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + shift
    a = raw[start : start + n * 8].view(np.float64).reshape(shape)
    a[...] = fill
    return a


def _layouts3(rng, o, n, i, scale=3.0):
    """(o, n, i) float64 operands: contiguous and unaligned, inner dim outermost in memory (n strided), and a
    view with every stride > 1 (every kernel's gather path)."""
    base = rng.standard_normal((o, n, i)) * scale
    yield "unaligned", unaligned(base.shape, base)
    yield "n-strided", np.ascontiguousarray(base.transpose(2, 0, 1)).transpose(1, 2, 0)
    big = np.zeros((o, 2 * n, 2 * i))
    big[:, ::2, ::2] = base
    yield "all-strided", big[:, ::2, ::2]


def _paths(simd_paths, threads):
    for path in simd_paths:
        _runtime.set_simd(path)
        _runtime.set_num_threads(threads)
        yield path


# ---- reductions ----


def _reduce(op, x):
    """op over axis 1 of a 3-d float64 array, through _fast."""
    o, n, i = x.shape
    out = np.full((o, i), 123.0)
    _fast.reduce3d(op, o, n, i, _addr(x), _st(x), _addr(out), F64)
    return out


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("inner", [1, 37])
@pytest.mark.parametrize("threads", [1, 2])
def test_reduce_f64_matches_torch(simd_paths, rng, n, inner, threads):
    for label, x in _layouts3(rng, 3, n, inner):
        xt = torch.from_numpy(np.ascontiguousarray(x))
        want = {
            _fast.RD_SUM: xt.sum(1).numpy(),
            _fast.RD_MAX: xt.amax(1).numpy(),
            _fast.RD_MIN: xt.amin(1).numpy(),
        }
        scale = np.abs(x).sum(1)
        exact = np.array([[math.fsum(x[a, :, b]) for b in range(inner)] for a in range(3)])
        for path in _paths(simd_paths, threads):
            for op, ref in want.items():
                got = _reduce(op, x)
                if op == _fast.RD_SUM:
                    err = f"{label} {path}"
                    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15 * scale.max(), err_msg=err)
                    # rows sum pairwise (error like log2(n)), columns in blocks of 64 rows (like 64 + n / 64)
                    bound = (math.log2(n) + 8 if inner == 1 else 80) * EPS * scale
                    assert np.all(np.abs(got - exact) <= bound), err
                else:
                    np.testing.assert_array_equal(got, ref, err_msg=f"op {op} {label} {path}")


@pytest.mark.parametrize("threads", [1, 2])
def test_reduce_f64_long_rows_sum_pairwise(simd_paths, rng, threads):
    """A row long enough to split across threads: the chunks combine pairwise. 0.1 repeated is the textbook
    case where a plain running sum drifts (about n * eps relative) and a pairwise one doesn't."""
    n = (1 << 20) + 3
    rows = np.stack([np.full(n, 0.1), rng.standard_normal(n)])
    exact = [math.fsum(r) for r in rows]
    plain = np.cumsum(rows[0])[-1]
    assert abs(plain - exact[0]) > 1e-12 * abs(exact[0])  # the reference case really is hard for a plain sum
    for path in _paths(simd_paths, threads):
        for r, e in zip(rows, exact):
            got = _reduce(_fast.RD_SUM, r.reshape(1, n, 1))[0, 0]
            assert abs(got - e) <= 30 * EPS * np.abs(r).sum(), (path, got, e)
        got = _reduce(_fast.RD_SUM, rows.reshape(2, n, 1))[:, 0]
        np.testing.assert_allclose(got, exact, rtol=1e-13, err_msg=path)


def test_reduce_f64_specials(simd_paths):
    for n in (1, 17, 4097, 200_001):
        for special in (np.nan, np.inf, -np.inf):
            x = np.ones(n)
            x[n // 2] = special
            cols = np.ones((n, 3))
            cols[n // 2, 1] = special
            for path in _paths(simd_paths, 2):
                for op, ref in ((_fast.RD_SUM, np.sum), (_fast.RD_MAX, np.max), (_fast.RD_MIN, np.min)):
                    got = _reduce(op, x.reshape(1, n, 1))[0, 0]
                    np.testing.assert_array_equal(got, ref(x), err_msg=f"op {op} n={n} {special} {path}")
                    got3 = _reduce(op, cols.reshape(1, n, 3))[0]
                    np.testing.assert_array_equal(
                        got3, ref(cols, 0), err_msg=f"cols op {op} {special} {path}"
                    )


def test_reduce_f64_empty_and_bad_dtype():
    x = np.zeros((2, 0, 3))
    np.testing.assert_array_equal(_reduce(_fast.RD_SUM, x), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="max/min of nothing|unsupported"):
        _reduce(_fast.RD_MAX, x)
    with pytest.raises(ValueError, match="dtype code must be 3 .float32. or 4 .float64., got 2"):
        _fast.reduce3d(_fast.RD_SUM, 1, 1, 1, _addr(np.zeros(1)), (1, 1, 1), _addr(np.zeros(1)), 2)


# ---- softmax family ----


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("inner", [1, 5])
@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("threads", [1, 2])
def test_softmax_f64_matches_torch(simd_paths, rng, n, inner, mode, threads):
    shape = (3, n, inner)
    g = rng.standard_normal(shape) * rng.uniform(0.5, 2, shape)  # a non-uniform upstream gradient
    for label, x in _layouts3(rng, *shape):
        xt = torch.tensor(x, requires_grad=True)
        yt = torch.log_softmax(xt, 1) if mode == 2 else torch.softmax(xt, 1)
        yt.backward(torch.from_numpy(g))
        want, want_gx = yt.detach().numpy(), xt.grad.numpy()
        for path in _paths(simd_paths, threads):
            y = unaligned(shape, 0.0, shift=24)
            _fast.softmax3d(mode, *shape, _addr(x), _st(x), _addr(y), _st(y), F64)
            np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-14, err_msg=f"{label} {path}")
            gx = np.asfortranarray(g) if label != "unaligned" else g
            out = np.empty(shape)
            _fast.softmax_bw3d(mode, *shape, _addr(gx), _st(gx), _addr(y), _st(y), _addr(out), _st(out), F64)
            np.testing.assert_allclose(
                out, want_gx, rtol=1e-12, atol=1e-13, err_msg=f"backward {label} {path}"
            )


def test_softmax_f64_extremes(simd_paths):
    x = np.array(
        [
            [-np.inf] * 19,
            [0.0] * 18 + [np.nan],
            [1e300] + [-1e300] * 18,
            [-np.inf] * 18 + [5.0],
            [700.0] * 19,
        ],
    )
    t = torch.from_numpy(x)
    for path in _paths(simd_paths, 1):
        for mode in (0, 1, 2):
            want = (torch.log_softmax(t, 1) if mode == 2 else torch.softmax(t, 1)).numpy()
            if mode == 1:
                want[0] = 0  # the safe softmax: a row of only -inf gives zeros
            rows = np.empty_like(x)
            _fast.softmax3d(mode, 5, 19, 1, _addr(x), (19, 1, 1), _addr(rows), (19, 1, 1), F64)
            np.testing.assert_allclose(rows, want, rtol=1e-12, atol=1e-300, err_msg=f"rows {mode} {path}")
            xt = np.ascontiguousarray(x.T)
            cols = np.empty((19, 5))
            _fast.softmax3d(mode, 1, 19, 5, _addr(xt), (0, 5, 1), _addr(cols), (0, 5, 1), F64)
            np.testing.assert_allclose(cols.T, want, rtol=1e-12, atol=1e-300, err_msg=f"cols {mode} {path}")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("inner", [1, 21])
def test_logsumexp_f64_matches_torch(simd_paths, rng, n, inner):
    shape = (3, n, inner)
    for label, x in _layouts3(rng, *shape, scale=30.0):
        want = torch.logsumexp(torch.from_numpy(np.ascontiguousarray(x)), 1).numpy()
        for path in _paths(simd_paths, 2):
            out = np.empty((3, inner))
            _fast.logsumexp3d(*shape, _addr(x), _st(x), _addr(out), (inner, 0, 1), F64)
            np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-13, err_msg=f"{label} {path}")
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 1.0]])
    out = np.empty(3)
    _fast.logsumexp3d(3, 2, 1, _addr(x), (2, 1, 1), _addr(out), (1, 0, 1), F64)
    np.testing.assert_array_equal(out, torch.logsumexp(torch.from_numpy(x), 1).numpy())


# ---- layer norm ----


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_norm_f64_matches_torch(simd_paths, rng, n, affine, threads):
    rows = 7
    # rows 3 elements apart more than n (a strided view of a wider buffer), starting unaligned
    buf = unaligned((rows, n + 3), rng.standard_normal((rows, n + 3)) * 2 + 3)
    x = buf[:, :n]
    w = rng.standard_normal(n) if affine else None
    b = rng.standard_normal(n) if affine else None
    gy = rng.standard_normal((rows, n)) * rng.uniform(0.5, 2, (rows, n))
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True) if affine else None
    bt = torch.tensor(b, requires_grad=True) if affine else None
    yt = torch.nn.functional.layer_norm(xt, (n,), wt, bt, 1e-5)
    yt.backward(torch.from_numpy(gy))
    for path in _paths(simd_paths, threads):
        y, mean, rstd = np.empty((rows, n)), np.empty(rows), np.empty(rows)
        wa, ba = (_addr(w), _addr(b)) if affine else (0, 0)
        _fast.layer_norm(rows, n, _addr(x), n + 3, wa, ba, 1e-5, _addr(y), _addr(mean), _addr(rstd), F64)
        np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-12, atol=1e-12, err_msg=path)
        np.testing.assert_allclose(mean, x.mean(1), rtol=1e-13, err_msg=path)
        np.testing.assert_allclose(rstd, 1 / np.sqrt(x.var(1) + 1e-5), rtol=1e-12, err_msg=path)
        gx, gw, gb = np.empty((rows, n)), np.empty(n), np.empty(n)
        _fast.layer_norm_bw(
            rows,
            n,
            _addr(gy),
            n,
            _addr(x),
            n + 3,
            _addr(mean),
            _addr(rstd),
            wa,
            _addr(gx),
            _addr(gw),
            _addr(gb),
            F64,
        )
        np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=path)
        if affine:
            np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=path)
            np.testing.assert_allclose(gb, bt.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=path)


# ---- cross-entropy ----


def _xent_torch(x, t, w, ignore, eps, reduction, g):
    xt = torch.tensor(x, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(
        xt,
        torch.from_numpy(t.astype(np.int64)),
        torch.from_numpy(w) if w is not None else None,
        ignore_index=ignore,
        reduction=reduction,
        label_smoothing=eps,
    )
    loss.backward(torch.tensor(g))
    return loss.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("k", SIZES)
@pytest.mark.parametrize("layout", ["rows", "inner", "strided"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("variant", ["plain", "all"])
def test_cross_entropy_f64_matches_torch(simd_paths, rng, k, layout, reduction, variant):
    shape = (6, k, 3) if layout == "inner" else (6, k)
    x = rng.standard_normal(shape) * 3
    if layout == "strided":
        x = np.asfortranarray(x)  # classes contiguous across rows: every row is gathered
    tshape = (shape[0],) + shape[2:]
    t = rng.integers(0, k, tshape)
    w = ignore = None
    eps = 0.0
    ignore = -100
    if variant == "all":
        w = rng.uniform(0.2, 2, k)
        ignore = 0 if k > 1 else -100
        t.reshape(-1)[::3] = ignore
        eps = 0.1
    g = rng.uniform(0.5, 1.5, tshape) if reduction == "none" else np.float64(0.7)
    want, want_gx = _xent_torch(x, t, w, ignore, eps, reduction, g)
    inner = int(np.prod(shape[2:], dtype=np.int64))
    xs = (_st(x)[0], _st(x)[1], 1 if inner == 1 else _st(x)[2])
    for path in _paths(simd_paths, 2):
        out = np.empty(tshape if reduction == "none" else ())
        wa = _addr(w) if w is not None else 0
        _fast.cross_entropy(
            shape[0], k, inner, _addr(x), xs, _addr(t), True, wa, ignore, eps, reduction, _addr(out), F64
        )
        np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-13, err_msg=path)
        gx = np.empty(shape, order="F" if layout == "strided" else "C")
        gs = (_st(gx)[0], _st(gx)[1], 1 if inner == 1 else _st(gx)[2])
        gc = np.ascontiguousarray(g)
        _fast.cross_entropy_bw(
            shape[0],
            k,
            inner,
            _addr(x),
            xs,
            _addr(t),
            True,
            wa,
            ignore,
            eps,
            reduction,
            _addr(gc),
            _addr(gx),
            gs,
            F64,
        )
        np.testing.assert_allclose(gx, want_gx, rtol=1e-12, atol=1e-14, err_msg=path)


def test_cross_entropy_f64_bad_target_raises():
    x = np.zeros((4, 5))
    t = np.array([0, 1, 5, 2], np.int64)
    out = np.full((), 7.0)
    with pytest.raises(IndexError, match="target 5 is out of bounds for 5 classes"):
        _fast.cross_entropy(
            4, 5, 1, _addr(x), (5, 1, 1), _addr(t), True, 0, -100, 0.0, "mean", _addr(out), F64
        )
    assert out == 7.0  # nothing written


# ---- embedding backward ----


@pytest.mark.parametrize("dim", SIZES)
@pytest.mark.parametrize("threads", [1, 2])
def test_embedding_bw_f64(simd_paths, rng, dim, threads):
    num, nids = 50, 300
    ids = rng.integers(0, num, nids)
    ids[:4] = ids[0]
    g = rng.standard_normal((nids, dim + 2))[:, :dim]  # rows dim + 2 elements apart
    want = np.zeros((num, dim))
    np.add.at(want, ids, g)
    want[3] = 0
    for path in _paths(simd_paths, threads):
        out = np.full((num, dim), 5.0)
        _fast.embedding_bw(F64, nids, _addr(ids), True, num, dim, _addr(g), dim + 2, _addr(out), 3)
        np.testing.assert_array_equal(out, want, err_msg=path)  # same order of additions as np.add.at


# ---- unary ----


def _gelu_tanh(t):
    """x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): torch's tanh formula loses digits below x = -3 (1 +
    tanh(u) cancels, 1e-12 relative at x = -4, all of them by x = -8); this form has no cancellation."""
    return t / (1 + torch.exp(-2 * math.sqrt(2 / math.pi) * (t + 0.044715 * t**3)))


UNARY_TORCH = {
    "exp": torch.exp,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "abs": torch.abs,
    "neg": torch.neg,
    "silu": torch.nn.functional.silu,
    "reciprocal": torch.reciprocal,
    "square": torch.square,
    "sign": torch.sign,
    "gelu_tanh": _gelu_tanh,
}


def _unary(name, x, out):
    _fast.unary_nd(_fast.UNARY_CODES[name], F64, x.shape, _addr(x), _st(x), _addr(out), _st(out))
    return out


@pytest.mark.parametrize("name", sorted(UNARY_TORCH))
@pytest.mark.parametrize("n", SIZES)
def test_unary_f64_matches_torch(simd_paths, rng, name, n):
    lo, hi = (0.01, 30.0) if name in ("sqrt", "rsqrt", "reciprocal") else (-30.0, 30.0)
    base = rng.uniform(lo, hi, (n, 3))
    x = base[::-1, 1]  # a strided, reversed view
    want = UNARY_TORCH[name](torch.from_numpy(x.copy())).numpy()
    for path in _paths(simd_paths, 1):
        got = _unary(name, x, unaligned((n,), 0.0))
        # atol: results deep in the subnormals (silu, gelu_tanh of large negative x) carry few digits
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300, err_msg=f"{name} {path}")


def test_unary_f64_exp_range_and_specials(simd_paths):
    """exp over the whole double range: within 2 ulp of torch where the result is normal (1 ulp of the true
    value), subnormals and overflow as torch; inf / nan / zero handled like torch for every vectorized op (but
    sign(nan) is nan, as numpy and plast's float32 kernel, where torch gives 0)."""
    x = np.concatenate([np.linspace(-745.2, 709.79, 400_001), -(2.0 ** np.arange(-1074, 10, 0.5))])
    want = torch.exp(torch.from_numpy(x)).numpy()
    normal = (want >= np.finfo(np.float64).tiny) & np.isfinite(want)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e308, 5e-324])
    for path in _paths(simd_paths, 1):
        got = _unary("exp", x, np.empty_like(x))
        ulp = np.abs(got[normal] - want[normal]) / np.spacing(want[normal])
        assert ulp.max() <= 2.0, (path, ulp.max())
        np.testing.assert_allclose(got[~normal], want[~normal], rtol=1e-3, atol=0, err_msg=path)
        for name, fn in UNARY_TORCH.items():
            with np.errstate(all="ignore"):
                ref = fn(torch.from_numpy(specials)).numpy()
            if name == "sign":
                ref[0] = np.nan
            np.testing.assert_allclose(
                _unary(name, specials, np.empty_like(specials)),
                ref,
                rtol=1e-12,
                atol=0,
                err_msg=f"{name} {path}",
            )


# ---- the op-level kernels take the C paths for float64 ----


class _NumpyMathRaises:
    """Stands in for numpy in a kernels module: the reductions and math the numpy fallbacks use raise, the
    layout helpers the C paths use (ascontiguousarray, prod, dtypes) pass through."""

    BANNED = {
        "sum",
        "max",
        "min",
        "mean",
        "exp",
        "log",
        "subtract",
        "divide",
        "multiply",
        "where",
        "take",
        "add",
    }

    def __getattr__(self, name):
        if name in self.BANNED:
            raise AssertionError(f"numpy fallback used: np.{name}")
        return getattr(np, name)


class _Calls(list):
    """(entry, dtype code) per spied _fast call; `reduce_start`: _fast.reduce_calls() when the spies went in
    (the sum kernel calls the C reduction straight from Cython, past any spy)."""

    def seen(self, dtype):
        out = {name for name, d in self if d == dtype}
        if _fast.reduce_calls()[dtype] > self.reduce_start[dtype]:
            out.add("reduce3d")
        return out


@pytest.fixture
def no_numpy_fallback(monkeypatch):
    calls = _Calls()
    calls.reduce_start = _fast.reduce_calls()
    for mod in (kernels, kernels_nn, kernels_reduce):
        monkeypatch.setattr(mod, "np", _NumpyMathRaises())
    for name in (
        "reduce3d",
        "softmax3d",
        "softmax_bw3d",
        "logsumexp3d",
        "layer_norm",
        "layer_norm_bw",
        "cross_entropy",
        "cross_entropy_bw",
    ):
        real = getattr(_fast, name)

        def spy(*a, _real=real, _name=name):
            calls.append((_name, a[-1]))
            return _real(*a)

        monkeypatch.setattr(_fast, name, spy)
    return calls


F64_TOL = dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "shapes,fn,tfn,entries",
    [
        ([(5, 17)], lambda x: x.sum(-1), None, {"reduce3d"}),
        ([(1000, 3)], lambda x: x.sum(0), None, {"reduce3d"}),
        ([(4, 17, 3)], lambda x: x.amax(1), None, {"reduce3d"}),
        ([(4, 17, 3)], lambda x: x.amin((1, 2)), None, {"reduce3d"}),
        (
            [(6, 17)],
            lambda x: plast.softmax(x, -1),
            lambda x: torch.softmax(x, -1),
            {"softmax3d", "softmax_bw3d"},
        ),
        (
            [(17, 6)],
            lambda x: plast.log_softmax(x, 0),
            lambda x: torch.log_softmax(x, 0),
            {"softmax3d", "softmax_bw3d"},
        ),
        ([(6, 17)], lambda x: plast.logsumexp(x, -1), lambda x: torch.logsumexp(x, -1), {"logsumexp3d"}),
        (
            [(6, 17), (17,), (17,)],
            lambda x, w, b: plast.layer_norm(x, (17,), w, b),
            lambda x, w, b: torch.nn.functional.layer_norm(x, (17,), w, b),
            {"layer_norm", "layer_norm_bw"},
        ),
    ],
)
def test_ops_f64_use_c_kernels(no_numpy_fallback, shapes, fn, tfn, entries, device):
    helper_test_op(shapes, fn, tfn, dtype=np.float64, tol=F64_TOL, device=device)
    seen = no_numpy_fallback.seen(F64)
    assert entries <= seen, f"float64 C entries called: {seen}, expected {entries}"


def test_cross_entropy_f64_uses_c_kernels(no_numpy_fallback, rng):
    x = rng.standard_normal((6, 1000))
    t = rng.integers(0, 1000, 6)
    w = rng.uniform(0.5, 2, 1000)
    xp = plast.tensor(x, requires_grad=True)
    loss = plast.cross_entropy(xp, plast.tensor(t), plast.tensor(w), label_smoothing=0.1)
    loss.backward()
    xt = torch.tensor(x, requires_grad=True)
    lt = torch.nn.functional.cross_entropy(xt, torch.from_numpy(t), torch.from_numpy(w), label_smoothing=0.1)
    lt.backward()
    np.testing.assert_allclose(loss.detach().numpy(), lt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(xp.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-15)
    seen = no_numpy_fallback.seen(F64)
    assert {"cross_entropy", "cross_entropy_bw"} <= seen, seen
