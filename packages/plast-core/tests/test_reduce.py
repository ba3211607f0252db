"""Reductions and sorting against torch 2.13 (CPU): forward, backward, ties, integer inputs, empty dims,
non-contiguous inputs, double backward and bad input."""

import math

import numpy as np
import pytest
from helpers import TOL, helper_test_op

import plast

torch = pytest.importorskip("torch")

FLOATS = [np.float32, np.float64]
SHAPES = [(3, 4, 5), (1, 4), (4, 1), (1,), ()]


def _perm(t):
    return t.permute(2, 0, 1)


def _np(t):
    return t.detach().numpy() if isinstance(t, plast.Tensor) else t.detach().numpy()


def _same(p, t, exact=False, dtype=np.float32):
    a, b = _np(p), _np(t)
    assert tuple(a.shape) == tuple(b.shape), f"shape {a.shape} != {b.shape}"
    assert a.dtype == b.dtype, f"dtype {a.dtype} != {b.dtype}"
    if exact:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, **TOL[dtype])


def _both(arr, grad=False):
    return plast.tensor(arr, requires_grad=grad), torch.tensor(arr, requires_grad=grad)


def _grad_check(arr, fp, ft, up=None):
    """Backward of fp/ft on one input with upstream gradient `up` (ones when None); compare the gradients."""
    p, t = _both(arr, grad=True)
    op, ot = fp(p), ft(t)
    _same(op, ot, dtype=arr.dtype.type)
    u = np.ones(tuple(ot.shape), arr.dtype) if up is None else up
    op.backward(plast.tensor(u))
    ot.backward(torch.tensor(u))
    np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), **TOL[arr.dtype.type])
    return p.grad.numpy()


# ---------------------------------------------------------------- max / min / amax / amin


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ["max", "min", "amax", "amin"])
def test_full_reductions(name, shape, dtype, device):
    helper_test_op([shape], lambda a: getattr(a, name)(), dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_dim(name, dim, keepdim, dtype, device):
    helper_test_op(
        [(3, 4, 5)], lambda a: getattr(a, name)(dim, keepdim=keepdim).values, dtype=dtype, device=device
    )
    helper_test_op(
        [(3, 4, 5)],
        lambda a: getattr(a, name)(dim=dim, keepdim=keepdim)[0],
        dtype=dtype,
        transform=_perm,
        device=device,
    )
    rng = np.random.default_rng(1)
    p, t = _both(rng.standard_normal((3, 4, 5)).astype(dtype))
    rp, rt = getattr(plast, name)(p, dim, keepdim), getattr(torch, name)(t, dim, keepdim)
    _same(rp.indices, rt.indices, exact=True)
    _same(rp[0], rt[0], exact=True)
    assert rp.indices.dtype == plast.int64


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dims", [0, (0, 2), -1, (1, -1), ()])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_amin_dims(name, dims, keepdim, dtype, device):
    helper_test_op([(3, 4, 5)], lambda a: getattr(a, name)(dims, keepdim=keepdim), dtype=dtype, device=device)
    helper_test_op(
        [(3, 4, 5)], lambda a: getattr(a, name)(dims, keepdim), dtype=dtype, transform=_perm, device=device
    )


def test_max_dim_size_one_and_zero_d(device):
    helper_test_op([(4, 1)], lambda a: a.max(1).values, device=device)
    helper_test_op([(1, 4)], lambda a: a.min(0, keepdim=True).values, device=device)
    helper_test_op([()], lambda a: a.max(0).values, device=device)
    helper_test_op([()], lambda a: a.amin(-1), device=device)
    p, t = _both(np.float32(2.5))
    _same(p.max(0).indices, t.max(0).indices, exact=True)
    _same(p.argmax(0), t.argmax(0), exact=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_tie_gradients(dtype):
    x = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 0.0]], dtype)
    up2 = np.array([1.0, 2.0], dtype)
    # whole-tensor max/min and amax/amin split the gradient evenly among ties
    g = _grad_check(x, lambda a: a.max(), lambda a: a.max())
    assert g[1, :3].tolist() == pytest.approx([1 / 3] * 3)
    _grad_check(x, lambda a: a.amax(1), lambda a: a.amax(1), up2)
    _grad_check(-x, lambda a: a.min(), lambda a: a.min())
    _grad_check(-x, lambda a: a.amin(1, keepdim=True), lambda a: a.amin(1, keepdim=True), up2.reshape(2, 1))
    # max(dim)/min(dim) send it to the returned (first) index only
    g = _grad_check(x, lambda a: a.max(1).values, lambda a: a.max(1).values, up2)
    assert g.tolist() == [[0, 1, 0, 0], [2, 0, 0, 0]]
    _grad_check(-x, lambda a: a.min(1).values, lambda a: a.min(1).values, up2)


