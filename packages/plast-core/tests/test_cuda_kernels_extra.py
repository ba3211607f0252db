"""The device math of the last CUDA kernels (scatter_reduce, multinomial, reduce_prod_excl, reduce_svd), checked on
a machine without a GPU: each kernel's arithmetic lives in a header (kernels/*.cuh) that g++ compiles here into a
small shim, fed the CPU backend's inputs, and its results are compared with the CPU kernels (and numpy / torch).

What the shims run is the kernels' own code: the fold of a destination's run of source values
(scatter_reduce.cuh), the row CDF, search and race keys (multinomial.cuh), the row recursion (prod_excl.cuh),
and the whole one-sided Jacobi SVD driven by a one-thread team (svd.cuh), with the launcher's stride plan. The
CUDA-only parts (the sort, which sort.cu's GPU tests cover, and the warp/block plumbing) run on a GPU only, in
test_cuda.py. Skips where g++ is missing.
"""

import re
import shutil
import subprocess
import types

import numpy as np
import pytest

import plast
from plast.kernels.cuda import kernels_extra, loader

CXX = shutil.which("g++") or shutil.which("c++")


def _build(tmp_path_factory, name, source):
    if CXX is None:
        pytest.skip("no host C++ compiler (g++)")
    d = tmp_path_factory.mktemp(name)
    (d / "shim.cpp").write_text(source)
    exe = d / "shim"
    # -ffp-contract=off: the host rounds each operation by itself, as the CPU backend's numpy does
    # the include path nvcc gets (the kernels' folder, and _core for codes.h)
    cmd = [CXX, "-O2", "-std=c++17", "-ffp-contract=off", "-Wall", "-Werror", *loader.include_flags()]
    subprocess.run([*cmd, str(d / "shim.cpp"), "-o", str(exe), "-lm"], check=True)
    return exe


def _run(exe, args, data):
    res = subprocess.run([str(exe), *map(str, args)], input=data, capture_output=True, check=True)
    return res.stdout


# ---- scatter_reduce ---------------------------------------------------------------------------------------------

SCATTER_SHIM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>
#include "scatter_reduce.cuh"

