"""plast's CPU GEMM (csrc/gemm.c via plast.kernels.cpu._gemm) against a float64 numpy reference.

Every SIMD path this CPU has is forced in turn, with 1 and 2 threads. Tolerances follow the error bound of a
length-K dot product (proportional to sqrt(K) * eps * (|A| @ |B|)), so a wrong element, a skipped k, a tile
written twice or an epilogue applied twice fails by orders of magnitude.
"""

import math

import numpy as np
import pytest

from plast.kernels.cpu import _gemm, _runtime

PATHS = [(simd, threads) for simd in _runtime.vector_paths() for threads in (1, 2)]
DTYPES = [np.float32, np.float64]
# Around the micro-tiles (4/6/12 rows; 8/16/32 columns) and the cache blocks (k 256/384, columns 240/480).
EDGE = [1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255, 257]


@pytest.fixture(params=PATHS, ids=[f"{s}-{t}t" for s, t in PATHS])
def path(request):
    simd, threads = request.param
    old = (_runtime.get_simd(), _runtime.get_num_threads())
    _runtime.set_simd(simd)
    _runtime.set_num_threads(threads)
    yield simd, threads
    _runtime.set_simd(old[0])
    _runtime.set_num_threads(old[1])


def _erfc(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x)


ACTS = {
    "none": lambda x: x,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "gelu": lambda x: 0.5 * x * _erfc(-x / math.sqrt(2.0)),  # 1 + erf(z) == erfc(-z), exact in the tail
}


def rand(rng, shape, dtype):
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