def test_max_min_integer_and_bool():
    rng = np.random.default_rng(2)
    arr = rng.integers(-5, 5, (4, 6)).astype(np.int64)
    p, t = _both(arr)
    for name in ["max", "min", "amax", "amin", "argmax", "argmin"]:
        _same(getattr(p, name)(), getattr(t, name)(), exact=True)
    for name in ["max", "min"]:
        rp, rt = getattr(p, name)(1), getattr(t, name)(1)
        _same(rp.values, rt.values, exact=True)
        _same(rp.indices, rt.indices, exact=True)
    _same(p.argmax(0, keepdim=True), t.argmax(0, keepdim=True), exact=True)
    pb, tb = _both(arr > 0)
    _same(pb.max(), tb.max(), exact=True)
    _same(pb.amin(0), tb.amin(0), exact=True)


def test_max_nan_propagates():
    arr = np.array([[1.0, np.nan, 3.0], [0.0, 2.0, 1.0]], np.float32)
    p, t = _both(arr)
    _same(p.max(), t.max(), exact=True)
    _same(p.max(1).values, t.max(1).values, exact=True)
    _same(p.max(1).indices, t.max(1).indices, exact=True)
    _same(p.argmax(), t.argmax(), exact=True)
    _same(p.amin(1), t.amin(1), exact=True)


def test_max_with_tensor_delegates_to_maximum():
    a, b = plast.tensor([1.0, 5.0]), plast.tensor([3.0, 2.0])
    if not hasattr(plast, "maximum"):
        with pytest.raises(NotImplementedError, match="maximum"):
            plast.max(a, b)
        return
    assert plast.max(a, b).tolist() == [3.0, 5.0]
    assert a.min(b).tolist() == [1.0, 2.0]


# ---------------------------------------------------------------- argmax / argmin


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin(name, dim, keepdim):
    rng = np.random.default_rng(3)
    arr = rng.standard_normal((3, 4, 5)).astype(np.float32)
    p, t = _both(arr)
    _same(getattr(p, name)(dim, keepdim), getattr(t, name)(dim, keepdim), exact=True)
    _same(
        getattr(plast, name)(p.permute(2, 0, 1), dim=dim),
        getattr(torch, name)(t.permute(2, 0, 1), dim=dim),
        exact=True,
    )


def test_argmax_ties_take_first():
    p, t = _both(np.array([[1, 7, 7, 0], [4, 4, 4, 4]], np.float32))
    _same(p.argmax(1), t.argmax(1), exact=True)
    _same(p.argmin(), t.argmin(), exact=True)
    _same(p.argmax(), t.argmax(), exact=True)


