"""torch's inverse trig and hyperbolic functions, atan2, erfc, erfinv, lgamma, digamma, the float bit-level ops
(copysign, nextafter, signbit) and the NaN-aware composites (fmax, fmin, nan_to_num, heaviside, isreal,
float_power, sinc, ldexp), i0, gcd, lcm, the shifts and mvlgamma against torch: values and gradients on random inputs, float32 and float64, broadcast and
non-contiguous operands, the special values at the domain edges, integer promotion, and the method, in-place and
alias forms (issue 18).

float32 results are compared with torch's float64 result rounded to float32: plast computes erfinv, digamma and
lgamma in double for float32 inputs, and torch's float32 digamma is a few ulp off near its root.
"""

import math

import numpy as np
import pytest

import plast

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")

# name -> (low, high) of the random inputs: inside each function's domain, away from its poles
UNARY = {
    "asin": (-0.99, 0.99),
    "acos": (-0.99, 0.99),
    "atan": (-5.0, 5.0),
    "asinh": (-5.0, 5.0),
    "acosh": (1.01, 6.0),
    "atanh": (-0.99, 0.99),
    "erfc": (-3.0, 6.0),
    "erfinv": (-0.999, 0.999),
    "lgamma": (0.05, 8.0),
    "digamma": (0.05, 8.0),
    "sinc": (-3.0, 3.0),
    "i0": (-12.0, 12.0),
}
ALIASES = {
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
    "arctan2": "atan2",
}
TOL = {"float32": dict(rtol=2e-6, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-13)}
# gradients go through a few more roundings (a sqrt, a division): looser
GTOL = {"float32": dict(rtol=2e-5, atol=1e-5), "float64": dict(rtol=1e-10, atol=1e-12)}


def _ref(fn, *arrays):
    """torch's result in float64, as numpy."""
    return fn(*(torch.tensor(np.asarray(a, np.float64)) for a in arrays)).numpy()


def _close(got, want, dtype, tol=TOL):
    np.testing.assert_allclose(got, want.astype(dtype), equal_nan=True, **tol[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_and_gradients_like_torch(name, dtype):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    lo, hi = UNARY[name]
    a = rng.uniform(lo, hi, (4, 6)).astype(dtype)
    x = plast.tensor(a, requires_grad=True)
    y = getattr(plast, name)(x)
    assert y.dtype == x.dtype and tuple(y.shape) == a.shape
    _close(y.detach().numpy(), _ref(getattr(torch, name), a), dtype)
    # the gradient: torch's, in float64, at the same (rounded) points
    g = rng.standard_normal(a.shape).astype(dtype)
    y.backward(plast.tensor(g))
    t = torch.tensor(a.astype(np.float64), requires_grad=True)
    getattr(torch, name)(t).backward(torch.tensor(g.astype(np.float64)))
    # NOTE: torch's float64 trigamma (digamma's derivative) is only good to ~5e-10 (plast's to ~1e-14, checked
    # against mpmath below)
    gtol = dict(rtol=1e-8, atol=1e-10) if (name, dtype) == ("digamma", "float64") else GTOL[dtype]
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy().astype(dtype), equal_nan=True, **gtol)


def test_digamma_and_its_derivative_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    xs = [0.3, 1.4616321449683622, 1.7, 5.5, 12.0, 1e5, -0.5, -2.5, -100.25]
    x = plast.tensor(xs, dtype=plast.float64, requires_grad=True)
    y = plast.digamma(x)
    y.sum().backward()
    np.testing.assert_allclose(
        y.detach().numpy(), [float(mpmath.psi(0, v)) for v in xs], rtol=1e-13, atol=1e-15
    )
    np.testing.assert_allclose(x.grad.numpy(), [float(mpmath.psi(1, v)) for v in xs], rtol=1e-13)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_non_contiguous_method_and_in_place_like_torch(name):
    rng = np.random.default_rng(3)
    lo, hi = UNARY[name]
    a = rng.uniform(lo, hi, (5, 8))
    x = plast.tensor(a)
    view = x.t()[::2]  # transposed and strided
    want = _ref(getattr(torch, name), a.T[::2])
    _close(getattr(plast, name)(view).numpy(), want, "float64")
    _close(getattr(view, name)().numpy(), want, "float64")  # the method
    y = plast.tensor(a)
    assert getattr(y, name + "_")() is y  # the in-place form
    _close(y.numpy(), _ref(getattr(torch, name), a), "float64")


@pytest.mark.parametrize("alias,name", sorted(ALIASES.items()))
def test_aliases_are_the_functions(alias, name):
    assert getattr(plast, alias) is getattr(plast, name)
    assert getattr(plast.Tensor, alias) is getattr(plast.Tensor, name)
    assert getattr(plast.Tensor, alias + "_") is getattr(plast.Tensor, name + "_")


# the edges of each domain: +-0, +-1, +-inf, nan, poles and just outside the domain
EDGES = {
    "asin": [-1.0, 1.0, -0.0, 0.0, 1.5, -1.5, INF, -INF, NAN],
    "acos": [-1.0, 1.0, -0.0, 0.0, 1.5, INF, NAN],
    "atan": [-0.0, 0.0, INF, -INF, 1e30, -1e30, NAN],
    "asinh": [-0.0, 0.0, INF, -INF, 1e30, -1e30, 1e-30, NAN],
    "acosh": [1.0, 0.5, 0.0, -1.0, INF, -INF, 1e30, NAN],
    "atanh": [-1.0, 1.0, -0.0, 0.0, 1.5, -1.5, INF, NAN],
    "erfc": [-0.0, 0.0, INF, -INF, 10.0, 26.0, 30.0, -10.0, NAN],
    "erfinv": [-1.0, 1.0, -0.0, 0.0, 1.0 - 1e-7, -1.0 + 1e-7, 1e-20, 1.5, -1.5, INF, NAN],
    "lgamma": [0.0, -0.0, -1.0, -2.0, -0.5, -2.5, 1.0, 2.0, 1e-30, INF, -INF, 1e30, NAN],
    "digamma": [0.0, -0.0, -1.0, -2.0, -0.5, -2.5, -100.25, 1.0, 1e-30, 1e30, INF, -INF, NAN],
    "sinc": [0.0, -0.0, 1.0, -1.0, 0.5, 1e-20, 1e6 + 0.5, INF, -INF, NAN],
    # either side of the switch to the asymptotic series (30), float32's and float64's overflow
    "i0": [0.0, -0.0, 1e-20, 29.99, 30.01, -30.5, 88.0, 100.0, 709.0, 710.0, NAN],
}


def test_i0_of_infinity_is_infinity_where_torch_says_nan():
    # a deliberate difference: I0(+-inf) is +inf (the limit; scipy says so too); torch's Chebyshev form gives nan
    assert torch.i0(torch.tensor([INF, -INF])).isnan().all()
    assert plast.i0(plast.tensor([INF, -INF])).tolist() == [INF, INF]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(EDGES))
