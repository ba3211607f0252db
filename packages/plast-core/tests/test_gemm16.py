"""plast's 16-bit GEMM (csrc/gemm16.c via plast.kernels.cpu._gemm.gemm16/bmm16) against a float64 reference.

Every path is forced in turn where this CPU has it, and skipped with the missing CPU flag where not: AMX tiles
(lscpu flags amx_tile, amx_bf16), AVX512-BF16's vdpbf16ps (avx512_bf16), and the widening path at each vector
level. The reference multiplies the decoded 16-bit inputs in float64: every product of two 16-bit numbers is exact
in float32, so a float32 result must be within the float32 dot-product bound, and a 16-bit result within half a
unit in the last place of the 16-bit type on top of it. Rounding is checked bit for bit against torch's.
"""

import math

import numpy as np
import pytest
import torch

from plast.kernels.cpu import _gemm, _runtime

FLAG = {
    "amx": "amx_tile and amx_bf16",
    "avx512_bf16": "avx512_bf16",
    "avx512": "avx512f/bw/dq/vl",
    "avx2": "avx2",
}
PATHS = [(p, t) for p in ("amx", "avx512_bf16", "avx512", "avx2", "scalar") for t in (1, 2)]
EDGE = [1, 3, 15, 16, 17, 31, 32, 33, 63, 65, 100]


@pytest.fixture(params=PATHS, ids=[f"{p}-{t}t" for p, t in PATHS])
def path(request):
    simd, threads = request.param
    if simd not in _runtime.simd_available():
        pytest.skip(
            f"this CPU lacks the {simd} path (lscpu flag {FLAG[simd]}; or the OS refused AMX tile state)"
        )
    old = (_runtime.get_simd(), _runtime.get_num_threads())
    _runtime.set_simd(simd)
    _runtime.set_num_threads(threads)
    yield simd
    _runtime.set_simd(old[0])
    _runtime.set_num_threads(old[1])


TORCH16 = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def enc(x, dtype):
    """float array -> the 16-bit operand gemm16 takes (bf16 bits in uint16, or float16), rounded by torch."""
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(TORCH16[dtype])
    if dtype == "float16":
        return t.numpy()
    return t.view(torch.int16).numpy().view(np.uint16)


def dec(h, dtype):
    """16-bit operand -> float64 values."""
    h = np.ascontiguousarray(h)
    if dtype == "float16":
        return h.astype(np.float64)
    return torch.from_numpy(h.view(np.int16)).view(torch.bfloat16).double().numpy()


ULP16 = {
    "bfloat16": 2.0**-7,
    "float16": 2.0**-10,
}  # largest spacing of the type relative to |x| (1 ulp at 2^e)

ACTS = {
    "none": lambda x: x,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "gelu": lambda x: 0.5 * x * np.vectorize(math.erfc, otypes=[np.float64])(-x / math.sqrt(2.0)),
}


def check(
    out,
    a,
    b,
    dtype,
    out16,
    *,
    alpha=1.0,
    beta=0.0,
    c=None,
    bias=None,
    bias_row=None,
    act="none",
    residual=None,
):
    a64, b64 = dec(a, dtype), dec(b, dtype)
    val = (lambda v: dec(v, dtype)) if out16 else (lambda v: np.asarray(v, np.float64))
    pre = alpha * (a64 @ b64)
    mag = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if beta:
        pre = pre + beta * val(c)
        mag = mag + abs(beta) * np.abs(val(c))
    if bias is not None:
        pre = pre + val(bias)
        mag = mag + np.abs(val(bias))
    if bias_row is not None:
        pre = pre + val(bias_row)[..., :, None]
        mag = mag + np.abs(val(bias_row))[..., :, None]
    ref = ACTS[act](pre)
    if act != "none":
        mag = mag + np.abs(ref)
    if residual is not None:
        ref = ref + val(residual)
        mag = mag + np.abs(val(residual))
    k = a.shape[-1]
    tol = 4 * math.sqrt(k + 4) * 2.0**-24 * mag + 1e-30
    if act.startswith("gelu"):
        tol = tol + 3e-7 * mag  # the epilogue's vector exp/erfc
    got = val(out)
    if out16:
        tol = tol + ULP16[dtype] / 2 * np.abs(ref) * (1 + 1e-6) + 2.0**-25  # f16 subnormals
    err = np.abs(got - ref)
    bad = err > tol
    assert not bad.any(), (
        f"{bad.sum()} of {bad.size} wrong; worst error {err.max():.3g} (tolerance {tol.max():.3g})"
    )