# ---------------------------------------------------------------- var / std


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [None, 0, (0, 2), -1])
@pytest.mark.parametrize(
    "kw", [{}, {"correction": 0}, {"correction": 2}, {"unbiased": False}, {"keepdim": True}]
)
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std(name, dim, kw, dtype, device):
    helper_test_op([(3, 4, 5)], lambda a: getattr(a, name)(dim, **kw), dtype=dtype, device=device)
    helper_test_op(
        [(3, 4, 5)], lambda a: getattr(a, name)(dim, **kw), dtype=dtype, transform=_perm, device=device
    )


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_var_std_forms_and_degenerate(device):
    helper_test_op([(4, 3)], lambda a: a.var(True), device=device)  # torch.var(x, unbiased)
    helper_test_op([(4, 3)], lambda a: a.std(1, False, True), device=device)  # (dim, unbiased, keepdim)
    helper_test_op([(4, 1)], lambda a: a.var(1, correction=0), device=device)
    helper_test_op([()], lambda a: a.std(correction=0), grad=False, device=device)
    p, t = _both(np.ones((2, 1), np.float32))
    _same(p.var(1), t.var(1), exact=True)  # one element, correction 1: nan
    _same(plast.zeros(0, 3).var(0), torch.zeros(0, 3).var(0), exact=True)
    for fn in [lambda a: a.std(), lambda a: a.std(1, keepdim=True)]:  # constant data: zero gradient
        g = _grad_check(np.full((2, 3), 1.5), fn, fn)
        assert np.all(g == 0)
    with pytest.raises(plast.DTypeError, match="floating"):
        plast.tensor([1, 2]).var()
    with pytest.raises(TypeError, match="not both"):
        plast.ones(3).var(unbiased=True, correction=1)


# ---------------------------------------------------------------- norm


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [2, 1, math.inf, -math.inf, "fro", 3, 0.5, 1.5])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
def test_norm(p, dim, dtype, device):
    helper_test_op([(3, 4, 5)], lambda a: a.norm(p, dim), dtype=dtype, device=device)
    helper_test_op(
        [(3, 4, 5)], lambda a: a.norm(p, dim, keepdim=True), dtype=dtype, transform=_perm, device=device
    )


def test_norm_default_zero_and_empty(device):
    helper_test_op([(3, 4)], lambda a: a.norm(), device=device)
    helper_test_op(
        [(3, 4)],
        lambda a: plast.norm(a, dim=0) if isinstance(a, plast.Tensor) else torch.norm(a, dim=0),
        device=device,
    )
    p, t = _both(np.array([1.0, 0.0, -2.0], np.float32))
    _same(p.norm(0), t.norm(0), exact=True)
    for pv in [2, 1, 3, math.inf]:  # a zero norm has a zero gradient
        z = np.zeros((2, 3), np.float64)
        g = _grad_check(z, lambda a, pv=pv: a.norm(pv), lambda a, pv=pv: a.norm(pv))
        assert np.all(g == 0)
    # rows with zeros mixed in
    arr = np.array([[0.0, 3.0, -4.0], [0.0, 0.0, 0.0]], np.float64)
    _grad_check(arr, lambda a: a.norm(dim=1), lambda a: a.norm(dim=1), np.array([1.0, 2.0]))
    _grad_check(arr, lambda a: a.norm(3, dim=1), lambda a: a.norm(3, dim=1), np.array([1.0, 2.0]))
    _same(plast.zeros(0, 3).norm(dim=0), torch.zeros(0, 3).norm(dim=0), exact=True)
    with pytest.raises(RuntimeError, match="inf norm"):
        plast.zeros(0).norm(math.inf)
    with pytest.raises(plast.DTypeError):
        plast.tensor([3, 4]).norm()
    with pytest.raises(ValueError, match="order"):  # 'nuc' works now: tests/test_op_corners.py
        plast.ones(2, 2).norm("bogus")


# ---------------------------------------------------------------- prod


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_prod(dim, keepdim, dtype, device):
    if dim is None:
        if keepdim:
            pytest.skip("torch's prod() without dim has no keepdim")
        helper_test_op([(3, 4, 5)], lambda a: a.prod(), dtype=dtype, low=0.5, high=1.5, device=device)
        helper_test_op(
            [(3, 4, 5)], lambda a: a.prod(), dtype=dtype, low=0.5, high=1.5, transform=_perm, device=device
        )
        return
    helper_test_op([(3, 4, 5)], lambda a: a.prod(dim, keepdim), dtype=dtype, device=device)
    helper_test_op(
        [(3, 4, 5)], lambda a: a.prod(dim, keepdim=keepdim), dtype=dtype, transform=_perm, device=device
    )


