"""The float elementwise rows that joined the elementwise-chain bytecode (sin, cos, floor, ceil, trunc, round,
exp2, log2, log10, expm1; pow, floor_divide, remainder, fmod): their C kernels against torch on every SIMD path
this CPU has, float32 and float64, broadcast and transposed operands, special values bit for bit, gradients,
and integer dtypes still on their own path. (Fused against unfused, row by row: tests/test_op_table.py.)
"""

import math

import numpy as np
import pytest
import torch

import plast
from plast.graph.realize import watch_fusions
from plast.kernels.cpu import _runtime
from plast.ops.registry import OPS

UNARY = ["sin", "cos", "floor", "ceil", "trunc", "round", "exp2", "log2", "log10", "expm1"]
BINARY = ["pow", "floor_divide", "remainder", "fmod"]
TOL = {np.float32: {"rtol": 1e-6, "atol": 1e-7}, np.float64: {"rtol": 1e-13, "atol": 1e-15}}
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-40, -1e-40]


@pytest.fixture
def each_path(simd_paths):
    """A function running its argument once per SIMD path (scalar, avx2, avx512 where the CPU has them)."""

    def run(fn):
        for path in simd_paths:
            _runtime.set_simd(path)
            fn(path)

    return run


def _torch(name, *arrays):
    return getattr(torch, name)(*(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)).numpy()


def _plast(name, *arrays):
    return getattr(plast, name)(*(plast.tensor(np.ascontiguousarray(a)) for a in arrays)).numpy()


def _unary_values(rng, dtype, name):
    x = np.concatenate(
        [rng.standard_normal(3000) * 3, rng.uniform(-200, 200, 1000), rng.uniform(-9000, 9000, 97)]
    )
    if name in ("log2", "log10"):
        x = np.abs(x) + np.concatenate([np.zeros(4000), np.exp(rng.uniform(-80, 80, 97))])
    if name in ("exp2", "expm1"):
        x = x / 2
    return x.astype(dtype)


def _same_bits(got, want, what):
    """Equal values, NaN where NaN, and the same sign (of zeros and infinities; a NaN's sign means nothing)."""
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_array_equal(got, want, err_msg=what)
    num = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]), err_msg=f"{what}: sign")


def test_every_added_row_is_fusible():
    for name in UNARY + BINARY:
        assert OPS[name].chain == name, name
    assert OPS["round_decimals"].chain is None  # round to decimal places stays one kernel


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_torch(each_path, rng, name, dtype):
    x = _unary_values(rng, dtype, name)
    want = _torch(name, x)
    m = x[:4000].reshape(80, 50)

    def check(path):
        np.testing.assert_allclose(_plast(name, x), want, **TOL[dtype], err_msg=f"{name} on {path}")
        # a transposed (non-contiguous) view goes through the strided driver
        got = getattr(plast, name)(plast.tensor(m).T).numpy()
        np.testing.assert_allclose(
            got, _torch(name, m.T), **TOL[dtype], err_msg=f"{name} transposed on {path}"
        )

    each_path(check)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values_match_torch_exactly(each_path, name, dtype):
    # zeros, infinities and NaN bit for bit; the roundings on every value (ties to even, -0 from small negatives);
    # other finite values within the tolerance (libm and torch may differ by an ulp there)
    x = np.array(SPECIALS + [8.0, 100.0, 1000.0, 1e-8, -1e-8, 3.0, -3.5, 1e30, -1e30], dtype=dtype)
    exact = np.isin(np.arange(x.size), np.arange(5)) | (name in ("floor", "ceil", "trunc", "round"))
    want = _torch(name, x)

    def check(path):
        got = _plast(name, x)
        _same_bits(got[exact], want[exact], f"{name}({x[exact].tolist()}) on {path}")
        np.testing.assert_allclose(got[~exact], want[~exact], **TOL[dtype], err_msg=f"{name} on {path}")

    each_path(check)