template <typename T> static int run(int op, int inc, long n_out, long n) {
    std::vector<T> out(n_out), src(n);
    std::vector<int64_t> keys(n), order(n);
    if (fread(out.data(), sizeof(T), n_out, stdin) != (size_t)n_out) return 2;
    if (fread(keys.data(), 8, n, stdin) != (size_t)n) return 2;
    if (fread(src.data(), sizeof(T), n, stdin) != (size_t)n) return 2;
    for (long i = 0; i < n; i++) order[i] = i;
    // sort.cu's order: by key, ties in source order
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
    for (long p = 0; p < n; p++) {  // every slot, as the kernel's threads
        int64_t end;
        const int64_t key = plast_scatter_reduce_run_at(keys.data(), order.data(), n, p, &end);
        if (key < 0) continue;
        const int64_t *run = order.data() + p;
        out[key] = plast_scatter_reduce_run<T>(op, inc, out[key], end - p, [&](int64_t q) { return src[run[q]]; });
    }
    fwrite(out.data(), sizeof(T), n_out, stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 6) return 3;
    int code = atoi(argv[1]), op = atoi(argv[2]), inc = atoi(argv[3]);
    long n_out = atol(argv[4]), n = atol(argv[5]);
    switch (code) {
    case 0: return run<uint8_t>(op, inc, n_out, n);
    case 1: return run<int32_t>(op, inc, n_out, n);
    case 2: return run<int64_t>(op, inc, n_out, n);
    case 3: return run<float>(op, inc, n_out, n);
    default: return run<double>(op, inc, n_out, n);
    }
}
"""

CODES = {np.bool_: 0, np.int32: 1, np.int64: 2, np.float32: 3, np.float64: 4}


@pytest.fixture(scope="module")
def scatter_shim(tmp_path_factory):
    exe = _build(tmp_path_factory, "scatter_reduce", SCATTER_SHIM)

    def run(x, dim, idx, src, reduce, include_self):
        # the keys scatter_reduce_keys computes: the output offset each source element lands on
        coords = list(np.indices(idx.shape))
        coords[dim] = idx
        keys = np.ravel_multi_index(coords, x.shape).astype(np.int64).ravel()
        code = CODES[x.dtype.type]
        op = kernels_extra.SCATTER_REDUCE_CODES[reduce]
        data = np.ascontiguousarray(x).tobytes() + keys.tobytes() + np.ascontiguousarray(src).tobytes()
        out = _run(exe, [code, op, int(include_self), x.size, idx.size], data)
        return np.frombuffer(out, dtype=x.dtype).reshape(x.shape)

    return run


def _values(rng, shape, dt):
    if dt is np.bool_:
        return rng.random(shape) > 0.5
    if dt in (np.int32, np.int64):
        # big enough that int32 products wrap, as numpy's do
        return rng.integers(-3000, 3000, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


SCATTER_CASES = {
    # name: (x shape, dim, index shape, index range or None for the dim's size)
    "rows": ((5, 4), 0, (7, 3), None),
    "cols-3d": ((2, 6, 3), 1, (2, 9, 2), None),
    "long-runs": ((4,), 0, (300,), None),  # ~75 values per position: a float sum's rounding order shows
    "sparse-hits": ((50,), 0, (6,), None),  # most positions receive nothing
    "last-dim": ((3, 5), 1, (2, 5), 2),  # only positions 0 and 1 are hit
}


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("case", sorted(SCATTER_CASES))
def test_scatter_reduce_fold_matches_cpu_bit_for_bit(scatter_shim, dt, reduce, include_self, case):
    if dt is np.bool_ and reduce == "mean":
        pytest.skip("mean is refused for bool")
    xshape, dim, ishape, hi = SCATTER_CASES[case]
    rng = np.random.default_rng(abs(hash((case, reduce, str(dt), include_self))) % 2**32)
    x = _values(rng, xshape, dt)
    src = _values(rng, ishape, dt)
    idx = rng.integers(0, hi or xshape[dim], ishape).astype(np.int64)
    if dt in (np.float32, np.float64) and reduce in ("amax", "amin"):
        src.flat[::5] = np.nan  # NaN propagates, as through numpy's maximum/minimum
    want = plast.tensor(x).scatter_reduce(
        dim, plast.tensor(idx), plast.tensor(src), reduce, include_self=include_self
    )
    got = scatter_shim(x, dim, idx, src, reduce, include_self)
    np.testing.assert_array_equal(got, want.numpy())
    assert got.tobytes() == want.numpy().tobytes() or np.isnan(got).any()


def test_scatter_reduce_float_sum_follows_source_order(scatter_shim):
    """Values whose sum depends on the order: the fold takes them in source order, as the CPU does."""
    x = np.zeros(2, np.float32)
    src = np.array([1e8, 1.0, -1e8, 1.0, 3.0, 1e-8], np.float32)
    idx = np.array([0, 0, 0, 1, 1, 1])
    got = scatter_shim(x, 0, idx, src, "sum", True)
    want = plast.tensor(x).scatter_reduce(0, plast.tensor(idx), plast.tensor(src), "sum").numpy()
    assert got.tolist() == want.tolist() == [0.0, 4.0]


# ---- multinomial ------------------------------------------------------------------------------------------------

MULTINOMIAL_SHIM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>
#include "codes.h"  // PLAST_MN_*: what a bad row reports
#include "multinomial.cuh"

template <typename W> static int run(long rows, long cats, long ns, int repl) {
    const long R = repl ? ns : cats;
    std::vector<W> w(rows * cats);
    std::vector<double> u(rows * R), cdf(cats), keys(cats);
    std::vector<int64_t> out(rows * ns), status(rows), order(cats);
    if (fread(w.data(), sizeof(W), w.size(), stdin) != w.size()) return 2;
    if (fread(u.data(), 8, u.size(), stdin) != u.size()) return 2;
    for (long r = 0; r < rows; r++) {
        const W *wr = w.data() + r * cats;
        int64_t bad = -1;
        bool positive = false;
        if (repl) {
            const int64_t last = plast_mn_cdf_row<W>(wr, 1, cats, cdf.data(), &bad);
            positive = last >= 0;
            for (long s = 0; s < ns; s++) out[r * ns + s] = plast_mn_search(cdf.data(), cats, last, u[r * R + s]);
        } else {
            for (long j = 0; j < cats; j++) {
                if (!plast_mn_weight_ok((double)wr[j]) && bad < 0) bad = j;
                positive = positive || (double)wr[j] > 0.0;
                keys[j] = plast_mn_key((double)wr[j], u[r * R + j]);
                order[j] = j;
            }
            // sort.cu's descending order: larger keys first, ties in index order
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] > keys[b]; });
            for (long s = 0; s < ns; s++) out[r * ns + s] = order[s];
        }
        status[r] = bad >= 0 ? PLAST_MN_BAD_WEIGHT : positive ? 0 : PLAST_MN_NO_POSITIVE;
    }
    fwrite(out.data(), 8, out.size(), stdout);
    fwrite(status.data(), 8, status.size(), stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 6) return 3;
    long rows = atol(argv[2]), cats = atol(argv[3]), ns = atol(argv[4]);
    int repl = atoi(argv[5]);
    return atoi(argv[1]) ? run<double>(rows, cats, ns, repl) : run<float>(rows, cats, ns, repl);
}
"""