def test_unary_special_values_like_torch(name, dtype):
    vals = np.array(EDGES[name], dtype)
    got = getattr(plast, name)(plast.tensor(vals)).numpy()
    want = getattr(torch, name)(torch.tensor(vals)).numpy()
    if (
        dtype == "float32" and name != "sinc"
    ):  # sinc: torch's float32 sin(pi x) / (pi x), pi rounded to float32
        want = _ref(getattr(torch, name), vals).astype(dtype)
    np.testing.assert_allclose(got, want, rtol=4e-6 if dtype == "float32" else 1e-12, equal_nan=True)
    # the signs of zeros and infinities too (asin(-0) = -0, digamma(-0) = +inf)
    both = ~np.isnan(want)
    assert (np.signbit(got[both]) == np.signbit(want[both])).all(), (got, want)


def test_gradients_at_the_domain_edges_like_torch():
    # torch's formulas give inf (not nan) where the derivative blows up, and nan outside the domain
    for name, vals in (
        ("asin", [-1.0, 1.0, 0.0]),
        ("acos", [-1.0, 1.0]),
        ("atanh", [-1.0, 1.0]),
        ("acosh", [1.0, 0.5]),
        ("erfinv", [0.0, 1.0]),
        ("lgamma", [-0.5, 3.0]),
        ("sinc", [0.0, 1.0, -2.0]),
    ):
        x = plast.tensor(vals, dtype=plast.float64, requires_grad=True)
        getattr(plast, name)(x).sum().backward()
        t = torch.tensor(vals, dtype=torch.float64, requires_grad=True)
        getattr(torch, name)(t).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_integer_inputs_give_float32_like_torch(name):
    ints = [1, 0, 2, 3] if name not in ("acosh", "lgamma", "digamma") else [1, 2, 3, 5]
    for tdt, pdt in ((torch.int64, plast.int64), (torch.int32, plast.int32), (torch.bool, plast.bool)):
        t = getattr(torch, name)(torch.tensor(ints, dtype=tdt))
        p = getattr(plast, name)(plast.tensor(ints, dtype=pdt))
        assert p.dtype == plast.float32 and t.dtype == torch.float32
        np.testing.assert_allclose(p.numpy(), t.numpy(), rtol=4e-6, equal_nan=True)


def test_16bit_inputs_round_once_like_torch():
    a = np.linspace(-0.9, 0.9, 7)
    for tdt, pdt in ((torch.bfloat16, plast.bfloat16), (torch.float16, plast.float16)):
        for name in ("asin", "atan", "erfinv"):
            t = getattr(torch, name)(torch.tensor(a, dtype=tdt))
            p = getattr(plast, name)(plast.tensor(a, dtype=pdt))
            assert str(p.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
            np.testing.assert_allclose(p.float().numpy(), t.float().numpy(), rtol=1e-2)


def test_in_place_on_an_integer_tensor_raises_like_torch():
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).asin_()
    with pytest.raises(RuntimeError, match="asin_"):
        plast.tensor([1, 2]).asin_()
    with pytest.raises(TypeError):
        plast.asin([0.5])  # a list is no tensor