def test_powers_are_exact(each_path):
    for dtype in (np.float32, np.float64):
        k = np.arange(-20, 21).astype(dtype)

        def check(path, k=k, dtype=dtype):
            np.testing.assert_array_equal(_plast("exp2", k), np.exp2(k.astype(np.float64)).astype(dtype))
            np.testing.assert_array_equal(_plast("log2", np.exp2(k)), k, err_msg=path)
            tens = (10.0 ** np.arange(0, 8)).astype(dtype)
            np.testing.assert_array_equal(_plast("log10", tens), np.arange(0, 8).astype(dtype), err_msg=path)

        each_path(check)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", BINARY)
def test_binary_matches_torch_with_broadcasting(each_path, rng, name, dtype):
    a = (rng.standard_normal((40, 33)) * 10).astype(dtype)
    b = (rng.standard_normal((33,)) * 3).astype(dtype)  # broadcast along the rows
    if name == "pow":
        a = np.abs(a)
    want = _torch(name, a, b)
    at = rng.standard_normal((33, 40)).astype(dtype) * 10

    def check(path):
        np.testing.assert_allclose(_plast(name, a, b), want, **TOL[dtype], err_msg=f"{name} on {path}")
        # a transposed left operand and a scalar right one
        got = getattr(plast, name)(plast.tensor(np.abs(at) if name == "pow" else at).T, 2.5).numpy()
        ref = getattr(torch, name)(torch.from_numpy(np.abs(at) if name == "pow" else at).T, 2.5).numpy()
        np.testing.assert_allclose(got, ref, **TOL[dtype], err_msg=f"{name} transposed on {path}")

    each_path(check)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", BINARY)
def test_binary_special_values_match_torch_exactly(each_path, name, dtype):
    # every pair: division by +-0, inf and NaN operands, signed zeros, negative bases with whole and fractional
    # exponents (pow(-8, 1/3) is NaN), 0 ** 0 == NaN ** 0 == 1 ** NaN == 1
    vals = SPECIALS + [-8.0, 3.0, -3.0, 1.0 / 3.0, 7.0, -7.0, 2.0, -2.0]
    a, b = (np.array(v, dtype=dtype) for v in zip(*[(p, q) for p in vals for q in vals]))
    want = _torch(name, a, b)
    exact = np.ones(a.size, bool)
    close = np.zeros(a.size, bool)
    if (
        name == "pow"
    ):  # bit for bit where an operand is 0, inf or NaN, or the base is +-1; libm's ulp elsewhere
        exact = ~np.isfinite(a) | ~np.isfinite(b) | (a == 0) | (b == 0) | (np.abs(a) == 1)
        close = ~exact
    elif dtype == np.float32 and name in ("remainder", "fmod"):
        # torch's float32 vector fmod gives NaN for a subnormal divisor; plast keeps C's exact fmod there
        sub = (b != 0) & (np.abs(b) < np.finfo(dtype).tiny)
        exact = ~sub
        with np.errstate(invalid="ignore"):  # inf and NaN dividends
            _same_bits(_plast("fmod", a[sub], b[sub]), np.fmod(a[sub], b[sub]), "fmod by a subnormal")

    def check(path):
        got = _plast(name, a, b)
        _same_bits(got[exact], want[exact], f"{name} on {path}")
        np.testing.assert_allclose(got[close], want[close], **TOL[dtype], err_msg=f"{name} on {path}")

    each_path(check)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, -2, 0, 1, 1.3, -2.5])