@pytest.fixture(scope="module")
def multinomial_shim(tmp_path_factory):
    exe = _build(tmp_path_factory, "multinomial", MULTINOMIAL_SHIM)

    def run(w, u, ns, replacement):
        rows, cats = w.shape
        data = np.ascontiguousarray(w).tobytes() + np.ascontiguousarray(u, np.float64).tobytes()
        out = _run(exe, [int(w.dtype == np.float64), rows, cats, ns, int(replacement)], data)
        res = np.frombuffer(out, dtype=np.int64)
        return res[: rows * ns].reshape(rows, ns), res[rows * ns :]

    return run


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("rows,cats,ns", [(3, 7, 4), (1, 1, 1), (4, 1000, 64), (2, 5, 5)])
def test_multinomial_same_seed_same_samples(multinomial_shim, dt, replacement, rows, cats, ns):
    """The uniforms the op layer draws for a seed, turned into indices by the kernels' code, give the CPU's
    samples for that seed."""
    rng = np.random.default_rng(rows * 1000 + cats)
    w = rng.random((rows, cats)).astype(dt)
    w[:, ::3] = 0  # zero weights: never drawn with replacement, last (in index order) without
    w[:, -1] += 0.5
    for seed in (0, 7, 2**40 + 3):
        want = plast.multinomial(
            plast.tensor(w), ns, replacement, generator=plast.Generator().manual_seed(seed)
        ).numpy()
        u = plast.rand(
            rows,
            ns if replacement else cats,
            generator=plast.Generator().manual_seed(seed),
            dtype=plast.float64,
        ).numpy()
        got, status = multinomial_shim(w, u, ns, replacement)
        np.testing.assert_array_equal(got, want)
        assert status.tolist() == [0] * rows


def test_multinomial_overflowing_total(multinomial_shim):
    """Weights whose running sum overflows: u * total is inf (or NaN for u = 0) and lies above every sum; the
    draw is then the last category with a positive weight, never a trailing zero-weight one (numpy sorts NaN
    last)."""
    from plast.kernels.cpu import kernels_reduce

    w = np.array([[1e308, 1e308, 0.0, 0.0], [1e308, 1.0, 1e308, 0.0]])
    u = np.array([[0.0, 0.25], [0.5, np.nextafter(1.0, 0.0)]])
    want = plast.tensor(np.zeros((2, 2), np.int64))
    node = types.SimpleNamespace(args=(2, True))
    with np.errstate(over="ignore", invalid="ignore"):  # the overflow is the point
        kernels_reduce.multinomial(node, [plast.tensor(w), plast.tensor(u)], [want])
    got, status = multinomial_shim(w, u, 2, True)
    np.testing.assert_array_equal(got, want.numpy())
    assert got.tolist() == [[1, 1], [2, 2]] and status.tolist() == [0, 0]


@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial_bad_weights_flag_the_cpu_errors(multinomial_shim, replacement):
    w = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 0.0], [1.0, -1.0, 1.0], [1.0, np.nan, 1.0], [np.inf, 1, 1]])
    u = np.full((5, 3), 0.5)
    _, status = multinomial_shim(w, u, 2, replacement)
    assert status.tolist() == [0, 2, 1, 1, 1]
    for row, flag in ((1, 2), (2, 1), (3, 1)):
        with pytest.raises(RuntimeError, match=re.escape(kernels_extra.MULTINOMIAL_ERRORS[flag])):
            plast.multinomial(plast.tensor(w[[0, row]]), 2, replacement).tolist()