# ---- binary ops: atan2, copysign, nextafter, fmax, fmin, float_power, ldexp ----

BINARY = ["atan2", "copysign", "fmax", "fmin", "float_power", "ldexp", "nextafter"]


def _binary_inputs(name, rng, dtype):
    a = rng.uniform(-3.0, 3.0, (3, 1, 5))
    b = rng.uniform(-3.0, 3.0, (4, 1))  # broadcast against a: (3, 4, 5)
    if name == "float_power":
        a = np.abs(a) + 0.1
    if name == "ldexp":
        b = rng.integers(-4, 5, (4, 1)).astype(np.float64)
    if name in ("fmax", "fmin"):
        b = rng.uniform(-3.0, 3.0, (3, 4, 5))
        b[0, 0, :2] = a[0, 0, :2]  # ties
        a[1, 0, 0], b[1, 1, 1], b[2, 2, 2] = NAN, NAN, NAN
    return a.astype(dtype), b.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", BINARY)
def test_binary_values_and_gradients_like_torch(name, dtype):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    a, b = _binary_inputs(name, rng, dtype)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=name != "ldexp")
    pa, pb = plast.tensor(a, requires_grad=True), plast.tensor(b, requires_grad=name != "ldexp")
    if name == "nextafter":  # no gradient in torch either
        ta, tb, pa, pb = ta.detach(), tb.detach(), pa.detach(), pb.detach()
    ty, py = getattr(torch, name)(ta, tb), getattr(plast, name)(pa, pb)
    assert str(py.dtype).split(".")[-1] == str(ty.dtype).split(".")[-1]
    assert tuple(py.shape) == tuple(ty.shape)
    np.testing.assert_allclose(py.detach().numpy(), ty.detach().numpy(), equal_nan=True, **TOL[dtype])
    if name == "nextafter":
        assert (py.numpy() == ty.numpy()).all()  # bit-exact: the next float
        return
    g = rng.standard_normal(tuple(ty.shape)).astype(str(ty.dtype).split(".")[-1])
    ty.backward(torch.tensor(g))
    py.backward(plast.tensor(g))
    for p, t in ((pa, ta), (pb, tb)):
        if t.requires_grad:
            np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), equal_nan=True, **GTOL[dtype])
    # the method form
    assert np.array_equal(getattr(pa, name)(pb).detach().numpy(), py.detach().numpy(), equal_nan=True)


def test_binary_non_contiguous_like_torch():
    rng = np.random.default_rng(5)
    a, b = rng.uniform(-2, 2, (6, 4)), rng.uniform(-2, 2, (4, 6))
    for name in BINARY:
        bb = np.abs(b) + 0.1 if name == "float_power" else np.round(b) if name == "ldexp" else b
        aa = np.abs(a) + 0.1 if name == "float_power" else a
        want = getattr(torch, name)(torch.tensor(aa)[::2], torch.tensor(bb).t()[::2]).numpy()
        got = getattr(plast, name)(plast.tensor(aa)[::2], plast.tensor(bb).t()[::2]).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True, err_msg=name)


def test_atan2_special_values_like_torch():
    v = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN]
    a = np.array([x for x in v for _ in v])
    b = np.array([y for _ in v for y in v])
    for dtype in ("float32", "float64"):
        got = plast.atan2(plast.tensor(a.astype(dtype)), plast.tensor(b.astype(dtype))).numpy()
        want = torch.atan2(torch.tensor(a.astype(dtype)), torch.tensor(b.astype(dtype))).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
        assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all()
    # the gradient at the origin is nan, as torch's
    x = plast.tensor([0.0, 1.0], requires_grad=True)
    y = plast.tensor([0.0, 1.0], requires_grad=True)
    plast.atan2(x, y).sum().backward()
    assert math.isnan(x.grad.tolist()[0]) and math.isnan(y.grad.tolist()[0])


def test_binary_promotion_like_torch():
    i, j = [3, -2, 0], [1, 4, -5]
    for name in ("atan2", "copysign", "float_power", "ldexp"):
        t = getattr(torch, name)(torch.tensor(i), torch.tensor(j))
        p = getattr(plast, name)(plast.tensor(i), plast.tensor(j))
        assert str(p.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], name
        np.testing.assert_allclose(p.numpy(), t.numpy(), rtol=1e-6)
    # float32 with float64 gives float64; float32 with an int tensor stays float32
    for name in ("atan2", "copysign", "nextafter", "fmax"):
        f32, f64 = torch.tensor([0.5], dtype=torch.float32), torch.tensor([-2.0], dtype=torch.float64)
        p32, p64 = plast.tensor([0.5], dtype=plast.float32), plast.tensor([-2.0], dtype=plast.float64)
        assert str(getattr(plast, name)(p32, p64).dtype) == "plast.float64"
        assert getattr(torch, name)(f32, f64).dtype == torch.float64
    assert plast.atan2(plast.tensor([1.0]), plast.tensor([2])).dtype == plast.float32
    assert plast.fmax(plast.tensor([1, 5]), plast.tensor([3, 2])).tolist() == [3, 5]  # integers stay integers