@pytest.mark.parametrize("dtype", FLOATS)
def test_prod_with_zeros(dtype):
    arr = np.array([[0.0, 2.0, 3.0, 4.0], [0.0, 2.0, 0.0, 5.0], [1.0, 2.0, 3.0, 4.0]], dtype)
    up = np.array([1.0, 2.0, 0.5], dtype)
    _grad_check(arr, lambda a: a.prod(1), lambda a: a.prod(1), up)
    _grad_check(arr, lambda a: a.prod(), lambda a: a.prod())
    _grad_check(arr[:2], lambda a: a.prod(), lambda a: a.prod())  # two zeros: all gradients zero


def test_prod_int_size_zero_and_zero_d(device):
    p, t = _both(np.array([[1, 2], [3, 4]], np.int32))
    _same(p.prod(), t.prod(), exact=True)
    _same(p.prod(1), t.prod(1), exact=True)
    pb, tb = _both(np.array([True, False]))
    _same(pb.prod(), tb.prod(), exact=True)
    _same(plast.zeros(0, 3).prod(0), torch.zeros(0, 3).prod(0), exact=True)
    _same(plast.zeros(0, 3).prod(), torch.zeros(0, 3).prod(), exact=True)
    helper_test_op([()], lambda a: a.prod(0), device=device)
    helper_test_op([(2, 0)], lambda a: a.prod(1), device=device)


# ---------------------------------------------------------------- cumsum


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dim, dtype, device):
    helper_test_op([(3, 4, 5)], lambda a: a.cumsum(dim), dtype=dtype, device=device)
    helper_test_op(
        [(3, 4, 5)],
        lambda a: plast.cumsum(a, dim=dim) if isinstance(a, plast.Tensor) else torch.cumsum(a, dim=dim),
        dtype=dtype,
        transform=_perm,
        device=device,
    )


def test_cumsum_edge_and_int(device):
    helper_test_op([(1, 4)], lambda a: a.cumsum(0), device=device)
    helper_test_op([()], lambda a: a.cumsum(0), device=device)
    helper_test_op([(0, 3)], lambda a: a.cumsum(0), device=device)
    for arr in [
        np.array([[1, 2], [3, 4]], np.int64),
        np.array([1, 2, 3], np.int32),
        np.array([True, False, True]),
    ]:
        p, t = _both(arr)
        _same(p.cumsum(0), t.cumsum(0), exact=True)
    p, t = _both(np.array([1, 2], np.int64))
    _same(p.cumsum(0, dtype=plast.float64), t.cumsum(0, dtype=torch.float64), exact=True)


# ---------------------------------------------------------------- sort / argsort / topk


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort(dim, descending, dtype, device):
    helper_test_op([(3, 4, 5)], lambda a: a.sort(dim, descending).values, dtype=dtype, device=device)
    helper_test_op(
        [(3, 4, 5)],
        lambda a: a.sort(dim=dim, descending=descending)[0],
        dtype=dtype,
        transform=_perm,
        device=device,
    )
    rng = np.random.default_rng(4)
    p, t = _both(rng.standard_normal((3, 4, 5)).astype(dtype))
    _same(p.sort(dim, descending).indices, t.sort(dim=dim, descending=descending).indices, exact=True)
    _same(p.argsort(dim, descending), t.argsort(dim, descending), exact=True)
    _same(plast.argsort(p, dim=dim), torch.argsort(t, dim=dim), exact=True)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_ties_nan_and_int(descending):
    arr = np.array([[3, 1, 3, 2, 1, 3], [0, 0, 0, 0, 0, 0]], np.int64)
    p, t = _both(arr)
    rp, rt = p.sort(1, descending, stable=True), t.sort(dim=1, descending=descending, stable=True)
    _same(rp.values, rt.values, exact=True)
    _same(rp.indices, rt.indices, exact=True)
    pf, tf = _both(np.array([2.0, np.nan, -1.0, 5.0], np.float32))
    rp, rt = pf.sort(descending=descending), tf.sort(descending=descending)
    _same(rp.values, rt.values, exact=True)
    _same(rp.indices, rt.indices, exact=True)
    pb, tb = _both(np.array([True, False, True, False]))
    rp, rt = pb.sort(stable=True, descending=descending), tb.sort(stable=True, descending=descending)
    _same(rp.values, rt.values, exact=True)
    _same(rp.indices, rt.indices, exact=True)