# ---- prod's higher derivatives ------------------------------------------------------------------------------

PROD_EXCL_SHIM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include "prod_excl.cuh"

template <typename T> static int run(int r, long rows, long len) {
    std::vector<T> x(rows * len), g(r * rows * len), out(rows * len), pre(len << r), suf(1 << r);
    if (fread(x.data(), sizeof(T), x.size(), stdin) != x.size()) return 2;
    if (fread(g.data(), sizeof(T), g.size(), stdin) != g.size()) return 2;
    // the kernel's row call: g packed (r, rows, len)
    for (long row = 0; row < rows; row++)
        plast_prod_excl_row<T>(x.data() + row * len, 1, g.data() + row * len, rows * len, r, len,
                               out.data() + row * len, 1, pre.data(), suf.data());
    fwrite(out.data(), sizeof(T), out.size(), stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) return 3;
    int r = atoi(argv[2]);
    long rows = atol(argv[3]), len = atol(argv[4]);
    return atoi(argv[1]) ? run<double>(r, rows, len) : run<float>(r, rows, len);
}
"""


@pytest.fixture(scope="module")
def prod_excl_shim(tmp_path_factory):
    exe = _build(tmp_path_factory, "prod_excl", PROD_EXCL_SHIM)

    def run(x, gs):
        rows, length = x.shape
        data = np.ascontiguousarray(x).tobytes() + np.ascontiguousarray(np.stack(gs)).tobytes()
        out = _run(exe, [int(x.dtype == np.float64), len(gs), rows, length], data)
        return np.frombuffer(out, dtype=x.dtype).reshape(x.shape)

    return run


def _cpu_prod_excl(x, gs):
    from plast.kernels.cpu import kernels_reduce

    out = plast.tensor(np.zeros_like(x))
    node = types.SimpleNamespace(args=(1,))
    kernels_reduce.prod_excl(node, [plast.tensor(x)] + [plast.tensor(g) for g in gs], [out])
    return out.numpy()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("r", [2, 3, 4])
@pytest.mark.parametrize("length", [1, 2, 3, 6, 11])
def test_prod_excl_row_matches_cpu(prod_excl_shim, dt, r, length):
    rng = np.random.default_rng(r * 100 + length)
    x = rng.standard_normal((5, length)).astype(dt)
    x[1, 0] = 0  # one zero
    x[2, : min(2, length)] = 0  # two zeros
    x[3, : min(3, length)] = 0  # three zeros: only terms whose indices cover them survive
    gs = [rng.standard_normal((5, length)).astype(dt) for _ in range(r)]
    tol = dict(rtol=1e-5, atol=1e-6) if dt == np.float32 else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(prod_excl_shim(x, gs), _cpu_prod_excl(x, gs), **tol)


def test_prod_excl_is_prods_third_derivative(prod_excl_shim):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    x, g1, g2 = (rng.standard_normal((4, 6)) for _ in range(3))
    tx = torch.tensor(x, requires_grad=True)
    (d1,) = torch.autograd.grad(tx.prod(1).sum(), tx, create_graph=True)
    (d2,) = torch.autograd.grad((d1 * torch.tensor(g1)).sum(), tx, create_graph=True)
    (d3,) = torch.autograd.grad((d2 * torch.tensor(g2)).sum(), tx)
    np.testing.assert_allclose(prod_excl_shim(x, [g2, g1]), d3.numpy(), rtol=1e-10, atol=1e-12)


# ---- SVD ----------------------------------------------------------------------------------------------------

SVD_SHIM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include "svd.cuh"

// argv: f64 rows cols sr sc nb m n  w_which w_es w_rs w_bs  v_which v_es v_rs v_bs  (which: 0 = U, 1 = Vh)
template <typename T> static int run(char **argv) {
    const int rows = atoi(argv[2]), cols = atoi(argv[3]);
    const long sr = atol(argv[4]), sc = atol(argv[5]), nb = atol(argv[6]), m = atol(argv[7]), n = atol(argv[8]);
    const long k = cols, len = atol(argv[17]);
    std::vector<T> a(len), U(nb * m * k), S(nb * k), Vh(nb * k * n);
    std::vector<int64_t> offs(nb);
    std::vector<int> status(nb);
    if (fread(a.data(), sizeof(T), len, stdin) != (size_t)len) return 2;
    if (fread(offs.data(), 8, nb, stdin) != (size_t)nb) return 2;
    std::vector<T> W(rows * cols), V(cols * cols), sig(cols), red(32);
    std::vector<int> rank(cols);
    T *dst[2] = {U.data(), Vh.data()};
    const PlastSvdSerial team;
    const int wi = atoi(argv[9]), vi = atoi(argv[13]);
    for (long b = 0; b < nb; b++) {
        SvdOut<T> out{dst[wi] + b * atol(argv[12]), atol(argv[10]), atol(argv[11]),
                      dst[vi] + b * atol(argv[16]), atol(argv[14]), atol(argv[15]), S.data() + b * k};
        status[b] = plast_svd_matrix<T>(team, a.data() + offs[b], sr, sc, rows, cols, W.data(), V.data(),
                                        sig.data(), rank.data(), red.data(), out);
    }
    fwrite(U.data(), sizeof(T), U.size(), stdout);
    fwrite(S.data(), sizeof(T), S.size(), stdout);
    fwrite(Vh.data(), sizeof(T), Vh.size(), stdout);
    fwrite(status.data(), 4, nb, stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 18) return 3;
    return atoi(argv[1]) ? run<double>(argv) : run<float>(argv);
}
"""