def check(out, a, b, *, alpha=1.0, beta=0.0, c=None, bias=None, bias_row=None, act="none", residual=None):
    """Assert out == act(alpha a@b + beta c + bias + bias_row) + residual within the dot-product error bound."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    pre = alpha * (a64 @ b64)
    mag = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if beta:
        pre = pre + beta * c.astype(np.float64)
        mag = mag + abs(beta) * np.abs(c.astype(np.float64))
    if bias is not None:
        pre = pre + bias.astype(np.float64)
        mag = mag + np.abs(bias.astype(np.float64))
    if bias_row is not None:
        pre = pre + bias_row.astype(np.float64)[..., :, None]
        mag = mag + np.abs(bias_row.astype(np.float64))[..., :, None]
    ref = ACTS[act](pre)
    if residual is not None:
        ref = ref + residual.astype(np.float64)
        mag = mag + np.abs(residual.astype(np.float64))
    eps = 6e-8 if out.dtype == np.float32 else 1.2e-16
    k = a.shape[-1]
    tol = 4 * eps * (math.sqrt(k) + 2) * (mag + np.abs(ref)) + (eps if act == "none" else 1e-6 * eps / 6e-8)
    assert out.shape == ref.shape
    err = np.abs(out.astype(np.float64) - ref)
    bad = ~(err <= tol)  # NaN counts as bad
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        pytest.fail(
            f"{int(bad.sum())} of {out.size} elements wrong; first at {idx}: got {out[idx]!r}, "
            f"expected {ref[idx]!r} (tolerance {tol[idx]:.3g})"
        )


# ---- shapes -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", EDGE)
def test_square_edges(path, dtype, n):
    rng = np.random.default_rng(n)
    a, b = rand(rng, (n, n), dtype), rand(rng, (n, n), dtype)
    check(_gemm.gemm(a, b), a, b)


MIXED = [
    (1, 1, 1),
    (1, 257, 33),
    (257, 1, 65),
    (17, 33, 1),
    (129, 7, 255),
    (63, 65, 127),
    (2, 3, 400),
    (13, 31, 385),
    (4, 8, 2),
    (64, 64, 64),
    (100, 481, 50),
    (37, 1000, 17),
    (520, 40, 70),
    (12, 32, 1),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mnk", MIXED, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("trans", [(0, 0), (0, 1), (1, 0), (1, 1)], ids=["nn", "nt", "tn", "tt"])
def test_mixed_shapes_and_transposes(path, dtype, mnk, trans):
    m, n, k = mnk
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    a = rand(rng, (k, m), dtype).T if trans[0] else rand(rng, (m, k), dtype)
    b = rand(rng, (n, k), dtype).T if trans[1] else rand(rng, (k, n), dtype)
    check(_gemm.gemm(a, b), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_odd(path, dtype):
    rng = np.random.default_rng(1)
    a, b = rand(rng, (1000, 1001), dtype), rand(rng, (1001, 999), dtype)
    check(_gemm.gemm(a, b), a, b)


@pytest.mark.parametrize("trans", [(0, 1), (1, 0), (1, 1)], ids=["nt", "tn", "tt"])
def test_large_odd_transposed(path, trans):
    rng = np.random.default_rng(2)
    a = rand(rng, (1001, 1000), np.float32).T if trans[0] else rand(rng, (1000, 1001), np.float32)
    b = rand(rng, (999, 1001), np.float32).T if trans[1] else rand(rng, (1001, 999), np.float32)
    check(_gemm.gemm(a, b), a, b)


@pytest.mark.parametrize("mnk", [(0, 5, 3), (5, 0, 3), (0, 0, 0), (4, 6, 0)], ids=str)
def test_zero_sizes(path, mnk):
    m, n, k = mnk
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    out = _gemm.gemm(a, b)
    assert out.shape == (m, n)
    assert (out == 0).all()
    # K == 0 with beta and an epilogue: out = act(beta * out + bias) + residual
    c = np.full((m, n), 2.0, np.float32)
    res = np.full((m, n), 0.5, np.float32)
    _gemm.gemm(a, b, c, beta=-1.0, bias=np.ones(n, np.float32), act="relu", residual=res)
    assert (c == 0.5).all()


# ---- layouts, alpha and beta --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", [(0, 0), (0, 1), (1, 0), (1, 1)], ids=["nn", "nt", "tn", "tt"])
def test_submatrix_views(path, dtype, trans):
    rng = np.random.default_rng(3)
    m, n, k = 67, 45, 131
    big_a = rand(rng, (300, 300), dtype)
    big_b = rand(rng, (300, 300), dtype)
    a = big_a[5 : 5 + k, 9 : 9 + m].T if trans[0] else big_a[5 : 5 + m, 9 : 9 + k]
    b = big_b[2 : 2 + n, 1 : 1 + k].T if trans[1] else big_b[2 : 2 + k, 1 : 1 + n]
    big_c = rand(rng, (200, 200), dtype)
    keep = big_c.copy()
    c = big_c[7 : 7 + m, 3 : 3 + n]
    c0 = c.copy()
    _gemm.gemm(a, b, c, alpha=0.75, beta=0.5)
    check(c, a, b, alpha=0.75, beta=0.5, c=c0)
    outside = np.ones(keep.shape, bool)
    outside[7 : 7 + m, 3 : 3 + n] = False
    assert (big_c[outside] == keep[outside]).all(), "wrote outside the out view"


# The A micro-panel packs (gemm_kernels.h): a transposed A copies each kk's rows of the panel (pack_a_rows on
# AVX2), a row-major A transposes 8-column blocks in registers (pack_trans6 on AVX2 float, whose stores overlap
# the next kk's slots). Around them: row counts below, at and past a panel (6 on AVX2, 4 scalar, 12 AVX-512), depths
# below, at and past a register block (8) and a cache block (kc 384 splits 385 in two), a padded leading dimension
# (the operand a window of a wider matrix, so reading or writing past a panel's rows would show), and the
# buffer's neighbour: the C around the window must stay as it was.
PANEL_M = [1, 4, 5, 6, 7, 11, 12, 13, 18, 37]
PANEL_K = [1, 7, 8, 9, 16, 17, 385]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ta", [0, 1], ids=["a", "aT"])
@pytest.mark.parametrize("m", PANEL_M)
@pytest.mark.parametrize("k", PANEL_K)
def test_a_panel_packing(path, dtype, ta, m, k):
    rng = np.random.default_rng(m * 1000 + k * 2 + ta)
    n = 19  # one full micro-tile of columns plus a partial one on every path
    big = rand(rng, (k + 9, m + 9) if ta else (m + 9, k + 9), dtype)
    a = big[3 : 3 + k, 2 : 2 + m].T if ta else big[3 : 3 + m, 2 : 2 + k]
    b = rand(rng, (k, n), dtype)
    big_c = np.full((m + 2, n + 2), 7.0, dtype)
    c = big_c[1 : 1 + m, 1 : 1 + n]
    _gemm.gemm(a, b, c)
    check(c, a, b)
    assert (big_c[0] == 7).all() and (big_c[-1] == 7).all()
    assert (big_c[:, 0] == 7).all() and (big_c[:, -1] == 7).all()


@pytest.mark.parametrize("ta", [0, 1], ids=["a", "aT"])
@pytest.mark.parametrize("tb", [0, 1], ids=["b", "bT"])
def test_bmm_attention_sizes(path, ta, tb):
    # the gpt workload's per-head products: a batch of small matrices, the weight gradient's A^T, both layouts
    rng = np.random.default_rng(11 + 2 * ta + tb)
    bsz, m, k, n = 12, 64, 32, 64
    a = np.swapaxes(rand(rng, (bsz, k, m), np.float32), 1, 2) if ta else rand(rng, (bsz, m, k), np.float32)
    b = np.swapaxes(rand(rng, (bsz, n, k), np.float32), 1, 2) if tb else rand(rng, (bsz, k, n), np.float32)
    out = _gemm.bmm(a, b)
    for i in range(bsz):
        check(out[i], a[i], b[i])


def test_strided_inputs_are_copied(path):
    rng = np.random.default_rng(4)
    a = rand(rng, (40, 60), np.float32)[:, ::2]  # no unit stride on either axis
    b = rand(rng, (30, 20), np.float32)[::-1]
    check(_gemm.gemm(a, b), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (-1.5, 0.5), (2.0, -1.0), (0.0, 0.5), (0.0, 0.0)])
def test_alpha_beta(path, dtype, alpha, beta):
    rng = np.random.default_rng(5)
    m, n, k = 70, 90, 500  # k above one cache block, so partial sums are accumulated
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    c = rand(rng, (m, n), dtype)
    c0 = c.copy()
    _gemm.gemm(a, b, c, alpha=alpha, beta=beta)
    check(c, a, b, alpha=alpha, beta=beta, c=c0)


def test_beta_zero_ignores_nan(path):
    rng = np.random.default_rng(6)
    a, b = rand(rng, (33, 40), np.float32), rand(rng, (40, 50), np.float32)
    c = np.full((33, 50), np.nan, np.float32)
    _gemm.gemm(a, b, c)
    check(c, a, b)


def test_nan_propagates(path):
    a, b = np.ones((20, 30), np.float32), np.ones((30, 40), np.float32)
    a[3, 7] = np.nan
    out = _gemm.gemm(a, b)
    assert np.isnan(out[3]).all()
    assert not np.isnan(np.delete(out, 3, axis=0)).any()


def test_out_aliasing_input(path):
    rng = np.random.default_rng(7)
    a = rand(rng, (64, 64), np.float32)
    b = rand(rng, (64, 64), np.float32)
    a0 = a.copy()
    _gemm.gemm(a, b, a)  # out is a: must read the old a
    check(a, a0, b)


# ---- epilogues ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("mnk", [(1, 1, 1), (29, 70, 19), (128, 512, 784), (13, 33, 400)], ids=str)
def test_epilogue(path, dtype, act, mnk):
    m, n, k = mnk
    rng = np.random.default_rng(m + n + k)
    a, b = rand(rng, (m, k), dtype) * 2, rand(rng, (n, k), dtype).T  # nt: the Linear layer's layout
    bias, bias_row = rand(rng, (n,), dtype), rand(rng, (m,), dtype)
    res = rand(rng, (m, n), dtype)
    out = _gemm.gemm(a, b, bias=bias, act=act)
    check(out, a, b, bias=bias, act=act)
    out = _gemm.gemm(a, b, bias=bias, bias_row=bias_row, act=act, residual=res, alpha=0.5)
    check(out, a, b, bias=bias, bias_row=bias_row, act=act, residual=res, alpha=0.5)
    c = rand(rng, (m, n), dtype)
    c0 = c.copy()
    _gemm.gemm(a, b, c, beta=1.0, bias_row=bias_row, act=act, residual=res[::-1])
    check(c, a, b, beta=1.0, c=c0, bias_row=bias_row, act=act, residual=res[::-1])


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh"])
def test_gelu_extremes(path, act):
    # large |x|: no overflow to NaN, and the negative tail keeps its relative accuracy
    x = np.array([[-60.0, -12.0, -5.0, -1e-3, 0.0, 1e-3, 5.0, 12.0, 60.0, 3e4, -3e4]], np.float32)
    one = np.ones((1, 1), np.float32)
    out = _gemm.gemm(x.T, one, act=act).T  # each x becomes one element of the product
    ref = ACTS[act](x.astype(np.float64))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-30)


def test_residual_view_and_sub_view(path):
    rng = np.random.default_rng(8)
    a, b = rand(rng, (50, 60), np.float32), rand(rng, (60, 70), np.float32)
    big = rand(rng, (100, 100), np.float32)
    res = big[10:60, 20:90]
    check(_gemm.gemm(a, b, residual=res), a, b, residual=res)
    check(_gemm.gemm(a, b, residual=big[20:90, 10:60].T), a, b, residual=big[20:90, 10:60].T)


# ---- batched ------------------------------------------------------------------------------------------------


def _bref(a, b):
    a3, b3 = (a if a.ndim == 3 else a[None]), (b if b.ndim == 3 else b[None])
    n = max(a3.shape[0], b3.shape[0])
    return np.broadcast_to(a3, (n,) + a3.shape[1:]), np.broadcast_to(b3, (n,) + b3.shape[1:])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "sa,sb",
    [
        ((5, 17, 33), (5, 33, 19)),
        ((5, 17, 33), (33, 19)),
        ((17, 33), (5, 33, 19)),
        ((1, 17, 33), (5, 33, 19)),
        ((6, 70, 130), (130, 90)),
        ((3, 129, 257), (3, 257, 65)),
        ((2, 1, 5), (2, 5, 1)),
        ((4, 3, 300), (1, 300, 40)),
    ],
    ids=str,
)
def test_bmm_broadcast(path, dtype, sa, sb):
    rng = np.random.default_rng(sum(sa) + sum(sb))
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    out = _gemm.bmm(a, b)
    aa, bb = _bref(a, b)
    assert out.shape == (aa.shape[0], aa.shape[1], bb.shape[2])
    for i in range(out.shape[0]):
        check(out[i], aa[i], bb[i])


@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm_transposed_views_epilogue_and_beta(path, dtype):
    rng = np.random.default_rng(9)
    bsz, m, n, k = 4, 37, 41, 150
    a = np.swapaxes(rand(rng, (bsz, k, m), dtype), 1, 2)
    b = np.swapaxes(rand(rng, (bsz, n, k), dtype), 1, 2)
    bias = rand(rng, (n,), dtype)
    res = rand(rng, (bsz, m, n), dtype)
    out = rand(rng, (bsz, m, n), dtype)
    out0 = out.copy()
    _gemm.bmm(a, b, out, beta=1.0, bias=bias, act="gelu_tanh", residual=res)
    for i in range(bsz):
        check(out[i], a[i], b[i], beta=1.0, c=out0[i], bias=bias, act="gelu_tanh", residual=res[i])


@pytest.mark.parametrize("bsz", [1, 2, 3, 8])
def test_bmm_folded_broadcast_weight(path, bsz):
    # (B, M, K) @ (K, N) with a contiguous stack folds into one (B*M, K) product; residual shared or per batch
    rng = np.random.default_rng(bsz)
    a, w = rand(rng, (bsz, 30, 64), np.float32), rand(rng, (64, 50), np.float32)
    bias = rand(rng, (50,), np.float32)
    for res in (rand(rng, (30, 50), np.float32), rand(rng, (bsz, 30, 50), np.float32)):
        out = _gemm.bmm(a, w, bias=bias, act="relu", residual=res)
        rb = np.broadcast_to(res, (bsz, 30, 50))
        for i in range(bsz):
            check(out[i], a[i], w, bias=bias, act="relu", residual=rb[i])


def test_bmm_out_batch_view(path):
    rng = np.random.default_rng(10)
    a, b = rand(rng, (3, 20, 30), np.float64), rand(rng, (3, 30, 25), np.float64)
    big = np.zeros((3, 40, 60))
    out = big[:, 5:25, 7:32]
    _gemm.bmm(a, b, out)
    for i in range(3):
        check(out[i], a[i], b[i])
    assert big[:, :5].sum() == 0 and big[:, 25:].sum() == 0 and big[:, :, :7].sum() == 0


# ---- argument errors ----------------------------------------------------------------------------------------


def test_errors():
    f, d = np.ones((3, 4), np.float32), np.ones((4, 5), np.float64)
    g = np.ones((4, 5), np.float32)
    with pytest.raises(TypeError, match="same dtype"):
        _gemm.gemm(f, d)
    with pytest.raises(TypeError, match="not supported"):
        _gemm.gemm(np.ones((3, 4), np.int64), np.ones((4, 5), np.int64))
    with pytest.raises(TypeError, match="numpy.ndarray"):
        _gemm.gemm([[1.0]], [[1.0]])
    with pytest.raises(ValueError, match="inner dimensions"):
        _gemm.gemm(f, f)
    with pytest.raises(ValueError, match="2-D"):
        _gemm.gemm(np.ones((2, 3, 4), np.float32), g)
    with pytest.raises(ValueError, match="shape"):
        _gemm.gemm(f, g, np.empty((3, 4), np.float32))
    with pytest.raises(TypeError, match="out is float64"):
        _gemm.gemm(f, g, np.empty((3, 5)))
    with pytest.raises(ValueError, match="row-major"):
        _gemm.gemm(f, g, np.empty((5, 3), np.float32).T)
    ro = np.empty((3, 5), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _gemm.gemm(f, g, ro)
    with pytest.raises(ValueError, match="bias must have shape"):
        _gemm.gemm(f, g, bias=np.ones(3, np.float32))
    with pytest.raises(TypeError, match="bias is float64"):
        _gemm.gemm(f, g, bias=np.ones(5))
    with pytest.raises(ValueError, match="bias_row must have shape"):
        _gemm.gemm(f, g, bias_row=np.ones(5, np.float32))
    with pytest.raises(ValueError, match="residual must have shape"):
        _gemm.gemm(f, g, residual=np.ones((5, 3), np.float32))
    with pytest.raises(ValueError, match="unknown act"):
        _gemm.gemm(f, g, act="tanh")
    with pytest.raises(ValueError, match="out must be given"):
        _gemm.gemm(f, g, beta=1.0)
    with pytest.raises(ValueError, match="do not broadcast"):
        _gemm.bmm(np.ones((2, 3, 4), np.float32), np.ones((3, 4, 5), np.float32))
    shared = np.lib.stride_tricks.as_strided(np.empty((3, 5), np.float32), (2, 3, 5), (0, 20, 4))
    with pytest.raises(ValueError, match="overlap"):
        _gemm.bmm(np.ones((2, 3, 4), np.float32), g, shared)