def test_sort_edge_sizes(device):
    helper_test_op([(1, 4)], lambda a: a.sort(0).values, device=device)
    helper_test_op([()], lambda a: a.sort().values, device=device)
    helper_test_op([(0, 3)], lambda a: a.sort(0).values, device=device)
    helper_test_op([(3, 0)], lambda a: a.sort().values, device=device)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(k, dim, largest, dtype, device):
    shape = (5, 6, 5)
    helper_test_op([shape], lambda a: a.topk(k, dim, largest).values, dtype=dtype, device=device)
    helper_test_op(
        [shape], lambda a: a.topk(k, dim=dim, largest=largest)[0], dtype=dtype, transform=_perm, device=device
    )
    rng = np.random.default_rng(5)
    p, t = _both(rng.standard_normal(shape).astype(dtype))
    _same(p.topk(k, dim, largest).indices, t.topk(k, dim, largest).indices, exact=True)
    _same(
        plast.topk(p, k, dim=dim, largest=largest, sorted=True).values,
        torch.topk(t, k, dim=dim, largest=largest, sorted=True).values,
        exact=True,
    )


def test_topk_int_edges_and_errors(device):
    p, t = _both(np.array([[4, 9, 1, 7], [2, 3, 8, 5]], np.int64))
    _same(p.topk(2).values, t.topk(2).values, exact=True)
    _same(p.topk(2).indices, t.topk(2).indices, exact=True)
    helper_test_op([(3, 4)], lambda a: a.topk(0).values, device=device)
    helper_test_op([(3, 4)], lambda a: a.topk(4).values, device=device)
    helper_test_op([()], lambda a: a.topk(1).values, device=device)
    with pytest.raises(RuntimeError, match="out of range"):
        plast.ones(3).topk(4)
    with pytest.raises(RuntimeError, match="out of range"):
        plast.ones(3).topk(-1)
    with pytest.raises(IndexError):
        plast.ones(3).topk(1, dim=1)
    with pytest.raises(IndexError):
        plast.ones(3).sort(dim=2)


# ---------------------------------------------------------------- all / any


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_all_any(name, dim, keepdim):
    rng = np.random.default_rng(6)
    for arr in [
        rng.integers(0, 2, (3, 4)).astype(np.float32),
        rng.integers(0, 3, (3, 4)),
        rng.integers(0, 2, (3, 4)) > 0,
        np.ones((3, 4), np.float64),
        np.zeros((3, 4), np.int32),
    ]:
        p, t = _both(arr)
        if dim is None:
            if keepdim:
                continue
            _same(getattr(p, name)(), getattr(t, name)(), exact=True)
        else:
            _same(getattr(p, name)(dim, keepdim), getattr(torch, name)(t, dim, keepdim=keepdim), exact=True)
        _same(getattr(plast, name)(p.T), getattr(torch, name)(t.T), exact=True)


def test_all_any_empty():
    for name in ["all", "any"]:
        _same(getattr(plast.zeros(0, 3), name)(), getattr(torch.zeros(0, 3), name)(), exact=True)
        _same(getattr(plast.zeros(0, 3), name)(0), getattr(torch.zeros(0, 3), name)(0), exact=True)
        _same(getattr(plast.zeros(0, 3), name)(1), getattr(torch.zeros(0, 3), name)(1), exact=True)


# ---------------------------------------------------------------- empty reductions and bad dims


def test_empty_reduction_errors_match_torch():
    p, t = plast.zeros(0, 3), torch.zeros(0, 3)
    cases = [
        lambda m, x: m.max(x),
        lambda m, x: m.min(x),
        lambda m, x: m.argmax(x),
        lambda m, x: m.argmin(x),
        lambda m, x: m.amax(x, 0),
        lambda m, x: m.amin(x),
        lambda m, x: m.max(x, 0),
        lambda m, x: m.argmax(x, 0),
    ]
    for fn in cases:
        with pytest.raises(Exception) as et:
            fn(torch, t)
        with pytest.raises(type(et.value), match="Expected reduction dim"):
            fn(plast, p)
    # reducing over a non-empty dim of an empty tensor is fine
    _same(p.max(1).values, t.max(1).values, exact=True)
    _same(p.amax(1), t.amax(1), exact=True)
    _same(p.argmin(1), t.argmin(1), exact=True)
    _same(p.sum(0), t.sum(0), exact=True)