@pytest.fixture(scope="module")
def svd_shim(tmp_path_factory):
    exe = _build(tmp_path_factory, "svd", SVD_SHIM)

    def run(a):
        """a: a numpy view (..., m, n), any strides >= 0; returns U, S, Vh, statuses as the kernel writes them."""
        dt, item = a.dtype, a.dtype.itemsize
        *batch, m, n = a.shape
        base = a.base if a.base is not None else a
        base = np.ascontiguousarray(base).reshape(-1)
        start = (a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
        strides = [s // item for s in a.strides]
        (sr, sc), (rows, cols), wdst, vdst = kernels_extra.svd_plan(m, n, strides[-2], strides[-1])
        nb = int(np.prod(batch))
        offs = np.array(
            [start + sum(i * s for i, s in zip(ix, strides[:-2])) for ix in np.ndindex(*batch)], np.int64
        )
        which = {"u": 0, "vh": 1}
        args = [int(dt == np.float64), rows, cols, sr, sc, nb, m, n]
        args += [which[wdst[0]], *wdst[1:], which[vdst[0]], *vdst[1:], base.size]
        out = _run(exe, args, base.tobytes() + offs.tobytes())
        k = min(m, n)
        sizes = [nb * m * k, nb * k, nb * k * n]
        parts, pos = [], 0
        for size in sizes:
            parts.append(np.frombuffer(out, dtype=dt, count=size, offset=pos))
            pos += size * item
        status = np.frombuffer(out, dtype=np.int32, offset=pos)
        return (
            parts[0].reshape(*batch, m, k),
            parts[1].reshape(*batch, k),
            parts[2].reshape(*batch, k, n),
            status,
        )

    return run


def _check_svd(a, u, s, vh, status, tol):
    assert (status > 0).all(), status
    a64 = a.astype(np.float64)
    u, s, vh = (t.astype(np.float64) for t in (u, s, vh))
    s_np = np.linalg.svd(a64, compute_uv=False)
    scale = max(float(np.abs(s_np).max(initial=0.0)), 1e-300)
    assert np.all(np.diff(s, axis=-1) <= 0), "singular values not descending"
    np.testing.assert_allclose(s, s_np, rtol=0, atol=tol * scale)
    k = s.shape[-1]
    np.testing.assert_allclose(u @ (s[..., None] * vh), a64, rtol=0, atol=tol * scale)
    eye = np.broadcast_to(np.eye(k), u.shape[:-2] + (k, k))
    np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, eye, rtol=0, atol=tol)
    np.testing.assert_allclose(vh @ np.swapaxes(vh, -1, -2), eye, rtol=0, atol=tol)
    # where singular values are apart, each u_j v_j^T is defined: it must be numpy's
    un, sn, vhn = np.linalg.svd(a64, full_matrices=False)
    flat = lambda t: t.reshape((-1,) + t.shape[-2:])  # noqa: E731
    for b, (sb, ub, vb, unb, vnb) in enumerate(
        zip(s_np.reshape(-1, k), flat(u), flat(vh), flat(un), flat(vhn))
    ):
        for j in range(k):
            gap = min([abs(sb[j] - sb[i]) for i in range(k) if i != j] + [np.inf])
            if sb[j] > 1e-3 * scale and gap > 1e-2 * scale:
                np.testing.assert_allclose(
                    np.outer(ub[:, j], vb[j]), np.outer(unb[:, j], vnb[j]), atol=20 * tol, err_msg=f"{b}:{j}"
                )


SVD_TOL = {np.float32: 2e-5, np.float64: 1e-12}


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape", [(1, 1), (1, 5), (5, 1), (3, 3), (6, 4), (4, 6), (2, 3, 5, 2), (20, 7), (7, 20), (33, 33)]
)
def test_svd_matches_numpy(svd_shim, dt, shape):
    a = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dt)
    _check_svd(a, *svd_shim(a), SVD_TOL[dt])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_svd_strided_batches(svd_shim, dt):
    base = np.random.default_rng(3).standard_normal((4, 6, 5)).astype(dt)
    for view in (base.transpose(0, 2, 1), base[::2, 1:, ::2], base.transpose(2, 1, 0)[:, :4]):
        _check_svd(view, *svd_shim(view), SVD_TOL[dt])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_svd_rank_deficient_and_special(svd_shim, dt):
    rng = np.random.default_rng(9)
    cases = {
        "rank-1": np.outer(rng.standard_normal(5), rng.standard_normal(4)),
        "zero-column": np.c_[rng.standard_normal((5, 2)), np.zeros(5), rng.standard_normal(5)],
        "zero": np.zeros((4, 3)),
        "repeated": 2 * np.linalg.qr(rng.standard_normal((5, 5)))[0],
        "huge": rng.standard_normal((4, 4)) * (1e30 if dt == np.float32 else 1e250),
        "tiny": rng.standard_normal((3, 4)) * (1e-30 if dt == np.float32 else 1e-250),
        "graded": rng.standard_normal((6, 6)) * np.logspace(0, -5, 6),
    }
    for name, a in cases.items():
        a = a.astype(dt)
        try:
            _check_svd(a, *svd_shim(a), SVD_TOL[dt])
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_svd_nonfinite_input_gives_nan(svd_shim, dt):
    a = np.random.default_rng(1).standard_normal((3, 4, 4)).astype(dt)
    a[1, 2, 3] = np.inf
    a[2, 0, 0] = np.nan
    u, s, vh, status = svd_shim(a)
    assert status.tolist()[1:] == [-2, -2] and status[0] > 0
    assert np.isnan(s[1:]).all() and np.isnan(u[1:]).all() and np.isnan(vh[1:]).all()
    _check_svd(a[:1], u[:1], s[:1], vh[:1], status[:1], SVD_TOL[dt])