def rand(rng, shape, dtype, scale=1.0):
    return enc(rng.uniform(-scale, scale, size=shape), dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("out16", [False, True])
def test_shapes_around_the_tiles(path, rng, dtype, out16):
    for m, n, k in [(1, 1, 1), (16, 16, 32), (17, 33, 31), (33, 17, 65), (100, 65, 3), (64, 100, 129)]:
        a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
        check(_gemm.gemm16(a, b, dtype=dtype, out16=out16), a, b, dtype, out16)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_every_edge_size(path, rng, dtype):
    for s in EDGE:
        a, b = rand(rng, (s, 40), dtype), rand(rng, (40, s), dtype)
        check(_gemm.gemm16(a, b, dtype=dtype), a, b, dtype, False)
        a, b = rand(rng, (20, s), dtype), rand(rng, (s, 24), dtype)
        check(_gemm.gemm16(a, b, dtype=dtype, out16=True), a, b, dtype, True)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("ta,tb", [(0, 1), (1, 0), (1, 1)])
def test_transposed_and_strided_operands(path, rng, dtype, ta, tb):
    m, n, k = 37, 45, 70
    a = (
        rand(rng, (k + 3, m + 5), dtype)[2 : k + 2, 1 : m + 1].T
        if ta
        else rand(rng, (m, k + 9), dtype)[:, 4 : k + 4]
    )
    b = (
        rand(rng, (n + 2, k + 6), dtype)[1 : n + 1, 3 : k + 3].T
        if tb
        else rand(rng, (k, n + 7), dtype)[:, :n]
    )
    for out16 in (False, True):
        check(_gemm.gemm16(a, b, dtype=dtype, out16=out16), a, b, dtype, out16)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_deep_k_in_several_passes(path, rng, ta, tb):
    """K past one pass of the blocked kernel (8 chunks of 32): the float32 sums wait between passes (in C itself
    for a plain float32 product), and the epilogue (beta, bias, activation, residual) runs once, after the last."""
    for m, k, n in [(45, 300, 70), (33, 777, 40), (64, 512, 96)]:
        a = rand(rng, (k, m), "bfloat16").T if ta else rand(rng, (m, k), "bfloat16")
        b = rand(rng, (n, k), "bfloat16").T if tb else rand(rng, (k, n), "bfloat16")
        check(_gemm.gemm16(a, b), a, b, "bfloat16", False)
        check(_gemm.gemm16(a, b, out16=True), a, b, "bfloat16", True)
        c = rng.uniform(-1, 1, (m, n)).astype(np.float32)
        bias = rng.uniform(-1, 1, n).astype(np.float32)
        res = rng.uniform(-1, 1, (m, n)).astype(np.float32)
        out = c.copy()
        _gemm.gemm16(a, b, out, beta=0.5, bias=bias, act="gelu_tanh", residual=res)
        check(out, a, b, "bfloat16", False, beta=0.5, c=c, bias=bias, act="gelu_tanh", residual=res)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("out16", [False, True])
@pytest.mark.parametrize("act", list(ACTS))
def test_epilogue(path, rng, dtype, out16, act):
    m, n, k = 35, 50, 48
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    cdt = None if out16 else np.float32

    def side(shape):
        v = rng.uniform(-1, 1, size=shape)
        return enc(v, dtype) if cdt is None else v.astype(np.float32)

    c, bias, bias_row, res = side((m, n)), side(n), side(m), side((m, n))
    out = c.copy()
    got = _gemm.gemm16(
        a,
        b,
        out,
        dtype=dtype,
        out16=out16,
        alpha=0.5,
        beta=-1.5,
        bias=bias,
        bias_row=bias_row,
        act=act,
        residual=res,
    )
    assert got is out
    check(
        got,
        a,
        b,
        dtype,
        out16,
        alpha=0.5,
        beta=-1.5,
        c=c,
        bias=bias,
        bias_row=bias_row,
        act=act,
        residual=res,
    )


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_batched(path, rng, dtype):
    a, b = rand(rng, (3, 20, 40), dtype), rand(rng, (40, 33), dtype)
    out = _gemm.bmm16(a, b, dtype=dtype, out16=True)
    assert out.shape == (3, 20, 33)
    for i in range(3):
        check(out[i], a[i], b, dtype, True)
    res = rng.uniform(-1, 1, (3, 20, 33)).astype(np.float32)
    out = _gemm.bmm16(a, b, dtype=dtype, residual=res)
    for i in range(3):
        check(out[i], a[i], b, dtype, False, residual=res[i])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_rounding_matches_torch_bit_for_bit(path, rng, dtype):
    """x + y for 16-bit x, y is exact in float32 (similar exponents), so the 16-bit result is that sum rounded
    once: compare with torch's rounding of the same sum, ties, overflow, tiny values and NaN included."""
    n = 4096
    x = rng.standard_normal(n) * np.exp2(rng.integers(-10, 10, n))
    y = x * rng.uniform(-2, 2, n)
    specials = {"bfloat16": [3.0e38, 3.0e38, -np.inf, 1e-39], "float16": [60000.0, 6000.0, np.inf, 3e-6]}[
        dtype
    ]
    x[:4] = specials
    y[:4] = [specials[0], specials[1], np.inf, specials[3]]  # overflow, overflow, inf - inf = nan, tiny
    a = np.stack([enc(x, dtype), enc(y, dtype)], axis=1)  # (n, 2)
    one = enc(np.ones((2, 1)), dtype)
    got = _gemm.gemm16(a, one, dtype=dtype, out16=True)[:, 0]
    ta = torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(TORCH16[dtype]).float()
    want = (ta[:, 0] + ta[:, 1]).to(TORCH16[dtype]).view(torch.int16).numpy()
    got_bits = np.ascontiguousarray(got).view(np.int16)
    # NaN: any NaN pattern (torch's scalar rounding gives 0x7fc0, its AVX-512 rounding 0xffff); plast gives 0x7fc0
    is_nan = dec(got, dtype) != dec(got, dtype)
    want_nan = torch.from_numpy(want).view(TORCH16[dtype]).isnan().numpy()
    assert np.array_equal(is_nan, want_nan) and is_nan[2] == (dtype == "bfloat16")  # -inf + inf
    if dtype == "bfloat16" and path in ("amx", "avx512_bf16"):
        # tdpbf16ps and vdpbf16ps read subnormal inputs as zero and flush subnormal results (as torch's AMX path)
        assert got_bits[3] == 0
        is_nan[3] = True
    keep = ~is_nan
    assert np.array_equal(got_bits[keep], want[keep]), np.flatnonzero((got_bits != want) & keep)[:10]


def test_against_torch_matmul(path, rng):
    for dtype in ("bfloat16", "float16"):
        a, b = rand(rng, (64, 96), dtype), rand(rng, (96, 80), dtype)
        ta = torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(TORCH16[dtype])
        tb = torch.from_numpy(np.ascontiguousarray(b).view(np.int16)).view(TORCH16[dtype])
        want = (ta @ tb).double().numpy()
        got = dec(_gemm.gemm16(a, b, dtype=dtype, out16=True), dtype)
        # both round a float32-accumulated sum once; the sums may differ in their last float32 bits
        np.testing.assert_allclose(got, want, rtol=ULP16[dtype], atol=1e-6)


def test_k_zero_and_alpha_zero(path, rng):
    a, b = rand(rng, (5, 0), "bfloat16"), rand(rng, (0, 7), "bfloat16")
    c = rng.uniform(-1, 1, (5, 7)).astype(np.float32)
    out = c.copy()
    _gemm.gemm16(a, b, out, beta=2.0, bias=np.ones(7, np.float32))
    np.testing.assert_allclose(out, 2 * c + 1, rtol=1e-6)
    a, b = rand(rng, (5, 3), "bfloat16"), enc(np.full((3, 7), np.inf), "bfloat16")
    out = _gemm.gemm16(a, b, alpha=0.0)  # alpha == 0 never reads the product (torch's addmm rule)
    assert np.array_equal(out, np.zeros((5, 7), np.float32))


def test_bad_input_raises():
    a = np.zeros((4, 3), np.uint16)
    with pytest.raises(TypeError, match="bfloat16 operands are uint16"):
        _gemm.gemm16(a.astype(np.float32), a.T.astype(np.float32))
    with pytest.raises(TypeError, match="float16 operands"):
        _gemm.gemm16(a, a.T, dtype="float16")
    with pytest.raises(ValueError, match="dtype must be"):
        _gemm.gemm16(a, a.T, dtype="float8")
    with pytest.raises(ValueError, match="inner dimensions"):
        _gemm.gemm16(a, a)
    with pytest.raises(TypeError, match="out is uint16 but the product is float32"):
        _gemm.gemm16(a, a.T, np.zeros((4, 4), np.uint16))
    with pytest.raises(TypeError, match="bias is float32"):
        _gemm.gemm16(a, a.T, out16=True, bias=np.zeros(4, np.float32))


def test_path_names():
    assert _gemm.gemm16_path("float16").startswith("widen")
    old = _runtime.get_simd()
    try:
        _runtime.set_simd("avx2" if "avx2" in _runtime.simd_available() else "scalar")
        assert _gemm.gemm16_path() == f"widen ({_runtime.get_simd()})"
        if "amx" in _runtime.simd_available():
            _runtime.set_simd("amx")
            assert _gemm.gemm16_path() == "amx"
    finally:
        _runtime.set_simd(old)
