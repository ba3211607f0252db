"""The pointwise family (plast/ops/pointwise.py) against torch 2.13: forward, backward with a non-uniform upstream
gradient, dtypes of results, broadcasting, size-0/size-1 dims, non-contiguous inputs, double backward and the
errors bad input raises."""

import numpy as np
import pytest
from helpers import TOL, helper_test_op

import plast

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = [np.float32, np.float64]
BROADCASTS = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((2, 1, 5), (3, 1)),
    ((1,), (4, 3)),
    ((0, 3), (3,)),
    ((), (2, 2)),
    ((1, 1), (1, 1)),
]
NONCONTIG = [
    ("T", lambda t: t.T),
    ("permute", lambda t: t.permute(2, 0, 1)),
    ("transpose", lambda t: t.transpose(0, 1)),
]


def away_from_zero(shape, rng, dtype, low=0.5, high=2.0):
    mag = rng.uniform(low, high, shape)
    sign = np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(dtype)


def both(fn_p, fn_t, *arrays, **kw):
    """Run fn on plast and torch tensors made from `arrays`; compare values and dtypes exactly (ints, bools)."""
    out_p = fn_p(*[plast.tensor(a) for a in arrays])
    out_t = fn_t(*[torch.tensor(a) for a in arrays])
    assert out_p.dtype.name == str(out_t.dtype).replace("torch.", ""), (out_p.dtype, out_t.dtype)
    assert tuple(out_p.shape) == tuple(out_t.shape)
    np.testing.assert_allclose(out_p.numpy(), out_t.numpy(), equal_nan=True, **kw)
    return out_p


# ---- pow ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_pow_tensor_tensor(shapes, dtype, device):
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 2.0, shapes[0]).astype(dtype)
    b = rng.uniform(-2.0, 2.0, shapes[1]).astype(dtype)
    helper_test_op(None, lambda x, y: x**y, inputs=[a, b], dtype=dtype, device=device)
    helper_test_op(None, lambda x, y: x.pow(y), inputs=[a, b], dtype=dtype, device=device)


