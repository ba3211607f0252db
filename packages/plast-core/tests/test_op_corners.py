"""The op set's former NotImplementedError corners against torch 2.13 (CPU): layer_norm double backward,
where(cond) / nonzero, scatter(reduce=) and scatter_reduce, matrix norms, prod's higher derivatives and
embedding(max_norm=, scale_grad_by_freq=). Forward values, gradients (non-uniform upstream), float32 and
float64, non-contiguous inputs, double backward against torch and float64 finite differences where torch has no
twin (or a wrong one)."""

import math

import numpy as np
import pytest
from helpers import TOL
from test_nn_helpers import compare, double_backward

import plast
from plast.ops.reduce import matrix_norm, vector_norm

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = [np.float32, np.float64]


def _u(shape, dtype=np.float64, lo=-2.0, hi=2.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def _fd_grad(f, arr, up, eps=1e-6):
    """Central finite differences of sum(f(arr) * up) with respect to arr (float64 numpy in, numpy out)."""
    num = np.zeros_like(arr)
    for idx in np.ndindex(arr.shape):
        hi, lo = arr.copy(), arr.copy()
        hi[idx] += eps
        lo[idx] -= eps
        num[idx] = ((f(hi) - f(lo)) * up).sum() / (2 * eps)
    return num


# ---------------------------------------------------------------- layer_norm double backward

LN_CASES = [((4, 6), (6,)), ((2, 3, 4), (3, 4)), ((5,), (5,)), ((3, 1), (1,))]


@pytest.mark.parametrize("xshape,ns", LN_CASES)
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_layer_norm_double_backward_vs_torch(xshape, ns, affine, device):
    arrays = [_u(xshape)]
    if affine != "none":
        arrays.append(_u(ns, lo=0.5, hi=1.5, seed=1))
    if affine == "both":
        arrays.append(_u(ns, seed=2))

    def fp(x, *p):
        return plast.layer_norm(x, ns, *p, eps=1e-3)

    def ft(x, *p):
        return F.layer_norm(x, ns, *p, eps=1e-3)

    double_backward(fp, ft, arrays, grad=tuple(range(len(arrays))), device=device)


def test_layer_norm_double_backward_non_contiguous(device):
    x = _u((6, 4), seed=3)
    w = _u((6,), lo=0.5, hi=1.5, seed=4)
    double_backward(
        lambda a, b: plast.layer_norm(a.T, (6,), b),
        lambda a, b: F.layer_norm(a.T, (6,), b),
        [x, w],
        grad=(0, 1),
        device=device,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_create_graph_first_gradient(dtype):
    """The composed (create_graph) backward gives the same first gradients as torch, float32 included."""
    x, w, b = _u((3, 5), dtype), _u((5,), dtype, 0.5, 1.5, 1), _u((5,), dtype, seed=2)
    up = _u((3, 5), dtype, 0.5, 1.5, seed=5)
    ps = [plast.tensor(a, requires_grad=True) for a in (x, w, b)]
    ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    gp = plast.autograd.grad(
        plast.layer_norm(ps[0], (5,), ps[1], ps[2]), ps, plast.tensor(up), create_graph=True
    )
    gt = torch.autograd.grad(F.layer_norm(ts[0], (5,), ts[1], ts[2]), ts, torch.tensor(up), create_graph=True)
    for a, c in zip(gp, gt):
        np.testing.assert_allclose(a.detach().numpy(), c.detach().numpy(), **TOL[dtype])


def test_layer_norm_third_derivative_finite_differences():
    """Third order: checked against finite differences of plast's (torch-verified) second derivative. torch's
    own third derivative is not an oracle here: it drops the gradients that reach the saved mean and rstd."""
    x = _u((2, 5), seed=6)
    w = _u((5,), lo=0.5, hi=1.5, seed=7)
    up = _u((2, 5), lo=0.5, hi=1.5, seed=8)
    v = _u((2, 5), seed=9)

    def second(xa, create):
        px = plast.tensor(xa, requires_grad=True)
        (g,) = plast.autograd.grad(
            plast.layer_norm(px, (5,), plast.tensor(w)), [px], plast.tensor(up), create_graph=True
        )
        (h,) = plast.autograd.grad((g * plast.tensor(v)).sum(), [px], create_graph=create)
        return px, h

    px, h = second(x, True)
    (t,) = plast.autograd.grad((h * h).sum(), [px])
    num = _fd_grad(lambda a: (second(a, False)[1].numpy() ** 2).sum(), x, 1.0)
    np.testing.assert_allclose(t.numpy(), num, rtol=1e-5, atol=1e-6)


def test_layer_norm_plain_backward_keeps_the_fused_kernel(monkeypatch):
    from plast.ops.registry import OPS

    row = OPS["layer_norm_backward"]
    calls = []
    kernel = row.kernels["cpu"]
    monkeypatch.setitem(row.kernels, "cpu", lambda n, i, o: (calls.append(1), kernel(n, i, o))[1])
    x = plast.tensor(_u((3, 4)), requires_grad=True)
    plast.layer_norm(x, (4,)).sum().backward()
    assert len(calls) == 1
    (g,) = plast.autograd.grad(plast.layer_norm(x, (4,)).sum(), [x], create_graph=True)
    g.sum().backward()
    assert len(calls) == 1  # the create_graph backward is composed of plast ops


# ---------------------------------------------------------------- where(cond) / nonzero


def _where_inputs():
    rng = np.random.default_rng(10)
    return [
        rng.uniform(size=(3, 4)) > 0.5,
        rng.integers(-1, 2, (2, 3, 2)),
        rng.integers(-1, 2, (5,)).astype(np.float32),
        np.array(True),
        np.array(0.0),
        np.zeros((0, 3), np.bool_),
        np.zeros((2, 2), np.int64),
    ]


@pytest.mark.parametrize("case", range(7))
@pytest.mark.parametrize("transposed", [False, True])
def test_where_one_argument_and_nonzero(case, transposed):
    a = _where_inputs()[case]
    p, t = plast.tensor(a), torch.tensor(a)
    if transposed and a.ndim >= 2:
        p, t = p.transpose(0, 1), t.transpose(0, 1)
    wp, wt = plast.where(p), torch.where(t)
    assert isinstance(wp, tuple) and len(wp) == len(wt)
    for x, y in zip(wp, wt):
        assert x.dtype is plast.int64 and tuple(x.shape) == tuple(y.shape)
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    for x, y in zip(plast.nonzero(p, as_tuple=True), torch.nonzero(t, as_tuple=True)):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    nz_p, nz_t = p.nonzero(), torch.nonzero(t)
    assert tuple(nz_p.shape) == tuple(nz_t.shape)
    np.testing.assert_array_equal(nz_p.numpy(), nz_t.numpy())


def test_where_one_argument_on_a_lazy_result_and_errors():
    x = plast.tensor([[1.0, -2.0], [3.0, -4.0]])
    rows, cols = plast.where(x > 0)
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 0]
    with pytest.raises(TypeError, match="condition must be a tensor"):
        plast.where([True, False])
    with pytest.raises(TypeError, match="both input and other"):
        plast.where(x > 0, x)


# ---------------------------------------------------------------- scatter_reduce

REDUCTIONS = ["sum", "prod", "mean", "amax", "amin"]


def _scatter_case(dim, seed, ties=True, dtype=np.float64):
    rng = np.random.default_rng(seed)
    draw = (lambda s: rng.integers(-2, 3, s).astype(dtype)) if ties else (lambda s: rng.uniform(-2, 2, s))
    x = draw((4, 5)).astype(dtype)
    ishape = (3, 5) if dim == 0 else (4, 3)
    idx = rng.integers(0, 4 if dim == 0 else 5, ishape)
    return x, idx, draw(ishape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("ties", [True, False])
def test_scatter_reduce_vs_torch(dtype, reduce, include_self, dim, ties, device):
    x, idx, src = _scatter_case(dim % 2, 11, ties, dtype)
    compare(
        lambda a, i, s: a.scatter_reduce(dim, i, s, reduce, include_self=include_self),
        lambda a, i, s: a.scatter_reduce(dim, i, s, reduce, include_self=include_self),
        [x, idx, src],
        grad=(0, 2),
        dtype=dtype,
        device=device,
    )
    compare(
        lambda a, i, s: plast.scatter_reduce(a, dim, i, s, reduce, include_self=include_self),
        lambda a, i, s: torch.scatter_reduce(a, dim, i, s, reduce, include_self=include_self),
        [x, idx, src],
        dtype=dtype,
        device=device,
    )


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_non_contiguous(reduce, device):
    x, idx, src = _scatter_case(1, 12, ties=False)

    def tr(i, t):
        return t.T if i != 1 else t.T.contiguous() if isinstance(t, torch.Tensor) else t.T.contiguous()

    compare(
        lambda a, i, s: a.scatter_reduce(0, i, s, reduce),
        lambda a, i, s: a.scatter_reduce(0, i, s, reduce),
        [x, idx, src],
        grad=(0, 2),
        dtype=np.float64,
        transform=tr,
        device=device,
    )


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_double_backward(reduce, include_self, device):
    x, idx, src = _scatter_case(0, 13, ties=False)
    fn = lambda a, i, s: a.scatter_reduce(0, i, s, reduce, include_self=include_self)  # noqa: E731
    double_backward(fn, fn, [x, idx, src], grad=(0, 2), device=device)


def test_scatter_reduce_prod_with_zeros(device):
    x = np.array([[0.0, 2.0, 3.0], [1.5, 0.0, -1.0], [2.0, 1.0, 0.5]])
    idx = np.array([[0, 1, 2], [0, 1, 1], [2, 1, 0]])
    src = np.array([[0.0, 3.0, 2.0], [4.0, 0.0, 0.0], [0.5, 0.0, 2.0]])
    for include_self in (True, False):
        fn = lambda a, i, s, inc=include_self: a.scatter_reduce(0, i, s, "prod", include_self=inc)  # noqa: E731
        compare(fn, fn, [x, idx, src], grad=(0, 2), dtype=np.float64, device=device)
    # one zero per position: double backward works and matches torch
    src1 = np.array([[0.0, 3.0, 2.0], [4.0, 0.5, 1.0], [0.5, 0.0, 2.0]])
    fn = lambda a, i, s: a.scatter_reduce(0, i, s, "prod")  # noqa: E731
    double_backward(fn, fn, [x, idx, src1], grad=(0, 2), device=device)


def test_scatter_reduce_prod_double_backward_with_two_zeros_raises_like_torch():
    x = np.ones((3,))
    idx = np.array([0, 0, 1])
    src = np.array([0.0, 0.0, 2.0])
    for m in (plast, torch):
        a = m.tensor(x, requires_grad=True)
        s = m.tensor(src, requires_grad=True)
        (g,) = m.autograd.grad(a.scatter_reduce(0, m.tensor(idx), s, "prod").sum(), [s], create_graph=True)
        assert g.detach().tolist() == [0.0, 0.0, 1.0]
        with pytest.raises(RuntimeError, match="(?i)double backward is unsupported"):
            m.autograd.grad((g * g).sum(), [s])


def test_scatter_reduce_index_smaller_than_src():
    """Only index's part of src takes part; torch computes the forward but fails in backward here, so the
    gradient is checked with finite differences."""
    x = _u((3, 4), seed=14)
    idx = np.array([[0, 1], [2, 0]])
    src = _u((3, 5), seed=15)
    for reduce in REDUCTIONS:
        out = plast.tensor(x).scatter_reduce(0, plast.tensor(idx), plast.tensor(src), reduce)
        want = torch.tensor(x).scatter_reduce(0, torch.tensor(idx), torch.tensor(src), reduce)
        np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-12)
        ps = plast.tensor(src, requires_grad=True)
        up = _u((3, 4), lo=0.5, hi=1.5, seed=16)
        plast.tensor(x).scatter_reduce(0, plast.tensor(idx), ps, reduce).backward(plast.tensor(up))

        def f(s, reduce=reduce):
            return plast.tensor(x).scatter_reduce(0, plast.tensor(idx), plast.tensor(s), reduce).numpy()

        np.testing.assert_allclose(ps.grad.numpy(), _fd_grad(f, src, up), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_integers(reduce, include_self):
    rng = np.random.default_rng(17)
    x = rng.integers(-9, 10, (4, 3))
    idx = rng.integers(0, 4, (5, 3))
    src = rng.integers(-9, 10, (5, 3))
    for dt in (np.int64, np.int32):
        got = plast.tensor(x.astype(dt)).scatter_reduce(
            0, plast.tensor(idx), plast.tensor(src.astype(dt)), reduce, include_self=include_self
        )
        want = torch.tensor(x.astype(dt)).scatter_reduce(
            0, torch.tensor(idx), torch.tensor(src.astype(dt)), reduce, include_self=include_self
        )
        assert got.dtype.name == str(want.dtype).replace("torch.", "")
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_scatter_reduce_nan_empty_zero_d_and_inplace():
    nan = float("nan")
    for m in (plast, torch):
        a = m.ones(3).scatter_reduce(0, m.tensor([0, 0]), m.tensor([5.0, nan]), "amax")
        assert math.isnan(a.tolist()[0]) and a.tolist()[1:] == [1.0, 1.0]
    x = _u((3, 2), seed=18)
    e = plast.tensor(x).scatter_reduce(
        0, plast.zeros(0, 2, dtype=plast.int64), plast.zeros(0, 2, dtype=plast.float64), "prod"
    )
    np.testing.assert_array_equal(e.numpy(), x)
    got = plast.tensor(2.0).scatter_reduce(0, plast.tensor(0), plast.tensor(3.0), "prod")
    want = torch.tensor(2.0).scatter_reduce(0, torch.tensor(0), torch.tensor(3.0), "prod")
    assert got.shape == () and got.item() == want.item()
    res = []
    for m in (plast, torch):
        t = m.tensor(x)
        t.scatter_reduce_(1, m.tensor([[1, 1], [0, 1], [0, 0]]), m.tensor(x * 2), "mean", include_self=False)
        res.append(t.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-12)


def test_scatter_reduce_errors():
    x = plast.zeros(3, 4)
    src = plast.ones(2, 4)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.scatter_reduce(0, plast.tensor([[3, 0, 0, 0]]), src, "sum")
    with pytest.raises(IndexError, match="index -1 is out of bounds for dimension 1 with size 4"):
        x.scatter_reduce(1, plast.tensor([[-1]]), src, "amax")
    with pytest.raises(ValueError, match="'sum', 'prod', 'mean', 'amax', 'amin'"):
        x.scatter_reduce(0, plast.tensor([[0]]), src, "max_abs")
    with pytest.raises(plast.DTypeError, match="float64"):
        x.scatter_reduce(0, plast.tensor([[0]]), src.double(), "sum")
    with pytest.raises(plast.DTypeError, match="bool"):
        plast.ones(2, dtype=plast.bool).scatter_reduce(
            0, plast.tensor([0]), plast.ones(1, dtype=plast.bool), "mean"
        )
    with pytest.raises(plast.ShapeError):
        x.scatter_reduce(0, plast.tensor([[0, 1, 2, 0, 1]]), src, "sum")
    with pytest.raises(TypeError, match="src must be a tensor"):
        x.scatter_reduce(0, plast.tensor([[0]]), 1.0, "sum")


# ---------------------------------------------------------------- scatter(reduce='add' | 'multiply')


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_legacy_reduce_forward(dtype, reduce):
    x, idx, src = _scatter_case(1, 19, ties=False, dtype=dtype)
    for s_p, s_t in [(plast.tensor(src), torch.tensor(src)), (2.5, 2.5)]:
        got = plast.tensor(x).scatter(1, plast.tensor(idx), s_p, reduce=reduce)
        want = torch.tensor(x).scatter(1, torch.tensor(idx), s_t, reduce=reduce)
        np.testing.assert_allclose(got.numpy(), want.numpy(), **TOL[dtype])
        t_p, t_t = plast.tensor(x), torch.tensor(x)
        t_p.scatter_(1, plast.tensor(idx), s_p, reduce=reduce)
        t_t.scatter_(1, torch.tensor(idx), s_t, reduce=reduce)
        np.testing.assert_allclose(t_p.numpy(), t_t.numpy(), **TOL[dtype])


def test_scatter_multiply_gradient_finite_differences():
    """torch has no derivative for scatter(reduce=); plast's 'multiply' differentiates like
    scatter_reduce(..., 'prod'), checked here with finite differences."""
    x, idx, src = _scatter_case(0, 20, ties=False)
    up = _u(x.shape, lo=0.5, hi=1.5, seed=21)
    px, ps = plast.tensor(x, requires_grad=True), plast.tensor(src, requires_grad=True)
    px.scatter(0, plast.tensor(idx), ps, reduce="multiply").backward(plast.tensor(up))

    def fx(a):
        return plast.tensor(a).scatter(0, plast.tensor(idx), plast.tensor(src), reduce="multiply").numpy()

    def fs(s):
        return plast.tensor(x).scatter(0, plast.tensor(idx), plast.tensor(s), reduce="multiply").numpy()

    np.testing.assert_allclose(px.grad.numpy(), _fd_grad(fx, x, up), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ps.grad.numpy(), _fd_grad(fs, src, up), rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- matrix norms

ORDS = ["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf]
MATRIX_CASES = [
    ((3, 4), (-2, -1)),
    ((4, 3), (0, 1)),
    ((2, 5, 3), (0, 2)),
    ((4, 3, 2), (2, 0)),
    ((3, 3), (1, 0)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ord", ORDS, ids=str)
@pytest.mark.parametrize("shape,dim", MATRIX_CASES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm_vs_torch(dtype, ord, shape, dim, keepdim, device):  # noqa: A002
    compare(
        lambda a: matrix_norm(a, ord, dim, keepdim),
        lambda a: torch.linalg.matrix_norm(a, ord, dim, keepdim),
        [_u(shape, dtype, seed=22)],
        grad=(0,),
        dtype=dtype,
        device=device,
    )


@pytest.mark.parametrize("ord", ORDS, ids=str)
def test_matrix_norm_non_contiguous_and_ties(ord, device):  # noqa: A002
    compare(
        lambda a: matrix_norm(a.transpose(0, 2), ord, (0, 1)),
        lambda a: torch.linalg.matrix_norm(a.transpose(0, 2), ord, (0, 1)),
        [_u((3, 2, 4), seed=23)],
        grad=(0,),
        dtype=np.float64,
        device=device,
    )
    if ord not in ("nuc", 2, -2):  # equal row / column sums share the gradient of max/min, as in torch
        tied = np.array([[1.0, -2.0], [-2.0, 1.0]])
        compare(
            lambda a: matrix_norm(a, ord),
            lambda a: torch.linalg.matrix_norm(a, ord),
            [tied],
            grad=(0,),
            dtype=np.float64,
            device=device,
        )


@pytest.mark.parametrize("ord", ["nuc", 2, -2, "fro"], ids=str)  # 1 / inf are piecewise linear
@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (2, 3, 3)])
def test_matrix_norm_double_backward(ord, shape, device):  # noqa: A002
    double_backward(
        lambda a: matrix_norm(a, ord),
        lambda a: torch.linalg.matrix_norm(a, ord),
        [_u(shape, seed=24)],
        grad=(0,),
        tol=dict(rtol=1e-7, atol=1e-9),
        device=device,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_norm_nuc_and_vector_semantics_like_torch(dtype, device):
    a = _u((3, 4), dtype, seed=25)
    b = _u((2, 3, 4), dtype, seed=26)
    compare(lambda x: x.norm("nuc"), lambda x: x.norm("nuc"), [a], grad=(0,), dtype=dtype, device=device)
    compare(
        lambda x: plast.norm(x, "nuc", dim=(0, 2), keepdim=True),
        lambda x: torch.norm(x, "nuc", dim=(0, 2), keepdim=True),
        [b],
        grad=(0,),
        dtype=dtype,
        device=device,
    )
    # torch.norm: a number p over two dims is still the vector norm (matrix norms are linalg.matrix_norm's)
    for p in (2, 1, math.inf, 3):
        compare(
            lambda x, p=p: x.norm(p, dim=(0, 1)),
            lambda x, p=p: x.norm(p, dim=(0, 1)),
            [a],
            grad=(0,),
            dtype=dtype,
            device=device,
        )
    compare(
        lambda x: x.norm("fro", dim=(1, 2)),
        lambda x: x.norm("fro", dim=(1, 2)),
        [b],
        grad=(0,),
        dtype=dtype,
        device=device,
    )


def test_vector_norm_vs_torch(device):
    a = _u((3, 4, 2), seed=27)
    for ord_, dim, keepdim in [
        (2, None, False),
        (1, (0, 2), True),
        (math.inf, 1, False),
        (0.5, -1, False),
        (3, (0, 1, 2), True),
    ]:
        compare(
            lambda x, o=ord_, d=dim, k=keepdim: vector_norm(x, o, d, k),
            lambda x, o=ord_, d=dim, k=keepdim: torch.linalg.vector_norm(x, o, d, k),
            [a],
            grad=(0,),
            dtype=np.float64,
            device=device,
        )


def test_matrix_norm_errors():
    with pytest.raises(ValueError, match="2-tuple"):
        plast.ones(2, 3, 4).norm("nuc")
    with pytest.raises(ValueError, match="2-tuple"):
        plast.ones(2, 3, 4).norm("fro", dim=(0, 1, 2))
    with pytest.raises(ValueError, match="2-tuple"):
        plast.ones(2, 3).norm("nuc", dim=1)
    with pytest.raises(plast.ShapeError, match=r"\(3,\)"):
        matrix_norm(plast.ones(3), "nuc")
    with pytest.raises(ValueError, match="different"):
        matrix_norm(plast.ones(3, 3), 2, (1, 1))
    with pytest.raises(ValueError, match="order 3"):
        matrix_norm(plast.ones(3, 3), 3)
    with pytest.raises(plast.DTypeError):
        matrix_norm(plast.ones(3, 3, dtype=plast.int64), "nuc")
    with pytest.raises(RuntimeError, match="did not converge"):
        matrix_norm(plast.tensor([[float("nan"), 1.0], [0.0, 1.0]]), "nuc").item()
    assert matrix_norm(plast.zeros(0, 3), "nuc").item() == 0.0


# ---------------------------------------------------------------- prod: third and higher derivatives


def _nth_grads(m, arr, fn, n, seed):
    """Gradients of order 1..n of fn at arr, each time contracting with a fresh random tensor."""
    rng = np.random.default_rng(seed)
    x = m.tensor(arr, requires_grad=True)
    y = fn(x)
    cur = (y * m.tensor(rng.uniform(0.5, 1.5, tuple(y.shape)))).sum()
    out = []
    for _ in range(n):
        (g,) = m.autograd.grad(cur, [x], create_graph=True)
        out.append(g.detach().numpy())
        cur = (g * g * m.tensor(rng.uniform(-1, 1, arr.shape))).sum()
    return out


PROD_INPUTS = {
    "random": _u((3, 5), lo=-1.5, hi=1.5, seed=28),
    "zeros": np.array([[0.0, 2.0, 3.0, -1.5, 0.7], [0.0, 0.5, 0.0, 2.0, 1.0], [1.0, 0.0, 3.0, 4.0, 0.0]]),
    "column": _u((4, 1), seed=29),
}


@pytest.mark.parametrize("name", list(PROD_INPUTS))
@pytest.mark.parametrize("dim", [0, 1, None])
def test_prod_higher_derivatives_vs_torch(name, dim):
    arr = PROD_INPUTS[name]
    fn = (lambda a: a.prod()) if dim is None else (lambda a: a.prod(dim))
    got = _nth_grads(plast, arr, fn, 4, 30)
    want = _nth_grads(torch, arr, fn, 4, 30)
    for order, (a, b) in enumerate(zip(got, want), 1):
        scale = max(1.0, np.abs(b).max())
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10 * scale, err_msg=f"order {order}")


def test_prod_third_derivative_finite_differences():
    arr = _u((2, 4), lo=0.5, hi=1.5, seed=31)
    v = _u((2, 4), seed=32)
    w = _u((2, 4), seed=33)

    def second(a, create):
        x = plast.tensor(a, requires_grad=True)
        (g,) = plast.autograd.grad(x.prod(1).sum(), [x], create_graph=True)
        (h,) = plast.autograd.grad((g * plast.tensor(v)).sum(), [x], create_graph=create)
        return x, h

    x, h = second(arr, True)
    (t,) = plast.autograd.grad((h * plast.tensor(w)).sum(), [x])
    num = _fd_grad(lambda a: second(a, False)[1].numpy(), arr, w)
    np.testing.assert_allclose(t.numpy(), num, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- embedding(max_norm, scale_grad_by_freq)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("padding_idx", [None, 1])
def test_embedding_max_norm_and_scale_grad_by_freq(dtype, norm_type, scale, padding_idx):
    w = _u((6, 4), dtype, -3.0, 3.0, seed=34)
    ids = np.array([[0, 2, 2], [5, 0, 1]])
    up = _u((2, 3, 4), dtype, 0.5, 1.5, seed=35)
    pw, tw = plast.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    kw = dict(padding_idx=padding_idx, max_norm=1.5, norm_type=norm_type, scale_grad_by_freq=scale)
    yp = plast.embedding(plast.tensor(ids), pw, **kw)
    yt = F.embedding(torch.tensor(ids), tw, **kw)
    # the weight itself was renormalized in place, as in torch (rows 3 and 4 aren't looked up: untouched)
    np.testing.assert_allclose(pw.detach().numpy(), tw.detach().numpy(), **TOL[dtype])
    np.testing.assert_array_equal(pw.detach().numpy()[3:5], w[3:5])
    np.testing.assert_allclose(yp.detach().numpy(), yt.detach().numpy(), **TOL[dtype])
    yp.backward(plast.tensor(up))
    yt.backward(torch.tensor(up))
    np.testing.assert_allclose(pw.grad.numpy(), tw.grad.numpy(), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_scale_grad_by_freq_non_contiguous_ids_and_weight(dtype, device):
    w = _u((4, 7), dtype, seed=36)
    ids = np.array([[3, 3, 0], [1, 3, 0]])
    compare(
        lambda i, a: plast.embedding(i, a, scale_grad_by_freq=True),
        lambda i, a: F.embedding(i, a, scale_grad_by_freq=True),
        [ids, w],
        grad=(1,),
        dtype=dtype,
        transform=lambda k, t: t.T if k == 0 else t.T.contiguous().T,
        device=device,
    )


def test_embedding_scale_grad_by_freq_double_backward():
    """The gradient is linear in the upstream gradient: d<grad_w, v>/d up = v[ids] / count[ids]."""
    w = plast.tensor(_u((5, 3), seed=37), requires_grad=True)
    ids = np.array([1, 4, 1, 1, 0])
    up = plast.tensor(_u((5, 3), seed=38), requires_grad=True)
    v = _u((5, 3), seed=39)
    y = plast.embedding(plast.tensor(ids), w, scale_grad_by_freq=True)
    (gw,) = plast.autograd.grad(y, [w], up, create_graph=True)
    (gu,) = plast.autograd.grad((gw * plast.tensor(v)).sum(), [up])
    counts = np.bincount(ids, minlength=5)[ids][:, None]
    np.testing.assert_allclose(gu.numpy(), v[ids] / counts, rtol=1e-12)


def test_embedding_max_norm_leaves_short_rows_and_errors():
    w = np.array([[0.1, 0.2], [3.0, 4.0], [0.0, 0.0]], np.float32)
    pw = plast.tensor(w, requires_grad=True)
    plast.embedding(plast.tensor([0, 1, 2, 1]), pw, max_norm=1.0)
    np.testing.assert_allclose(pw.detach().numpy()[1], [0.6, 0.8], rtol=1e-5)
    np.testing.assert_array_equal(pw.detach().numpy()[[0, 2]], w[[0, 2]])
    with pytest.raises(NotImplementedError, match="sparse"):
        plast.embedding(plast.tensor([0]), pw, sparse=True)
    with pytest.raises(IndexError, match="out of range"):
        plast.embedding(plast.tensor([3]), pw, max_norm=1.0)
    np.testing.assert_allclose(pw.detach().numpy()[1], [0.6, 0.8], rtol=1e-5)  # bad ids change nothing