def test_pow_by_a_number_matches_torch_exactly(each_path, rng, exponent, dtype):
    # a Python number as exponent: torch computes x ** 2 as x * x, x ** 0.5 as sqrt(x) (so -0 ** 0.5 is -0 and
    # -inf ** 0.5 NaN, not pow's +0 and +inf), -0.5 as 1 / sqrt(x), and so on; plast takes the same paths
    x = np.concatenate([SPECIALS + [-8.0, 3.0, -3.0, 7.0], rng.standard_normal(200) * 4]).astype(dtype)
    want = (torch.from_numpy(x) ** exponent).numpy()
    fused_want = ((torch.from_numpy(x) * 2) ** exponent).numpy()
    # bit for bit: products always, square roots at 0, +-inf, NaN and +-1 (torch's vector sqrt is not IEEE's
    # correctly rounded one on every CPU: on an AMD Zen 4 it is an ulp off for about 1 value in 6)
    exact = ~np.isfinite(x) | (x == 0) | (np.abs(x) == 1) if abs(exponent) == 0.5 else np.ones(x.size, bool)

    def same(got, want, what):
        _same_bits(got[exact], want[exact], what)
        np.testing.assert_allclose(got[~exact], want[~exact], **TOL[dtype], err_msg=what)

    def check(path):
        same((plast.tensor(x) ** exponent).numpy(), want, f"x ** {exponent} on {path}")
        with watch_fusions() as fired:  # the same in a chain
            got = ((plast.tensor(x) * 2) ** exponent).numpy()
        assert list(fired) == ["elementwise_chain"]
        same(got, fused_want, f"(x * 2) ** {exponent} fused on {path}")

    if abs(exponent) not in (0, 1, 2, 3, 0.5):  # libm's powf vs torch's vector pow: an ulp apart at most
        np.testing.assert_allclose((plast.tensor(x) ** exponent).numpy(), want, **TOL[dtype])
        return
    each_path(check)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("name", BINARY)
def test_integers_keep_their_path(rng, name, dtype):
    a = rng.integers(-50, 50, (6, 7)).astype(dtype)
    b = rng.integers(1, 6, (7,)).astype(dtype) * np.where(np.arange(7) % 2, 1, -1).astype(dtype)
    if name == "pow":
        a, b = a % 7, np.abs(b)
    got = _plast(name, a, b)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, _torch(name, a, b))
    if name != "pow":
        with pytest.raises(ZeroDivisionError):
            getattr(plast, name)(plast.tensor(a), 0).numpy()


def _grads(name, arrays, fn_plast, fn_torch):
    pt = [plast.tensor(a, requires_grad=True) for a in arrays]
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    fn_plast(*pt).sum().backward()
    fn_torch(*tt).sum().backward()
    for p, t in zip(pt, tt):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name", [n for n in UNARY + BINARY if n != "floor_divide"])
@pytest.mark.parametrize("fusion", ["0", "1"])
def test_gradients_match_torch(rng, name, fusion, monkeypatch):
    # the op follows a multiply, so with fusion on the two may form one chain (which must not swallow what the
    # backward reads)
    monkeypatch.setenv("PLAST_FUSION", fusion)
    x = rng.uniform(0.5, 2.0, (4, 5)).astype(np.float32)
    c = rng.uniform(0.5, 2.0, (5,)).astype(np.float32)
    if name in BINARY:
        y = rng.uniform(0.5, 2.0, (4, 5)).astype(np.float32)
        _grads(
            name,
            [x, c, y],
            lambda a, b, e: getattr(plast, name)(a * b, e),
            lambda a, b, e: getattr(torch, name)(a * b, e),
        )
    else:
        _grads(
            name, [x, c], lambda a, b: getattr(plast, name)(a * b), lambda a, b: getattr(torch, name)(a * b)
        )


def test_a_chain_of_added_ops_fuses_and_matches_torch(rng, monkeypatch):
    monkeypatch.setenv("PLAST_FUSION", "1")
    x = rng.uniform(0.5, 4.0, (64, 33)).astype(np.float32)
    c = rng.uniform(0.5, 2.0, (33,)).astype(np.float32)

    def f(lib, x, c):
        y = lib.sin(x * c) + lib.log2(x) - lib.floor(x * 3.0) + lib.expm1(x / 8)
        return lib.remainder(lib.pow(x, c), 1.5) + lib.floor_divide(y, c) + lib.fmod(y, 0.75)

    with watch_fusions() as fired:
        got = f(plast, plast.tensor(x), plast.tensor(c)).numpy()
    assert "elementwise_chain" in fired
    np.testing.assert_allclose(
        got, f(torch, torch.from_numpy(x), torch.from_numpy(c)).numpy(), rtol=1e-5, atol=1e-5
    )


def test_round_with_decimals_stays_its_own_row(rng):
    x = (rng.standard_normal(100) * 100).astype(np.float32)
    for d in (-1, 0, 2):
        got = plast.round(plast.tensor(x), decimals=d).numpy()
        np.testing.assert_array_equal(got, torch.round(torch.from_numpy(x), decimals=d).numpy())