def test_copysign_and_signbit_read_the_sign_bit_like_torch():
    a = np.array([1.0, -2.0, 0.0, -0.0, INF, NAN, 3.0, 3.0])
    b = np.array([-0.0, 0.0, -1.0, 1.0, -INF, -1.0, NAN, -NAN])
    for dtype in ("float32", "float64"):
        got = plast.copysign(plast.tensor(a.astype(dtype)), plast.tensor(b.astype(dtype))).numpy()
        want = torch.copysign(torch.tensor(a.astype(dtype)), torch.tensor(b.astype(dtype))).numpy()
        np.testing.assert_array_equal(got, want)
        assert (np.signbit(got) == np.signbit(want)).all()
        x = np.array([-0.0, 0.0, -1.0, 2.0, -INF, INF, NAN, -NAN], dtype)
        assert plast.signbit(plast.tensor(x)).tolist() == torch.signbit(torch.tensor(x)).tolist()
    ints = [-3, 0, 4]
    assert plast.signbit(plast.tensor(ints)).tolist() == torch.signbit(torch.tensor(ints)).tolist()
    # copysign's gradient: +-1 toward input, 0 where input is 0, none toward other
    x = plast.tensor([2.0, 0.0, -3.0], requires_grad=True)
    s = plast.tensor([-1.0, -1.0, 1.0], requires_grad=True)
    plast.copysign(x, s).sum().backward()
    tx = torch.tensor([2.0, 0.0, -3.0], requires_grad=True)
    ts = torch.tensor([-1.0, -1.0, 1.0], requires_grad=True)
    torch.copysign(tx, ts).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist() and s.grad.tolist() == ts.grad.tolist()
    # a scalar sign
    assert plast.copysign(plast.tensor([1.0, -2.0]), -1.0).tolist() == [-1.0, -2.0]


def test_nextafter_needs_floats_like_torch():
    with pytest.raises(RuntimeError):
        torch.nextafter(torch.tensor([1]), torch.tensor([2]))
    with pytest.raises(TypeError, match="floating point"):  # plast's DTypeError
        plast.nextafter(plast.tensor([1]), plast.tensor([2]))
    x = np.array([0.0, -0.0, 1.0, INF, NAN], np.float32)
    y = np.array([1.0, -1.0, 1.0, 0.0, 1.0], np.float32)
    got = plast.nextafter(plast.tensor(x), plast.tensor(y)).numpy()
    want = torch.nextafter(torch.tensor(x), torch.tensor(y)).numpy()
    np.testing.assert_array_equal(got, want)


def test_fmax_fmin_ignore_nan_and_give_ties_to_input_like_torch():
    a = [1.0, NAN, NAN, 2.0, -0.0]
    b = [NAN, 3.0, NAN, 2.0, 0.0]
    for name in ("fmax", "fmin"):
        pa, pb = plast.tensor(a, requires_grad=True), plast.tensor(b, requires_grad=True)
        ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        py, ty = getattr(plast, name)(pa, pb), getattr(torch, name)(ta, tb)
        np.testing.assert_array_equal(py.detach().numpy(), ty.detach().numpy())
        py.sum().backward()
        ty.sum().backward()
        assert pa.grad.tolist() == ta.grad.tolist() and pb.grad.tolist() == tb.grad.tolist(), name


def test_float_power_is_float64_and_in_place_needs_float64_like_torch():
    for base, exp in (([2, 3], 0.5), ([2.0, 3.0], 2), ([4.0], [-0.5])):
        t = torch.float_power(torch.tensor(base), torch.tensor(exp) if isinstance(exp, list) else exp)
        p = plast.float_power(plast.tensor(base), plast.tensor(exp) if isinstance(exp, list) else exp)
        assert p.dtype == plast.float64 and t.dtype == torch.float64
        np.testing.assert_allclose(p.numpy(), t.numpy(), rtol=1e-15)
    x = plast.tensor([2.0], dtype=plast.float64)
    assert x.float_power_(2) is x and x.tolist() == [4.0]
    with pytest.raises(RuntimeError):
        torch.tensor([2.0]).float_power_(2)
    with pytest.raises(RuntimeError, match="float64"):
        plast.tensor([2.0]).float_power_(2)
    # the gradient of a float32 input comes back in float32
    x = plast.tensor([2.0, 3.0], requires_grad=True)
    plast.float_power(x, 3).sum().backward()
    assert x.grad.dtype == plast.float32 and x.grad.tolist() == [12.0, 27.0]