@pytest.mark.parametrize(
    "name",
    ["max", "min", "argmax", "amax", "var", "std", "norm", "prod", "cumsum", "sort", "argsort", "all", "any"],
)
def test_dim_out_of_range(name):
    x = plast.ones(2, 3)
    fn = getattr(x, name)
    with pytest.raises(IndexError, match="out of range"):
        fn(dim=2) if name != "norm" else fn(2, dim=2)


def test_max_rejects_keepdim_without_dim():
    with pytest.raises(TypeError):
        plast.ones(2, 3).max(keepdim=True)


# ---------------------------------------------------------------- multinomial


def test_multinomial_deterministic_with_generator():
    w = plast.tensor([[0.1, 0.5, 0.4], [1.0, 0.0, 3.0]])
    a = plast.multinomial(w, 8, replacement=True, generator=plast.Generator().manual_seed(7))
    b = w.multinomial(8, True, generator=plast.Generator().manual_seed(7))
    c = plast.multinomial(w, 8, replacement=True, generator=plast.Generator().manual_seed(8))
    assert a.dtype == plast.int64 and tuple(a.shape) == (2, 8)
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()
    plast.manual_seed(3)
    d = plast.multinomial(w, 3)
    plast.manual_seed(3)
    assert plast.multinomial(w, 3).tolist() == d.tolist()


def test_multinomial_frequencies_with_replacement():
    probs = np.array([0.1, 0.0, 0.6, 0.3])
    g = plast.Generator().manual_seed(0)
    n = 40000
    s = plast.multinomial(
        plast.tensor(probs * 5, dtype=plast.float64), n, replacement=True, generator=g
    ).numpy()
    assert s.shape == (n,)
    freq = np.bincount(s, minlength=4) / n
    assert freq[1] == 0
    np.testing.assert_allclose(freq, probs, atol=0.01)


def test_multinomial_without_replacement():
    g = plast.Generator().manual_seed(1)
    w = plast.tensor([[1.0, 2.0, 3.0, 4.0, 0.0]] * 200)
    s = plast.multinomial(w, 4, generator=g).numpy()
    assert s.shape == (200, 4)
    assert all(len(set(row)) == 4 for row in s.tolist())
    assert not np.any(s == 4)  # the zero-weight category is never drawn while others remain
    # first draws follow the weights: P(first = 3) = 0.4
    assert abs(np.mean(s[:, 0] == 3) - 0.4) < 0.1
    full = plast.multinomial(plast.tensor([0.0, 1.0, 0.0]), 3, generator=g).tolist()
    assert sorted(full) == [0, 1, 2] and full[0] == 1
    first = np.array([plast.multinomial(plast.tensor([1.0, 3.0]), 1, generator=g).item() for _ in range(400)])
    assert abs(np.mean(first == 1) - 0.75) < 0.08


def test_multinomial_bad_input():
    with pytest.raises(RuntimeError, match="element < 0"):
        plast.multinomial(plast.tensor([1.0, -1.0]), 1)
    with pytest.raises(RuntimeError, match="element < 0"):
        plast.multinomial(plast.tensor([1.0, math.inf]), 1)
    with pytest.raises(RuntimeError, match="element < 0"):
        plast.multinomial(plast.tensor([[1.0, 1.0], [math.nan, 1.0]]), 1)
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        plast.multinomial(plast.tensor([[1.0, 1.0], [0.0, 0.0]]), 1, replacement=True)
    with pytest.raises(RuntimeError, match="without replacement"):
        plast.multinomial(plast.tensor([1.0, 1.0]), 3)
    with pytest.raises(plast.DTypeError):
        plast.multinomial(plast.tensor([1, 2]), 1)
    with pytest.raises(plast.ShapeError):
        plast.multinomial(plast.ones(2, 2, 2), 1)
    with pytest.raises(ValueError):
        plast.multinomial(plast.ones(3), 0)
    assert tuple(plast.multinomial(plast.ones(0, 3), 2).shape) == (0, 2)