def test_svd_sweep_limit_is_the_headers():
    text = (loader.KERNEL_DIR / "svd.cuh").read_text()
    assert f"#define PLAST_SVD_MAX_SWEEPS {kernels_extra.SVD_MAX_SWEEPS}\n" in text


def test_svd_size_limit():
    # the largest square matrices that fit in 48 KiB of shared memory, and a clear refusal above
    assert kernels_extra.svd_max_square(8) == 54 and kernels_extra.svd_max_square(4) == 77
    assert kernels_extra.svd_fits(54, 54, 8) and not kernels_extra.svd_fits(55, 55, 8)
    assert kernels_extra.svd_fits(300, 8, 8) and not kernels_extra.svd_fits(8, 800, 8)

    class Out:
        def __init__(self, shape):
            self._shape, self.dtype = shape, plast.float64

        def numel(self):
            return int(np.prod(self._shape))

    x = types.SimpleNamespace(
        _shape=(60, 60),
        _strides=(60, 1),
        _offset=0,
        dtype=plast.float64,
        _storage=types.SimpleNamespace(address=0),
    )
    with pytest.raises(NotImplementedError, match=r"up to 54 x 54.*got 60 x 60.*cpu\(\)"):
        kernels_extra.svd(None, [x], [Out((60, 60)), Out((60,)), Out((60, 60))])