def test_ldexp_like_torch():
    x = np.array([1.0, -3.0, 0.5, 0.0, 1e-30, 2.0**-149, 3.0], np.float32)
    e = np.array([3, -2, 10, 5, 200, 200, 130])
    for edt in ("int64", "int32", "float32"):
        got = plast.ldexp(plast.tensor(x), plast.tensor(e.astype(edt)))
        want = torch.ldexp(torch.tensor(x), torch.tensor(e.astype(edt)))
        assert got.dtype == plast.float32
        # an integer exponent is exact (1e-30 * 2**200 is 1.6e30); a float one overflows 2**200 to inf, as torch
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=edt)
    got = plast.ldexp(plast.tensor([1e-300, 5.0]), plast.tensor([2000, -1074]))
    np.testing.assert_array_equal(
        got.numpy(), torch.ldexp(torch.tensor([1e-300, 5.0]), torch.tensor([2000, -1074]))
    )
    y = plast.tensor([1.0, 2.0])
    assert y.ldexp_(plast.tensor([1, 2])) is y and y.tolist() == [2.0, 8.0]


# ---- unary composites: nan_to_num, heaviside, isreal, sinc ----


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_nan_to_num_like_torch(dtype):
    a = [NAN, INF, -INF, 1.5, -0.0]
    ta, pa = torch.tensor(a, dtype=getattr(torch, dtype)), plast.tensor(a, dtype=getattr(plast, dtype))
    for kwargs in ({}, {"nan": 2.0}, {"posinf": 9.0, "neginf": -9.0}, {"nan": -1.0, "posinf": 1e3}):
        got, want = plast.nan_to_num(pa, **kwargs), torch.nan_to_num(ta, **kwargs)
        assert str(got.dtype).split(".")[-1] == dtype
        np.testing.assert_array_equal(got.double().numpy(), want.double().numpy())
    assert plast.nan_to_num(plast.tensor([1, 2])).tolist() == [1, 2]
    x = plast.tensor([NAN, 1.0])
    assert x.nan_to_num_(nan=5.0) is x and x.tolist() == [5.0, 1.0]


def test_nan_to_num_gradient_is_zero_where_replaced_like_torch():
    a = [NAN, INF, -INF, 1.5]
    p, t = plast.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    plast.nan_to_num(p).sum().backward()
    torch.nan_to_num(t).sum().backward()
    assert p.grad.tolist() == t.grad.tolist() == [0.0, 0.0, 0.0, 1.0]


def test_heaviside_like_torch():
    x = [-1.5, -0.0, 0.0, 2.0, NAN, INF, -INF]
    for dtype in ("float32", "float64"):
        for v in ([0.5], [0.25] * 7):
            tv, pv = (
                torch.tensor(v, dtype=getattr(torch, dtype)),
                plast.tensor(v, dtype=getattr(plast, dtype)),
            )
            want = torch.heaviside(torch.tensor(x, dtype=getattr(torch, dtype)), tv)
            got = plast.heaviside(plast.tensor(x, dtype=getattr(plast, dtype)), pv)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    ints = [-2, 0, 3]
    assert (
        plast.heaviside(plast.tensor(ints), plast.tensor(7)).tolist()
        == torch.heaviside(torch.tensor(ints), torch.tensor(7)).tolist()
    )
    with pytest.raises(RuntimeError):
        torch.heaviside(torch.tensor([1.0]), torch.tensor([1]))
    with pytest.raises(TypeError, match="dtypes"):
        plast.heaviside(plast.tensor([1.0]), plast.tensor([1]))
    y = plast.tensor([-1.0, 0.0, 1.0])
    assert y.heaviside_(plast.tensor(0.5)) is y and y.tolist() == [0.0, 0.5, 1.0]


def test_isreal_like_torch():
    for a in ([1.0, NAN, INF], [1, 2], [True], [[1.5, 2.0]]):
        assert plast.isreal(plast.tensor(a)).tolist() == torch.isreal(torch.tensor(a)).tolist()
        assert plast.tensor(a).isreal().dtype == plast.bool


def test_sinc_in_place_and_integers_like_torch():
    x = plast.tensor([0.0, 0.5])
    assert x.sinc_() is x
    np.testing.assert_allclose(x.numpy(), torch.sinc(torch.tensor([0.0, 0.5])).numpy(), rtol=1e-7)
    assert plast.sinc(plast.tensor([0, 1])).dtype == plast.float32


def test_the_new_kernels_fuse_into_one_chain():
    # asin, erfc and atan2 carry chain opcodes: with a multiply they run as one elementwise chain
    from plast.graph.realize import watch_fusions

    x = plast.tensor(np.linspace(-0.4, 0.4, 12).reshape(3, 4))
    with watch_fusions() as fired:
        got = plast.atan2(plast.erfc(plast.asin(x * 2.0)), x).numpy()
    assert list(fired) == ["elementwise_chain"]
    tx = torch.tensor(np.linspace(-0.4, 0.4, 12).reshape(3, 4), dtype=torch.float32)
    np.testing.assert_allclose(got, torch.atan2(torch.erfc(torch.asin(tx * 2.0)), tx).numpy(), rtol=1e-6)


# ---- integer ops: gcd, lcm, the shifts ----