# ---------------------------------------------------------------- double backward (float64)


def _double_backward(fp, ft, shape, seed=0, arr=None):
    rng = np.random.default_rng(seed)
    arr = rng.uniform(-2, 2, shape) if arr is None else arr
    p, t = _both(arr, grad=True)
    yp, yt = fp(p), ft(t)
    up = rng.uniform(0.5, 1.5, tuple(yt.shape))
    w = rng.uniform(0.5, 1.5, shape)
    (gp,) = plast.autograd.grad(yp, p, grad_outputs=plast.tensor(up), create_graph=True)
    (gt,) = torch.autograd.grad(yt, t, grad_outputs=torch.tensor(up), create_graph=True)
    np.testing.assert_allclose(gp.detach().numpy(), gt.detach().numpy(), rtol=1e-10, atol=1e-10)
    (ggp,) = plast.autograd.grad((gp * plast.tensor(w)).sum(), p)
    (ggt,) = torch.autograd.grad((gt * torch.tensor(w)).sum(), t)
    np.testing.assert_allclose(ggp.numpy(), ggt.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: a.prod(1),
        lambda a: a.prod(),
        lambda a: a.norm(dim=1),
        lambda a: a.norm(3, dim=0),
        lambda a: a.var(1),
        lambda a: a.std(0),
        lambda a: a.cumsum(1) * a,
        lambda a: a.max(1).values * a.sum(1),
        lambda a: a.amax(0) * a.sum(0),
        lambda a: a.sort(1).values * a,
        lambda a: a.topk(2).values ** 2,
    ],
    ids=["prod_dim", "prod", "norm2", "norm3", "var", "std", "cumsum", "max_dim", "amax", "sort", "topk"],
)
def test_double_backward(fn):
    _double_backward(fn, fn, (3, 4))


def test_double_backward_prod_with_zeros():
    arr = np.array([[0.0, 2.0, 3.0, -1.5], [0.0, 0.5, 0.0, 2.0], [1.0, 0.0, 3.0, 4.0]])
    _double_backward(lambda a: a.prod(1), lambda a: a.prod(1), (3, 4), arr=arr)
    _double_backward(lambda a: a.prod(), lambda a: a.prod(), (3, 4), arr=arr[2:])


def test_finite_differences_float64():
    rng = np.random.default_rng(9)
    arr = rng.uniform(0.5, 1.5, (3, 4))
    fns = [
        lambda a: a.norm(1.5, dim=1),
        lambda a: a.prod(0),
        lambda a: a.std(1, correction=0),
        lambda a: a.cumsum(0).amax(1),
    ]
    for fn in fns:
        p = plast.tensor(arr, requires_grad=True)
        y = fn(p)
        up = rng.uniform(0.5, 1.5, tuple(y.shape))
        y.backward(plast.tensor(up))
        eps = 1e-6
        num = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            hi, lo = arr.copy(), arr.copy()
            hi[idx] += eps
            lo[idx] -= eps
            num[idx] = ((fn(plast.tensor(hi)).numpy() - fn(plast.tensor(lo)).numpy()) * up).sum() / (2 * eps)
        np.testing.assert_allclose(p.grad.numpy(), num, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- methods and return types


def test_tensor_methods_and_return_types():
    x = plast.tensor([[1.0, 5.0], [3.0, 2.0]])
    for name in [
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
        "topk",
        "sort",
        "argsort",
        "all",
        "any",
        "multinomial",
        "sum",
        "mean",
    ]:
        assert callable(getattr(x, name)), name
    r = x.max(1)
    v, i = r
    assert r.values is v and r.indices is i and r[0] is v
    assert type(x.sort()).__name__ == "sort" and type(x.topk(1)).__name__ == "topk"
    assert x.max().ndim == 0 and x.max().dtype == plast.float32
    assert x.all().dtype == plast.bool and x.any(0).dtype == plast.bool
    assert x.argmax().dtype == plast.int64