POW_SCALAR = [
    ("sq", lambda x: x**2, True),
    ("cube", lambda x: x**3, True),
    ("zero", lambda x: x**0, True),
    ("one", lambda x: x**1, True),
    ("neg_int", lambda x: x**-2, True),
    ("frac", lambda x: x**2.5, False),
    ("neg_frac", lambda x: x**-0.5, False),
    ("rpow_int", lambda x: 2**x, True),
    ("rpow_half", lambda x: 0.5**x, True),
    ("rpow", lambda x: 2.5**x, True),
    ("np_scalar", lambda x: x ** np.float64(2.0), True),
    ("method", lambda x: x.pow(3), True),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,fn,negative_ok", POW_SCALAR, ids=[p[0] for p in POW_SCALAR])
def test_pow_scalar(name, fn, negative_ok, dtype, device):
    rng = np.random.default_rng(2)
    x = rng.uniform(0.3, 2.0, (3, 5)).astype(dtype)
    helper_test_op(None, fn, inputs=[x], dtype=dtype, device=device)
    if negative_ok:
        helper_test_op(None, fn, inputs=[-x], dtype=dtype, device=device)
    helper_test_op([(0, 2)], fn, dtype=dtype, device=device)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_pow_zero_base_and_exponent_gradients_match_torch(device):
    # base 0: the exponent's gradient is masked to 0 where exponent >= 0; exponent 0: the base's gradient is 0
    base = np.array([0.0, 0.0, 0.0, -1.0, 2.0, 3.0])
    expo = np.array([0.0, 2.0, -1.0, 2.0, 0.0, 0.5])
    helper_test_op(None, lambda a, b: a**b, inputs=[base, expo], dtype=np.float64, device=device)
    helper_test_op(None, lambda b: 0.0**b, inputs=[expo], dtype=np.float64, device=device)
    helper_test_op(None, lambda a: a**0, inputs=[base], dtype=np.float64, device=device)
    helper_test_op(None, lambda a: a**0.0, inputs=[base], dtype=np.float64, device=device)


def test_pow_0d_exponent_tensor_and_promotion(device):
    rng = np.random.default_rng(3)
    helper_test_op(
        None,
        lambda a, b: a**b,
        inputs=[rng.uniform(0.5, 2, (2, 3)), np.array(1.7)],
        dtype=np.float64,
        device=device,
    )
    helper_test_op(
        None,
        lambda a, b: b**a,
        inputs=[rng.uniform(-1, 1, (2, 3)), np.array(1.7)],
        dtype=np.float64,
        device=device,
    )


def test_pow_integer_semantics():
    i = np.array([2, 3, -4, 0, 1, -1], dtype=np.int64)
    e = np.array([3, -1, 2, 0, -5, -3], dtype=np.int64)
    both(lambda a: a**2, lambda a: a**2, i)
    both(lambda a: a**3, lambda a: a**3, i.astype(np.int32))
    both(lambda a, b: a**b, lambda a, b: a**b, i, e)  # negative tensor exponents: 0, or +-1 for bases +-1
    both(lambda a: 2**a, lambda a: 2**a, np.abs(i))
    both(lambda a: a**2.5, lambda a: a**2.5, np.abs(i), rtol=1e-6)
    both(lambda a: 2.0**a, lambda a: 2.0**a, i)
    both(lambda a: a**2, lambda a: a**2, np.array([True, False]))
    both(lambda a: a ** plast.tensor(2.0), lambda a: a ** torch.tensor(2.0), i)
    both(lambda a: a**2, lambda a: a**2, np.array([3, 7], dtype=np.int64) * 10**9)  # wraps like torch
    with pytest.raises(RuntimeError, match="negative integer powers"):
        plast.tensor([1, 2]) ** -1
    with pytest.raises(plast.DTypeError, match="bool"):
        plast.tensor([True]) ** plast.tensor([True])


# ---- floor_divide, remainder, fmod ----

DIVISIONS = [
    (
        "floor_divide",
        lambda a, b: plast.floor_divide(a, b) if isinstance(a, plast.Tensor) else a // b,
        lambda a, b: a // b,
    ),
    ("remainder", lambda a, b: a % b, lambda a, b: a % b),
    ("fmod", lambda a, b: plast.fmod(a, b), lambda a, b: torch.fmod(a, b)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", BROADCASTS)
@pytest.mark.parametrize("name,fp,ft", DIVISIONS, ids=[d[0] for d in DIVISIONS])
def test_division_float(name, fp, ft, shapes, dtype, device):
    rng = np.random.default_rng(4)
    a = rng.uniform(-5, 5, shapes[0]).astype(dtype)
    b = away_from_zero(shapes[1], rng, dtype)
    helper_test_op(None, fp, ft, inputs=[a, b], dtype=dtype, grad=name != "floor_divide", device=device)


@pytest.mark.parametrize("name,fp,ft", DIVISIONS, ids=[d[0] for d in DIVISIONS])
def test_division_integer_and_scalar_forms(name, fp, ft):
    a = np.array([5, -5, 5, -5, 0, 7, -(2**63)], dtype=np.int64)
    b = np.array([3, 3, -3, -3, 2, 1, -1], dtype=np.int64)
    both(fp, ft, a, b)
    both(fp, ft, a.astype(np.int32)[:6], b.astype(np.int32)[:6])
    both(lambda x: fp(x, 2), lambda x: ft(x, 2), a)
    both(lambda x: fp(x, 2.5), lambda x: ft(x, 2.5), a, rtol=1e-6)
    both(lambda x: fp(x, -1.5), lambda x: ft(x, -1.5), np.array([-3.0, -0.5, 0.0, 4.0], np.float32))
    both(
        lambda x: fp(x, 0.0), lambda x: ft(x, 0.0), np.array([1.0, -1.0, 0.0], np.float32)
    )  # inf/nan as torch
    if name != "fmod":
        both(lambda x: fp(7, x), lambda x: ft(7, x), b)
        both(lambda x: fp(7.5, x), lambda x: ft(7.5, x), b)


def test_division_signs_of_zero_match_torch():
    a = np.array([-2.0, 2.0, -4.0, 0.0, -0.0], np.float32)
    b = np.array([2.0, -2.0, 2.0, -3.0, 3.0], np.float32)
    for fp, ft in [(lambda x, y: x % y, lambda x, y: x % y), (lambda x, y: x // y, lambda x, y: x // y)]:
        p = fp(plast.tensor(a), plast.tensor(b)).numpy()
        t = ft(torch.tensor(a), torch.tensor(b)).numpy()
        np.testing.assert_array_equal(np.signbit(p), np.signbit(t))


@pytest.mark.parametrize("name,fp,ft", DIVISIONS, ids=[d[0] for d in DIVISIONS])
def test_integer_division_by_zero_raises(name, fp, ft):
    a = plast.tensor([4, 5, 6])
    b = plast.tensor([1, 0, 2])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ft(torch.tensor([4, 5, 6]), torch.tensor([1, 0, 2]))
    out = fp(a, b)  # lazy: the divisor's value is only known when the graph runs
    with pytest.raises(ZeroDivisionError, match=name):
        out.tolist()
    with pytest.raises(ZeroDivisionError):  # reading again raises again, never returns garbage
        out.numpy()
    with pytest.raises(ZeroDivisionError):
        fp(a, 0).tolist()
    with pytest.raises(ZeroDivisionError):
        (fp(a, b) + 1).tolist()
    # an empty result divides nothing
    assert fp(plast.zeros((0, 3), dtype=plast.int64), b).shape == (0, 3)
    assert fp(plast.zeros((0, 3), dtype=plast.int64), b).tolist() == []


def test_division_rejects_bool():
    for fn in (lambda a: a // a, lambda a: a % a, lambda a: plast.fmod(a, a)):
        with pytest.raises(plast.DTypeError, match="bool"):
            fn(plast.tensor([True, False]))


def test_floor_divide_has_no_gradient():
    x = plast.tensor([1.5, 2.5], requires_grad=True)
    assert not (x // 2).requires_grad


# ---- maximum, minimum ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", BROADCASTS)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum(name, shapes, dtype, device):
    fp, ft = getattr(plast, name), getattr(torch, name)
    helper_test_op(shapes, fp, ft, dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_ties_and_nan(name, dtype, device):
    nan = float("nan")
    a = np.array([nan, 1.0, 2.0, 3.0, nan, -1.0], dtype)
    b = np.array([1.0, nan, 2.0, 1.0, nan, 5.0], dtype)
    fp, ft = getattr(plast, name), getattr(torch, name)
    out = helper_test_op(
        None, fp, ft, inputs=[a, b], dtype=dtype, tol=dict(equal_nan=True, **TOL[dtype]), device=device
    )
    assert np.isnan(out.detach().numpy()[[0, 1, 4]]).all()


@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("dt", [np.int32, np.int64, np.bool_])
def test_maximum_minimum_integer_and_bool(name, dt):
    rng = np.random.default_rng(5)
    a = rng.integers(-5, 5, (4, 5)).astype(dt)
    b = rng.integers(-5, 5, (5,)).astype(dt)
    fp, ft = getattr(plast, name), getattr(torch, name)
    both(fp, ft, a, b)
    both(lambda x, y: fp(x.T, y), lambda x, y: ft(x.T, y), a, b[:4])  # non-contiguous through the C kernel
    both(fp, ft, a, b.astype(np.float32))  # int with float promotes to float


def test_maximum_minimum_accept_scalars_and_methods():
    x = plast.tensor([[1.0, -2.0], [3.0, 0.0]])
    assert plast.maximum(x, 0.5).tolist() == [[1.0, 0.5], [3.0, 0.5]]
    assert x.minimum(plast.tensor([0.0, -1.0])).tolist() == [[0.0, -2.0], [0.0, -1.0]]
    assert plast.maximum(plast.tensor([1, 5]), 2.5).dtype is plast.float32


# ---- clamp ----

CLAMPS = [
    ("both", lambda x: x.clamp(-0.5, 0.7), lambda x: x.clamp(-0.5, 0.7)),
    ("min", lambda x: x.clamp(min=-0.5), lambda x: x.clamp(min=-0.5)),
    ("max", lambda x: plast.clamp(x, max=0.3), lambda x: torch.clamp(x, max=0.3)),
    ("clip", lambda x: plast.clip(x, -1, 1), lambda x: torch.clip(x, -1, 1)),
    ("clamp_min", lambda x: x.clamp_min(0.1), lambda x: x.clamp_min(0.1)),
    ("clamp_max", lambda x: plast.clamp_max(x, 0.1), lambda x: torch.clamp_max(x, 0.1)),
    ("min_gt_max", lambda x: x.clamp(1.0, -1.0), lambda x: x.clamp(1.0, -1.0)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,fp,ft", CLAMPS, ids=[c[0] for c in CLAMPS])
def test_clamp_scalar_bounds(name, fp, ft, dtype, device):
    helper_test_op([(4, 5)], fp, ft, dtype=dtype, device=device)
    helper_test_op([(0, 3)], fp, ft, dtype=dtype, device=device)
    helper_test_op([()], fp, ft, dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_clamp_gradient_at_the_bounds_is_inclusive(dtype, device):
    x = np.array([-1.0, -0.5, 0.0, 0.7, 1.0, float("nan")], dtype)
    tol = dict(equal_nan=True, **TOL[dtype])
    helper_test_op(None, lambda t: t.clamp(-0.5, 0.7), inputs=[x], dtype=dtype, tol=tol, device=device)
    helper_test_op(None, lambda t: t.clamp(min=-0.5), inputs=[x], dtype=dtype, tol=tol, device=device)
    helper_test_op(None, lambda t: t.clamp(max=0.7), inputs=[x], dtype=dtype, tol=tol, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes", [((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)), ((2, 4), (4,), ()), ((0, 2), (2,), (1,))]
)
def test_clamp_tensor_bounds(shapes, dtype, device):
    rng = np.random.default_rng(6)
    x = rng.uniform(-2, 2, shapes[0]).astype(dtype)
    lo = rng.uniform(-1.5, 0.5, shapes[1]).astype(dtype)
    hi = rng.uniform(-0.5, 1.5, shapes[2]).astype(dtype)  # overlaps lo, so some min > max elements
    helper_test_op(None, lambda a, b, c: a.clamp(b, c), inputs=[x, lo, hi], dtype=dtype, device=device)
    helper_test_op(None, lambda a, b: a.clamp(min=b), inputs=[x, lo], dtype=dtype, device=device)
    helper_test_op(None, lambda a, c: a.clamp(max=c), inputs=[x, hi], dtype=dtype, device=device)


def test_clamp_input_broadcast_to_bounds(device):
    # torch's clamp backward can't reduce a broadcast input, so compare plast's gradient with the expanded input
    rng = np.random.default_rng(16)
    x, lo = rng.uniform(-2, 2, (4,)), rng.uniform(-1, 0, (2, 4))
    helper_test_op(
        None, lambda a, b: a.clamp(min=b), inputs=[x, lo], dtype=np.float64, grad=False, device=device
    )
    xp = plast.tensor(x, requires_grad=True)
    xt = torch.tensor(x).expand(2, 4).clone().requires_grad_()
    xp.clamp(min=plast.tensor(lo)).sum().backward()
    xt.clamp(min=torch.tensor(lo)).sum().backward()
    np.testing.assert_allclose(xp.grad.numpy(), xt.grad.numpy().sum(0))


def test_clamp_tensor_bounds_ties_and_nan(device):
    nan = float("nan")
    x = np.array([nan, 1.0, 2.0, 3.0, 0.0, 1.0, 1.0])
    lo = np.array([1.0, nan, 2.0, 1.0, 1.0, 1.0, 2.0])
    hi = np.array([2.0, 2.0, 2.0, 0.5, 1.0, 1.0, 2.0])
    helper_test_op(
        None,
        lambda a, b, c: a.clamp(b, c),
        inputs=[x, lo, hi],
        dtype=np.float64,
        tol=dict(equal_nan=True, **TOL[np.float64]),
        device=device,
    )


def test_clamp_dtypes_and_errors():
    i = np.array([1, 2, 3], np.int64)
    both(lambda a: a.clamp(min=1.5), lambda a: a.clamp(min=1.5), i)
    both(lambda a: a.clamp(0, 2), lambda a: a.clamp(0, 2), i.astype(np.int32))
    both(lambda a: a.clamp(max=1), lambda a: a.clamp(max=1), i)
    both(
        lambda a: a.clamp(plast.tensor([1.5, 1.5, 1.5])), lambda a: a.clamp(torch.tensor([1.5, 1.5, 1.5])), i
    )
    with pytest.raises(ValueError, match="at least one"):
        plast.tensor([1.0]).clamp()
    with pytest.raises(plast.ShapeError, match=r"\(3,\) and \(2,\)"):
        plast.tensor([1.0, 2.0, 3.0]).clamp(plast.tensor([0.0, 1.0]))
    with pytest.raises(TypeError, match="str"):
        plast.tensor([1.0]).clamp("a")


# ---- where, masked_fill ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes",
    [
        ((3, 4), (3, 4), (3, 4)),
        ((3, 4), (4,), (3, 1)),
        ((2, 1, 4), (3, 1), ()),
        ((0, 2), (2,), (1,)),
        ((1,), (1, 1), (1,)),
    ],
)
def test_where(shapes, dtype, device):
    rng = np.random.default_rng(7)
    cond = rng.uniform(size=shapes[0]) < 0.5
    a = rng.uniform(-2, 2, shapes[1]).astype(dtype)
    b = rng.uniform(-2, 2, shapes[2]).astype(dtype)
    pc, tc = plast.tensor(cond), torch.tensor(cond)
    helper_test_op(
        None,
        lambda x, y: (plast if isinstance(x, plast.Tensor) else torch).where(
            pc if isinstance(x, plast.Tensor) else tc, x, y
        ),
        inputs=[a, b],
        dtype=dtype,
        device=device,
    )
    helper_test_op(
        None,
        lambda x: x.where(pc if isinstance(x, plast.Tensor) else tc, 0.5),
        inputs=[a],
        dtype=dtype,
        device=device,
    )
    helper_test_op(
        None,
        lambda y: (plast if isinstance(y, plast.Tensor) else torch).where(
            pc if isinstance(y, plast.Tensor) else tc, -1.0, y
        ),
        inputs=[b],
        dtype=dtype,
        device=device,
    )


def test_where_dtypes():
    c = np.array([True, False, True])

    def w(mod, cond, a, b):
        return mod.where(cond, a, b)

    i = np.array([1, 2, 3])
    for a, b in [(1.0, 0.0), (1, 0), (True, False), (1, 0.5)]:
        both(lambda cc, a=a, b=b: w(plast, cc, a, b), lambda cc, a=a, b=b: w(torch, cc, a, b), c)
    both(lambda cc, x: w(plast, cc, x, 1.5), lambda cc, x: w(torch, cc, x, 1.5), c, i)
    both(lambda cc, x: w(plast, cc, x, 5), lambda cc, x: w(torch, cc, x, 5), c, i.astype(np.int32))
    both(lambda cc, x: w(plast, cc, x, x.double()), lambda cc, x: w(torch, cc, x, x.double()), c, i)


def test_where_errors():
    x = plast.tensor([1.0, 2.0])
    with pytest.raises(plast.DTypeError, match="condition must be a bool tensor, got plast.int64"):
        plast.where(plast.tensor([1, 0]), x, x)
    with pytest.raises(plast.ShapeError, match=r"\(3,\)"):
        plast.where(plast.tensor([True, False, True]), x, 0.0)
    assert plast.where(plast.tensor([True]))[0].tolist() == [0]  # one argument: tests/test_op_corners.py
    with pytest.raises(TypeError, match="list"):
        plast.where(plast.tensor([True, False]), x, [1, 2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (3, 5)), ((0, 2), (2,)), ((), ())]
)
def test_masked_fill(shapes, dtype, device):
    rng = np.random.default_rng(8)
    mask = rng.uniform(size=shapes[1]) < 0.5
    pm, tm = plast.tensor(mask), torch.tensor(mask)

    def m(t):
        return pm if isinstance(t, plast.Tensor) else tm

    helper_test_op([shapes[0]], lambda x: x.masked_fill(m(x), -3.5), dtype=dtype, device=device)
    helper_test_op([shapes[0]], lambda x: x.masked_fill(m(x), float("-inf")) * 1, dtype=dtype, device=device)
    # a 0-d tensor value gets the gradient of the filled positions
    helper_test_op([shapes[0], ()], lambda x, v: x.masked_fill(m(x), v), dtype=dtype, device=device)
    if shapes[0] == shapes[1] and len(shapes[0]) == 2:
        helper_test_op(
            [shapes[0]],
            lambda x: (
                plast.masked_fill(x.T, pm.T, 1.0)
                if isinstance(x, plast.Tensor)
                else x.T.masked_fill(tm.T, 1.0)
            ),
            dtype=dtype,
            device=device,
        )


def test_masked_fill_dtypes_and_errors():
    i = np.array([1, 2, 3])
    mask = np.array([True, False, True])
    both(lambda x, mk: x.masked_fill(mk, 1.7), lambda x, mk: x.masked_fill(mk, 1.7), i, mask)
    both(lambda x, mk: x.masked_fill(mk, True), lambda x, mk: x.masked_fill(mk, True), i, mask)
    both(
        lambda x, mk: x.float().masked_fill(mk, plast.tensor(3.0, dtype=plast.float64)),
        lambda x, mk: x.float().masked_fill(mk, torch.tensor(3.0, dtype=torch.float64)),
        i,
        mask,
    )
    both(lambda x, mk: x.masked_fill(mk, -1), lambda x, mk: x.masked_fill(mk, -1), i, np.stack([mask, ~mask]))
    x = plast.tensor([1.0, 2.0, 3.0])
    with pytest.raises(plast.DTypeError, match="mask must be a bool tensor"):
        x.masked_fill(plast.tensor([1, 0, 1]), 0.0)
    with pytest.raises(plast.ShapeError, match="0-dimensional"):
        x.masked_fill(plast.tensor(mask), plast.tensor([1.0]))
    with pytest.raises(plast.ShapeError, match=r"\(3,\) and \(2,\)"):
        x.masked_fill(plast.tensor([True, False]), 0.0)
    with pytest.raises(ValueError, match="can't be stored"):
        plast.tensor([1, 2]).masked_fill(plast.tensor([True, False]), float("inf"))


# ---- comparisons, logical, bitwise, tests ----

COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
DUNDERS = {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__"}


@pytest.mark.parametrize("shapes", BROADCASTS)
@pytest.mark.parametrize("name", COMPARISONS)
def test_comparisons(name, shapes):
    rng = np.random.default_rng(9)
    a = rng.integers(-2, 3, shapes[0]).astype(np.float32)  # small ints: plenty of ties
    b = rng.integers(-2, 3, shapes[1]).astype(np.float32)
    fp, ft = getattr(plast, name), getattr(torch, name)
    both(fp, ft, a, b)
    both(lambda x, y: getattr(x, DUNDERS[name])(y), lambda x, y: getattr(x, DUNDERS[name])(y), a, b)
    both(lambda x: fp(x, 1), lambda x: ft(x, 1), a)
    both(lambda x: fp(x, 0.5), lambda x: ft(x, 0.5), a.astype(np.int64))
    both(lambda x, y: fp(x, y), lambda x, y: ft(x, y), a.astype(np.int32), b.astype(np.float64))
    both(lambda x, y: fp(x, y), lambda x, y: ft(x, y), a.astype(np.bool_), b.astype(np.bool_))
    if len(shapes[0]) == 2:
        both(lambda x: fp(x.T, 0.0), lambda x: ft(x.T, 0.0), a)


def test_comparison_operators_with_scalars_on_either_side():
    x = plast.tensor([1.0, 2.0, 3.0])
    assert (x == 2).tolist() == [False, True, False]
    assert (2 == x).tolist() == [False, True, False]
    assert (x != 2).tolist() == [True, False, True]
    assert (2 < x).tolist() == [False, False, True]
    assert (2 >= x).tolist() == [True, True, False]
    assert (x > np.float32(1.5)).tolist() == [False, True, True]
    assert (x == float("nan")).tolist() == [False] * 3
    assert (x != float("nan")).tolist() == [True] * 3
    assert (x < 2).dtype is plast.bool


def test_comparisons_carry_no_gradient():
    x = plast.tensor([1.0, 2.0], requires_grad=True)
    for out in (x == 1, x < 1, plast.isnan(x), plast.logical_not(x), x.isfinite()):
        assert out.dtype is plast.bool and not out.requires_grad


def test_tensors_stay_hashable_and_eq_falls_back():
    a = plast.tensor([1.0, 2.0])
    b = plast.tensor([1.0, 2.0])
    d = {a: "a", b: "b"}
    assert d[a] == "a" and d[b] == "b"
    assert len({a, b, a}) == 2
    assert a in {a} and b not in {a}
    assert a in [a] and hash(a) != hash(b)
    assert (a == None) is False  # noqa: E711
    assert (a != None) is True  # noqa: E711
    assert (a == "x") is False
    with pytest.raises(TypeError):
        a < "x"  # noqa: B015
    assert bool(plast.tensor(3) == 3)


LOGICAL = ["logical_and", "logical_or", "logical_xor"]


@pytest.mark.parametrize("shapes", BROADCASTS)
@pytest.mark.parametrize("name", LOGICAL)
def test_logical(name, shapes):
    rng = np.random.default_rng(10)
    a = rng.integers(0, 2, shapes[0]).astype(np.bool_)
    b = rng.integers(0, 2, shapes[1]).astype(np.bool_)
    fp, ft = getattr(plast, name), getattr(torch, name)
    both(fp, ft, a, b)
    both(getattr(plast.Tensor, name), getattr(torch.Tensor, name), a, b)
    both(fp, ft, a.astype(np.float32) * 0.5, b.astype(np.int64) * 3)  # any dtypes: nonzero is True
    both(fp, ft, np.array([float("nan"), 0.0, -0.0]), np.array([True, True, True]))


def test_logical_not_and_bool_operators():
    a = np.array([[True, False, True]])
    b = np.array([[True], [False]])
    both(lambda x: plast.logical_not(x), lambda x: torch.logical_not(x), np.array([0.0, 2.0, float("nan")]))
    both(lambda x: x.logical_not(), lambda x: x.logical_not(), np.array([0, 3]))
    for op in ("__and__", "__or__", "__xor__"):
        both(lambda x, y, op=op: getattr(x, op)(y), lambda x, y, op=op: getattr(x, op)(y), a, b)
    both(lambda x: ~x, lambda x: ~x, a)
    both(lambda x: x & True, lambda x: x & True, a)
    both(lambda x: True | x, lambda x: True | x, a)


@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_bitwise_integers(dt):
    rng = np.random.default_rng(11)
    a = rng.integers(-100, 100, (3, 4)).astype(dt)
    b = rng.integers(-100, 100, (4,)).astype(dt)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        both(getattr(plast, name), getattr(torch, name), a, b)
    both(lambda x, y: x & y, lambda x, y: x & y, a, b)
    both(lambda x, y: x | y, lambda x, y: x | y, a, b)
    both(lambda x, y: x ^ y, lambda x, y: x ^ y, a, b)
    both(lambda x: ~x, lambda x: ~x, a)
    both(lambda x: x & 3, lambda x: x & 3, a)
    both(lambda x: 6 ^ x, lambda x: 6 ^ x, a)
    both(lambda x, y: x ^ y, lambda x, y: x ^ y, a, b.astype(np.bool_))


def test_bitwise_rejects_floats():
    x = plast.tensor([1.0, 2.0])
    with pytest.raises(plast.DTypeError, match="integer and bool"):
        x & x
    with pytest.raises(plast.DTypeError, match="integer and bool"):
        _ = ~x
    with pytest.raises(plast.DTypeError, match="integer and bool"):
        plast.tensor([1, 2]) | 1.5


@pytest.mark.parametrize("name", ["isfinite", "isnan", "isinf"])
def test_isfinite_isnan_isinf(name):
    x = np.array([[1.0, float("inf"), -float("inf")], [float("nan"), 0.0, -2.5]])
    fp, ft = getattr(plast, name), getattr(torch, name)
    for dt in DTYPES:
        both(fp, ft, x.astype(dt))
        both(lambda t: getattr(t, name)(), lambda t: getattr(t, name)(), x.astype(dt).T)
    both(fp, ft, np.array([1, -2], np.int64))
    both(fp, ft, np.zeros((0, 2), np.float32))


# ---- rounding ----

ROUNDING = [
    ("floor", lambda x: x.floor(), lambda x: x.floor()),
    ("ceil", lambda x: plast.ceil(x), lambda x: torch.ceil(x)),
    ("trunc", lambda x: x.trunc(), lambda x: x.trunc()),
    ("round", lambda x: x.round(), lambda x: x.round()),
    ("round2", lambda x: plast.round(x, decimals=2), lambda x: torch.round(x, decimals=2)),
    ("round-1", lambda x: x.round(decimals=-1), lambda x: x.round(decimals=-1)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,fp,ft", ROUNDING, ids=[r[0] for r in ROUNDING])
def test_rounding(name, fp, ft, dtype, device):
    helper_test_op([(4, 5)], fp, ft, dtype=dtype, low=-30, high=30, device=device)
    helper_test_op([(0, 5)], fp, ft, dtype=dtype, device=device)
    halves = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 1234.5678, -7.25, 15.0, 25.0], dtype)
    helper_test_op(None, fp, ft, inputs=[halves], dtype=dtype, device=device)
    x = plast.tensor(halves, requires_grad=True)
    fp(x).backward(plast.ones(halves.shape, dtype=x.dtype))
    assert x.grad is not None and not x.grad.numpy().any()  # zeros, as torch gives


def test_rounding_integers_and_bool():
    i = np.array([3, -4], np.int64)
    for name in ("floor", "ceil", "trunc"):
        both(getattr(plast, name), getattr(torch, name), i)
    assert plast.round(plast.tensor(i)).tolist() == [3, -4]  # torch refuses; whole numbers are already round
    with pytest.raises(plast.DTypeError, match="bool"):
        plast.floor(plast.tensor([True]))
    with pytest.raises(TypeError, match="decimals"):
        plast.round(plast.tensor([1.0]), decimals=1.5)


# ---- unary float functions ----

UNARY = [
    ("reciprocal", lambda x: x.reciprocal(), lambda x: x.reciprocal(), 0.3, 2.0),
    ("square", lambda x: x.square(), lambda x: x.square(), -2.0, 2.0),
    ("exp2", lambda x: plast.exp2(x), lambda x: torch.exp2(x), -3.0, 3.0),
    ("log2", lambda x: x.log2(), lambda x: x.log2(), 0.1, 4.0),
    ("log10", lambda x: plast.log10(x), lambda x: torch.log10(x), 0.1, 4.0),
    ("expm1", lambda x: x.expm1(), lambda x: x.expm1(), -3.0, 3.0),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,fp,ft,low,high", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fp, ft, low, high, dtype, device):
    helper_test_op([(3, 4)], fp, ft, dtype=dtype, low=low, high=high, device=device)
    helper_test_op([(0,)], fp, ft, dtype=dtype, low=low, high=high, device=device)
    helper_test_op([(1, 1)], fp, ft, dtype=dtype, low=low, high=high, device=device)
    helper_test_op(
        [(3, 4, 5)],
        lambda x: fp(x.permute(2, 0, 1)),
        lambda x: ft(x.permute(2, 0, 1)),
        dtype=dtype,
        low=low,
        high=high,
        device=device,
    )


@pytest.mark.parametrize("name", ["reciprocal", "square", "exp2", "log2", "log10", "expm1"])
def test_unary_integer_inputs(name):
    fp, ft = getattr(plast, name), getattr(torch, name)
    both(fp, ft, np.array([1, 2, 4], np.int64), rtol=1e-6)
    both(fp, ft, np.array([1, 2, 4], np.int32), rtol=1e-6)
    both(fp, ft, np.array([True, False]), rtol=1e-6)
    with pytest.raises(TypeError, match="expected a tensor"):
        fp([1.0])


def test_log10_exact_at_powers_of_ten():
    assert plast.log10(plast.tensor([1.0, 10.0, 100.0, 1000.0])).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_expm1_is_accurate_near_zero():
    x = plast.tensor([1e-10, -1e-12], dtype=plast.float64)
    np.testing.assert_allclose(plast.expm1(x).numpy(), np.expm1(x.numpy()), rtol=1e-15)


# ---- activations and fused arithmetic ----

ACTIVATIONS = [
    ("softplus", lambda x: plast.softplus(x), lambda x: F.softplus(x)),
    (
        "softplus_beta",
        lambda x: plast.softplus(x, beta=2.0, threshold=3.0),
        lambda x: F.softplus(x, 2.0, 3.0),
    ),
    ("softplus_half", lambda x: plast.softplus(x, 0.5, 1.0), lambda x: F.softplus(x, 0.5, 1.0)),
    ("leaky_relu", lambda x: plast.leaky_relu(x), lambda x: F.leaky_relu(x)),
    ("leaky_relu_slope", lambda x: plast.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.2)),
    ("elu", lambda x: plast.elu(x), lambda x: F.elu(x)),
    ("elu_alpha", lambda x: plast.elu(x, alpha=0.7), lambda x: F.elu(x, alpha=0.7)),
    ("hardtanh", lambda x: plast.hardtanh(x), lambda x: F.hardtanh(x)),
    ("hardtanh_bounds", lambda x: plast.hardtanh(x, -0.5, 2.0), lambda x: F.hardtanh(x, -0.5, 2.0)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,fp,ft", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activations(name, fp, ft, dtype, device):
    helper_test_op([(4, 6)], fp, ft, dtype=dtype, low=-4, high=4, device=device)
    helper_test_op([(0, 6)], fp, ft, dtype=dtype, device=device)
    helper_test_op([(4, 6)], lambda x: fp(x.T), lambda x: ft(x.T), dtype=dtype, device=device)
    # edges: exactly 0 and the hardtanh bounds, and inputs large enough that exp overflows in a discarded branch
    edges = np.array([0.0, -1.0, 1.0, -0.5, 2.0, 100.0, -100.0, 1e4, 3.0, 1.5], dtype)
    helper_test_op(None, fp, ft, inputs=[edges], dtype=dtype, device=device)


def test_activation_details():
    with pytest.raises(ValueError, match="min_val"):
        plast.hardtanh(plast.tensor([1.0]), 2.0, 1.0)
    with pytest.raises(NotImplementedError, match="inplace"):
        plast.leaky_relu(plast.tensor([1.0]), inplace=True)
    both(lambda x: plast.hardtanh(x), lambda x: F.hardtanh(x), np.array([-3, 0, 3]))
    assert plast.softplus(plast.tensor([1, 2])).dtype is plast.float32


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes", [((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)), ((0, 2), (2,), ()), ((1,), (2, 1), (1, 3))]
)
def test_lerp_addcmul_addcdiv(shapes, dtype, device):
    helper_test_op(shapes, lambda a, b, w: a.lerp(b, w), dtype=dtype, device=device)
    helper_test_op(
        shapes[:2],
        lambda a, b: plast.lerp(a, b, 0.3) if isinstance(a, plast.Tensor) else torch.lerp(a, b, 0.3),
        dtype=dtype,
        device=device,
    )
    helper_test_op(shapes[:2], lambda a, b: a.lerp(b, 0.8), dtype=dtype, device=device)
    helper_test_op(shapes, lambda a, b, c: a.addcmul(b, c), dtype=dtype, device=device)
    helper_test_op(shapes, lambda a, b, c: a.addcmul(b, c, value=-0.5), dtype=dtype, device=device)
    rng = np.random.default_rng(12)
    ins = [
        rng.uniform(-2, 2, shapes[0]).astype(dtype),
        rng.uniform(-2, 2, shapes[1]).astype(dtype),
        away_from_zero(shapes[2], rng, dtype),
    ]
    helper_test_op(None, lambda a, b, c: a.addcdiv(b, c), inputs=ins, dtype=dtype, device=device)
    helper_test_op(
        None,
        lambda a, b, c: (plast if isinstance(a, plast.Tensor) else torch).addcdiv(a, b, c, value=2),
        inputs=ins,
        dtype=dtype,
        device=device,
    )


def test_lerp_addcdiv_errors():
    i = plast.tensor([1, 2])
    with pytest.raises(plast.DTypeError, match="floating"):
        plast.lerp(i, i, 0.5)
    with pytest.raises(plast.DTypeError, match="integer division"):
        plast.addcdiv(i, i, i)
    both(lambda x: x.addcmul(x, x, value=2), lambda x: x.addcmul(x, x, value=2), np.array([2, 3, -4]))


# ---- non-contiguous inputs for the binary ops ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("view_name,view", NONCONTIG, ids=[n[0] for n in NONCONTIG])
@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a**b,
        lambda a, b: a % (b + 3.0),
        lambda a, b: (plast if isinstance(a, plast.Tensor) else torch).fmod(a, b + 3.0),
        lambda a, b: (plast if isinstance(a, plast.Tensor) else torch).maximum(a, b),
        lambda a, b: a.minimum(b),
        lambda a, b: a.clamp(b - 0.5, b + 0.5),
        lambda a, b: a.where(a > b, b),
        lambda a, b: a.masked_fill(b > 0.5, 0.0),
    ],
    ids=["pow", "remainder", "fmod", "maximum", "minimum", "clamp", "where", "masked_fill"],
)
def test_non_contiguous(fn, view_name, view, dtype, device):
    rng = np.random.default_rng(13)
    shape = (3, 4, 5) if view_name == "permute" else (4, 5)
    a = rng.uniform(0.5, 2.0, shape).astype(dtype)
    b = rng.uniform(0.5, 2.0, shape).astype(dtype)
    helper_test_op(None, fn, inputs=[a, b], dtype=dtype, transform=view, device=device)


# ---- double backward and finite differences (float64) ----

DOUBLE = [
    ("pow", lambda a, b: a**b),
    ("pow_scalar", lambda a, b: a**3 * b),
    ("rpow", lambda a, b: 1.7**a + b),
    ("maximum", lambda a, b: (plast if isinstance(a, plast.Tensor) else torch).maximum(a * a, b)),
    ("clamp", lambda a, b: a.clamp(b * 0.5, b) * a),
    ("where", lambda a, b: (a * b).where(a > b, b * b)),
    ("remainder", lambda a, b: (a * a) % (b + 3.0)),
    ("softplus", lambda a, b: (plast.softplus if isinstance(a, plast.Tensor) else F.softplus)(a * b, 2.0)),
    ("elu", lambda a, b: (plast.elu if isinstance(a, plast.Tensor) else F.elu)(a * b)),
    ("lerp", lambda a, b: a.lerp(b, a * b)),
    ("log2_exp2", lambda a, b: (a * a + 1).log2() * b.exp2()),
]


@pytest.mark.parametrize("name,fn", DOUBLE, ids=[d[0] for d in DOUBLE])
def test_double_backward_vs_torch(name, fn):
    rng = np.random.default_rng(14)
    a_np = rng.uniform(0.4, 1.6, (3, 4))
    b_np = rng.uniform(0.4, 1.6, (3, 4))
    v_np = rng.uniform(0.5, 1.5, (3, 4))
    up = rng.uniform(0.5, 1.5, (3, 4))

    def run(mod, grad_fn):
        a = mod.tensor(a_np, requires_grad=True)
        b = mod.tensor(b_np, requires_grad=True)
        out = fn(a, b)
        ga, gb = grad_fn(out, (a, b), mod.tensor(up), create_graph=True)
        (ga * mod.tensor(v_np) + gb * gb).sum().backward()
        return [g.detach().numpy() if g is not None else np.zeros((3, 4)) for g in (ga, gb, a.grad, b.grad)]

    got = run(plast, lambda o, i, g, create_graph: plast.autograd.grad(o, i, g, create_graph=create_graph))
    want = run(torch, lambda o, i, g, create_graph: torch.autograd.grad(o, i, g, create_graph=create_graph))
    for i, (p, t) in enumerate(zip(got, want)):
        np.testing.assert_allclose(p, t, rtol=1e-10, atol=1e-10, err_msg=f"result {i}")


@pytest.mark.parametrize("name,fn", DOUBLE, ids=[d[0] for d in DOUBLE])
def test_gradient_matches_finite_differences(name, fn):
    rng = np.random.default_rng(15)
    a_np = rng.uniform(0.4, 1.6, (2, 3))
    b_np = rng.uniform(0.4, 1.6, (2, 3))
    w = rng.uniform(0.5, 1.5, (2, 3))

    def f(a, b):
        return float((fn(plast.tensor(a), plast.tensor(b)).numpy() * w).sum())

    a = plast.tensor(a_np, requires_grad=True)
    b = plast.tensor(b_np, requires_grad=True)
    (fn(a, b) * plast.tensor(w)).sum().backward()
    eps = 1e-6
    for x_np, g in ((a_np, a.grad.numpy()), (b_np, b.grad.numpy())):
        fd = np.zeros_like(x_np)
        for idx in np.ndindex(x_np.shape):
            orig = x_np[idx]
            x_np[idx] = orig + eps
            hi = f(a_np, b_np)
            x_np[idx] = orig - eps
            lo = f(a_np, b_np)
            x_np[idx] = orig
            fd[idx] = (hi - lo) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


# ---- results have the dtype torch gives ----

DTYPE_CASES = [
    (lambda m, a, b: a**b, "i64", "f32"),
    (lambda m, a, b: a**b, "i32", "i64"),
    (lambda m, a, b: m.maximum(a, b), "i32", "f64"),
    (lambda m, a, b: m.minimum(a, b), "b", "i32"),
    (lambda m, a, b: a // b, "i32", "i64"),
    (lambda m, a, b: a % b, "f32", "f64"),
    (lambda m, a, b: m.fmod(a, b), "i64", "f32"),
    (lambda m, a, b: m.where(a > 0, a, b), "i32", "f32"),
    (lambda m, a, b: a == b, "i32", "f64"),
    (lambda m, a, b: m.logical_xor(a, b), "f32", "i64"),
    (lambda m, a, b: a & b, "b", "i32"),
    (lambda m, a, b: a.clamp(b, None), "i64", "f32"),
    (lambda m, a, b: m.addcmul(a, a, b), "i64", "i32"),
]
_NP = {"b": np.bool_, "i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}


@pytest.mark.parametrize("fn,da,db", DTYPE_CASES)
def test_result_dtypes_match_torch(fn, da, db):
    a = np.array([1, 2, 3]).astype(_NP[da])
    b = np.array([1, 1, 2]).astype(_NP[db])
    both(lambda x, y: fn(plast, x, y), lambda x, y: fn(torch, x, y), a, b, rtol=1e-6)


def test_op_table_rows():
    from plast.ops.registry import OPS

    for name in (
        "pow",
        "remainder",
        "fmod",
        "maximum",
        "minimum",
        "clamp",
        "where",
        "exp2",
        "log2",
        "log10",
        "expm1",
        "floor",
        "round",
    ):
        assert OPS[name].backward is not None, name
        # fusible means the elementwise chain takes it (tests/test_op_table.py fuses every fusible row); of
        # these, the chain bytecode lacks clamp and where only
        assert OPS[name].fusible == (name not in ("clamp", "where")), name
    for name in ("floor_divide", "eq", "lt", "logical_and", "bitwise_xor", "isnan"):
        assert OPS[name].backward is None, name