INTEGER = ["gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift"]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("name", INTEGER)
def test_integer_ops_like_torch(name, dtype):
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    bits = 8 * np.dtype(dtype).itemsize
    a = rng.integers(-1000, 1000, (3, 1, 6)).astype(dtype)
    b = rng.integers(-1000, 1000, (4, 1)).astype(dtype)  # broadcast: (3, 4, 6)
    if "shift" in name:  # counts in and out of range: < 0, up to and past the width
        b = rng.integers(-3, bits + 3, (4, 6)).astype(dtype)
        b[0, :4] = (-1, 0, bits - 1, bits)
    a[0, 0, :4] = (0, 0, np.iinfo(dtype).max, np.iinfo(dtype).min + 1)
    if "shift" in name:  # (gcd and lcm of the most negative value: below, torch's differ)
        a[0, 0, 2] = np.iinfo(dtype).min
    ta, tb, pa, pb = torch.tensor(a), torch.tensor(b), plast.tensor(a), plast.tensor(b)
    got, want = getattr(plast, name)(pa, pb), getattr(torch, name)(ta, tb)
    assert str(got.dtype).split(".")[-1] == dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(getattr(pa, name)(pb).numpy(), want.numpy())  # the method
    # non-contiguous operands
    bsl = (slice(None, None, 2), slice(None, None, 2 if "shift" in name else 1))
    np.testing.assert_array_equal(
        getattr(plast, name)(pa[..., ::2], pb[bsl]).numpy(),
        getattr(torch, name)(ta[..., ::2], tb[bsl]).numpy(),
    )
    # in place
    x = plast.tensor(a)
    assert getattr(x, name + "_")(pb[0]) is x
    np.testing.assert_array_equal(x.numpy(), getattr(torch, name)(ta, tb[0]).numpy())


def test_gcd_of_the_most_negative_value_does_not_crash():
    # numpy's signed gcd divides INT_MIN by -1 (SIGFPE); plast works on the magnitudes in uint64, so gcd(INT_MIN,
    # -1) is 1 and gcd(INT_MIN, 0) wraps to INT_MIN as |INT_MIN| does (torch's abs(INT_MIN) wraps too, but its
    # gcd(INT_MIN, 468) comes out negative, -4: plast gives 4)
    for dt in (plast.int32, plast.int64):
        lo = -(2 ** (31 if dt is plast.int32 else 63))
        a = plast.tensor([lo, lo, lo, lo], dtype=dt)
        b = plast.tensor([-1, 0, 468, 2], dtype=dt)
        assert plast.gcd(a, b).tolist() == [1, lo, 4, 2]
        lcm = plast.lcm(a, b).tolist()
        assert lcm[:2] == [lo, 0] and lcm[3] == lo  # |INT_MIN| * 1 wraps back to INT_MIN


def test_shift_operators_like_torch():
    t, p = torch.tensor([1, -8, 3]), plast.tensor([1, -8, 3])
    assert (p << 2).tolist() == (t << 2).tolist() and (p >> 1).tolist() == (t >> 1).tolist()
    assert (1 << p.abs()).tolist() == (1 << t.abs()).tolist()
    assert (100 >> p.abs()).tolist() == (100 >> t.abs()).tolist()
    p <<= 1
    assert p.tolist() == [2, -16, 6]
    # int32 with an int64 count promotes to int64, as torch
    r = plast.bitwise_left_shift(plast.tensor([1], dtype=plast.int32), plast.tensor([40]))
    assert r.dtype == plast.int64 and r.tolist() == [1 << 40]


@pytest.mark.parametrize("name", INTEGER)
def test_integer_ops_refuse_floats_and_bools_like_torch(name):
    for tdt, pdt in ((torch.float32, plast.float32), (torch.bool, plast.bool)):
        with pytest.raises((RuntimeError, NotImplementedError)):
            getattr(torch, name)(torch.tensor([1, 0], dtype=tdt), torch.tensor([1, 1], dtype=tdt))
        with pytest.raises(TypeError, match="integer"):
            getattr(plast, name)(plast.tensor([1, 0], dtype=pdt), plast.tensor([1, 1], dtype=pdt))
    with pytest.raises(TypeError, match="integer"):
        getattr(plast, name)(plast.tensor([4, 6]), 1.5)  # a float scalar promotes to float


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [1, 2, 4])
def test_mvlgamma_like_torch(p, dtype):
    rng = np.random.default_rng(p)
    a = rng.uniform((p - 1) / 2 + 0.05, 6.0, (3, 5)).astype(dtype)
    x, t = plast.tensor(a, requires_grad=True), torch.tensor(a.astype(np.float64), requires_grad=True)
    y, ty = plast.mvlgamma(x, p), torch.mvlgamma(t, p)
    _close(y.detach().numpy(), ty.detach().numpy(), dtype)
    y.sum().backward()
    ty.sum().backward()
    _close(x.grad.numpy(), t.grad.numpy(), dtype, GTOL)
    assert np.array_equal(x.mvlgamma(p).detach().numpy(), y.detach().numpy())
    # torch checks no domain: below (p - 1) / 2 and at the poles it is the sum's value
    edge = np.array([0.5, 0.25, 1.0, NAN, INF], dtype)
    np.testing.assert_allclose(
        plast.mvlgamma(plast.tensor(edge), p).numpy(),
        torch.mvlgamma(torch.tensor(edge), p).numpy(),
        rtol=1e-5,
        equal_nan=True,
    )


def test_mvlgamma_p_and_integers_like_torch():
    with pytest.raises(RuntimeError):
        torch.mvlgamma(torch.tensor([2.0]), 0)
    with pytest.raises(ValueError, match="p has to be"):
        plast.mvlgamma(plast.tensor([2.0]), 0)
    with pytest.raises(TypeError):
        plast.mvlgamma(plast.tensor([2.0]), 1.5)
    got = plast.mvlgamma(plast.tensor([2, 3]), 2)
    assert got.dtype == plast.float32
    np.testing.assert_allclose(got.numpy(), torch.mvlgamma(torch.tensor([2, 3]), 2).numpy(), rtol=1e-6)
    x = plast.tensor([2.0, 3.0])
    assert x.mvlgamma_(2) is x
    with pytest.raises(RuntimeError):
        plast.tensor([2, 3]).mvlgamma_(2)


# ---- igamma, igammac ----


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_igamma_values_and_gradients_like_torch(name, dtype):
    rng = np.random.default_rng(11)
    a = rng.uniform(0.1, 12.0, (4, 1)).astype(dtype)
    x = rng.uniform(0.01, 20.0, (3, 1, 5)).astype(dtype)  # broadcast: (3, 4, 5), both sides of x = a + 1
    pa, px = plast.tensor(a), plast.tensor(x, requires_grad=True)
    ta, tx = torch.tensor(a.astype(np.float64)), torch.tensor(x.astype(np.float64), requires_grad=True)
    y, ty = getattr(plast, name)(pa, px), getattr(torch, name)(ta, tx)
    assert str(y.dtype).split(".")[-1] == dtype
    # torch's float64 is ~1e-10 off near x = a (plast's series and continued fraction: ~1e-14, checked below)
    tol = dict(rtol=2e-6, atol=1e-7) if dtype == "float32" else dict(rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **tol)
    g = rng.standard_normal(tuple(ty.shape))
    y.backward(plast.tensor(g.astype(dtype)))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), **GTOL[dtype])
    # non-contiguous, the method and the in-place form
    np.testing.assert_allclose(
        getattr(plast, name)(pa[::2], px.detach()[:, :, ::2]).numpy(),
        getattr(torch, name)(ta[::2], tx.detach()[:, :, ::2]).numpy(),
        **tol,
    )
    z = plast.tensor(a)
    assert getattr(z, name + "_")(plast.tensor(np.float64(2.0).astype(dtype))) is z
    np.testing.assert_allclose(z.numpy(), getattr(torch, name)(ta, torch.tensor(2.0)).numpy(), **tol)


def test_igamma_edges_like_torch_and_against_mpmath():
    a = [0.0, 0.0, -1.0, 1.0, 2.0, INF, 2.0, 1e-3, 0.5, 3.0, 1.0, NAN, 2.0]
    x = [0.0, 1.0, 1.0, 0.0, INF, 1.0, -1.0, 1e-3, 40.0, 0.01, INF, 1.0, NAN]
    for name in ("igamma", "igammac"):
        for dtype in ("float32", "float64"):
            got = getattr(plast, name)(
                plast.tensor(a, dtype=getattr(plast, dtype)), plast.tensor(x, dtype=getattr(plast, dtype))
            )
            want = getattr(torch, name)(
                torch.tensor(a, dtype=getattr(torch, dtype)), torch.tensor(x, dtype=getattr(torch, dtype))
            )
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-30, equal_nan=True)
    mpmath = pytest.importorskip("mpmath")
    for av, xv in ((50.0, 49.0), (1000.0, 1010.0), (7.5, 3.2), (0.3, 5.0), (20.0, 35.0)):
        got = plast.igamma(
            plast.tensor([av], dtype=plast.float64), plast.tensor([xv], dtype=plast.float64)
        ).item()
        assert got == pytest.approx(float(mpmath.gammainc(av, 0, xv, regularized=True)), rel=1e-12)


def test_igamma_refuses_integers_and_a_gradient_like_torch():
    with pytest.raises(NotImplementedError):
        torch.igamma(torch.tensor([2]), torch.tensor([1]))
    with pytest.raises(TypeError, match="floating point"):
        plast.igamma(plast.tensor([2]), plast.tensor([1]))
    ta = torch.tensor([2.0], requires_grad=True)
    with pytest.raises(NotImplementedError):
        torch.igamma(ta, torch.tensor([1.5])).backward()
    pa = plast.tensor([2.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="first input"):
        plast.igamma(pa, plast.tensor([1.5])).backward()
    assert plast.igamma(plast.tensor([2.0]), plast.tensor([1.5], dtype=plast.float64)).dtype == plast.float64


def test_no_second_derivative_of_i0_says_so():
    # torch has one (I1'); plast raises rather than treat the first derivative as a constant
    for fn in (plast.i0,):
        x = plast.tensor([1.5, 2.5], requires_grad=True)
        (g,) = plast.autograd.grad(fn(x).sum(), x, create_graph=True)
        assert g.requires_grad
        with pytest.raises(NotImplementedError, match="second derivative"):
            g.sum().backward()


# ---- polygamma ----


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 6])
def test_polygamma_values_and_gradients_like_torch(n, dtype):
    rng = np.random.default_rng(n)
    a = np.concatenate([rng.uniform(0.05, 40.0, 12), rng.uniform(-6.0, -0.05, 6)]).astype(dtype)
    a[-1] = -2.5  # negative x: the series runs through the poles, as torch's
    x = plast.tensor(a, requires_grad=True)
    t = torch.tensor(a.astype(np.float64), requires_grad=True)
    y, ty = plast.polygamma(n, x), torch.polygamma(n, t)
    assert y.dtype == x.dtype
    # torch's float64 trigamma (n = 1, and n = 0's gradient) is only good to ~5e-10
    tol = TOL[dtype] if dtype == "float32" else dict(rtol=1e-9 if n <= 1 else 1e-12, atol=1e-13)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy().astype(dtype), **tol)
    y.sum().backward()
    ty.sum().backward()
    gtol = GTOL[dtype] if dtype == "float32" else dict(rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy().astype(dtype), **gtol)
    assert np.array_equal(x.polygamma(n).detach().numpy(), y.detach().numpy())  # the method: n after self


def test_polygamma_edges_and_arguments_like_torch():
    x = [0.0, -0.0, -1.0, -3.0, -INF, NAN, 1e-5, 1e5]
    for n in (2, 3, 4):
        got = plast.polygamma(n, plast.tensor(x, dtype=plast.float64)).numpy()
        want = torch.polygamma(n, torch.tensor(x, dtype=torch.float64)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
        # at +inf the limit (+-0); torch says nan there
        assert plast.polygamma(n, plast.tensor([INF])).tolist() == [0.0]
    assert plast.polygamma(2, plast.tensor([1, 2])).dtype == plast.float32
    with pytest.raises(RuntimeError):
        torch.polygamma(-1, torch.tensor([1.0]))
    with pytest.raises(ValueError, match="negative n"):
        plast.polygamma(-1, plast.tensor([1.0]))
    with pytest.raises(TypeError):
        plast.polygamma(1.5, plast.tensor([1.0]))
    y = plast.tensor([1.5, 2.0])
    assert y.polygamma_(2) is y
    np.testing.assert_allclose(y.numpy(), torch.polygamma(2, torch.tensor([1.5, 2.0])).numpy(), rtol=1e-6)
    # digamma's second derivative is polygamma(2, x) now
    x = plast.tensor([1.5, 2.5], requires_grad=True)
    (g,) = plast.autograd.grad(plast.digamma(x).sum(), x, create_graph=True)
    g.sum().backward()
    np.testing.assert_allclose(
        x.grad.numpy(), torch.polygamma(2, torch.tensor([1.5, 2.5])).numpy(), rtol=1e-6
    )


# ---- frexp ----


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_frexp_like_torch(dtype):
    a = np.array([8.0, -0.75, 0.0, -0.0, 1e-40, 3e38, INF, -INF, NAN, 1.0, 6.5], dtype)
    tm, te = torch.frexp(torch.tensor(a))
    pm, pe = plast.frexp(plast.tensor(a))
    assert pe.dtype == plast.int32 and te.dtype == torch.int32 and pm.dtype == getattr(plast, dtype)
    np.testing.assert_array_equal(pm.numpy(), tm.numpy())
    assert (np.signbit(pm.numpy()) == np.signbit(tm.numpy())).all()
    np.testing.assert_array_equal(pe.numpy(), te.numpy())
    # a named tuple, as torch's; the method; a strided view
    r = plast.tensor(a).frexp()
    assert r.mantissa.tolist()[:2] == [0.5, -0.75] and r.exponent.tolist()[:2] == [4, 0]
    b = np.arange(1.0, 13.0, dtype=dtype).reshape(3, 4)
    tm, te = torch.frexp(torch.tensor(b).t()[::2])
    pm, pe = plast.frexp(plast.tensor(b).t()[::2])
    np.testing.assert_array_equal(pm.numpy(), tm.numpy())
    np.testing.assert_array_equal(pe.numpy(), te.numpy())


def test_frexp_gradient_and_integers_like_torch():
    a = [8.0, -0.75, 3.0]
    t, p = torch.tensor(a, requires_grad=True), plast.tensor(a, requires_grad=True)
    torch.frexp(t).mantissa.sum().backward()
    plast.frexp(p).mantissa.sum().backward()
    assert p.grad.tolist() == t.grad.tolist() == [1 / 16, 1.0, 0.25]
    with pytest.raises(RuntimeError):
        torch.frexp(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="floating point"):
        plast.frexp(plast.tensor([1, 2]))
