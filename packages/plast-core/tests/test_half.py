"""bfloat16 and float16 tensors against torch's (CPU, the oracle).

16-bit dtypes are storage types. Rows whose kernels take them (casts, copies, views) run in 16 bits; every other
row computes in float32 and rounds its result once (graph/_graph.pyx: record widens), which is what torch's CPU
kernels do for these types. So most single ops agree with torch bit for bit; reductions and products may differ in
the float32 sum's last bits, hence a tolerance of one or two units in the 16-bit type's last place per family.
"""

import ml_dtypes
import numpy as np
import pytest
import torch

import plast
from plast.errors import DTypeError

TORCH = {"bfloat16": torch.bfloat16, "float16": torch.float16}
PLAST = {"bfloat16": plast.bfloat16, "float16": plast.float16}
# a unit in the last place, relative (bfloat16 keeps 8 significant bits, float16 11)
ULP = {"bfloat16": 2.0**-7, "float16": 2.0**-10}


def pair(arr, dtype, requires_grad=False):
    """The same 16-bit values as a plast and a torch tensor (rounded by torch, then copied bit for bit)."""
    t = torch.tensor(arr, dtype=torch.float32).to(TORCH[dtype])
    p = plast.tensor(t.float().numpy(), dtype=PLAST[dtype])
    assert np.array_equal(p.float().numpy(), t.float().numpy())
    if requires_grad:
        p.requires_grad_(True)
        t.requires_grad_(True)
    return p, t


def close(p, t, dtype, ulps=1.0, atol=0.0):
    assert p.dtype is PLAST[dtype] if t.dtype in TORCH.values() else True, (p.dtype, t.dtype)
    got = p.float().detach().numpy().astype(np.float64)
    want = t.float().detach().numpy().astype(np.float64)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=ulps * ULP[dtype], atol=atol)


def test_dtype_facts():
    assert plast.half is plast.float16
    assert plast.bfloat16.itemsize == plast.float16.itemsize == 2
    assert plast.bfloat16.is_floating_point and plast.float16.is_floating_point
    assert plast.bfloat16.is_signed
    assert plast.as_dtype("bfloat16") is plast.bfloat16 and plast.as_dtype("half") is plast.float16
    assert plast.as_dtype(np.float16) is plast.float16
    assert plast.as_dtype(ml_dtypes.bfloat16) is plast.bfloat16
    assert repr(plast.bfloat16) == "plast.bfloat16"
    with pytest.raises(DTypeError, match="unsupported dtype"):
        plast.as_dtype("float8")


DTYPES = ["bool", "int32", "int64", "bfloat16", "float16", "float32", "float64"]


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_promotion_matches_torch(a, b):
    x, y = plast.ones(2, dtype=a), plast.ones(2, dtype=b)
    want = torch.promote_types(getattr(torch, a), getattr(torch, b))
    assert (x + y).dtype.name == str(want).removeprefix("torch."), (a, b)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_scalars_are_weak(dtype):
    x = plast.ones(2, dtype=dtype)
    assert (x + 2.5).dtype is PLAST[dtype] and (x * 3).dtype is PLAST[dtype]
    assert (plast.ones(2, dtype="int64") + x).dtype is PLAST[dtype]
    assert (x + plast.tensor(1.0, dtype="float64")).dtype is PLAST[dtype]  # a 0-d tensor of the same category


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_casts_round_like_torch_bit_for_bit(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(20000) * np.exp2(rng.integers(-30, 30, 20000))).astype(np.float32)
    # ties (exactly half a unit of the 16-bit type), overflow, subnormals, inf, nan
    x[:6] = [1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 3.0e38, 1e-40, np.inf, -np.inf]
    x[6] = np.nan
    want = torch.from_numpy(x).to(TORCH[dtype]).float().numpy()
    got = plast.tensor(x).to(PLAST[dtype]).float().numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))
    # back to float32 and float64 is exact; to integers truncates toward zero as torch
    p16 = plast.tensor(x[7:]).to(PLAST[dtype])
    assert np.array_equal(p16.double().numpy(), torch.from_numpy(x[7:]).to(TORCH[dtype]).double().numpy())
    small = plast.tensor([-2.75, -0.5, 0.5, 2.75, 100.25]).to(PLAST[dtype])
    assert small.long().tolist() == [-2, 0, 0, 2, 100]


def test_numpy_round_trip_and_creation():
    b = plast.tensor([1.5, 2.7, -3.0], dtype=plast.bfloat16)
    assert b.numpy().dtype == np.dtype(ml_dtypes.bfloat16)
    assert b.tolist() == [1.5, 2.703125, -3.0]
    assert plast.tensor(b.numpy()).dtype is plast.bfloat16
    h = plast.tensor(np.array([1.5, 2.7], np.float16))
    assert h.dtype is plast.float16 and h.numpy().dtype == np.float16
    assert plast.zeros(2, 3, dtype=plast.bfloat16).tolist() == [[0.0] * 3] * 2
    assert plast.full((2,), 1.2, dtype=plast.half).tolist() == [np.float16(1.2).item()] * 2
    assert plast.ones(3).bfloat16().dtype is plast.bfloat16 and plast.ones(3).half().dtype is plast.float16
    assert plast.ones(3).to("bfloat16").dtype is plast.bfloat16
    assert repr(plast.zeros(2, dtype=plast.bfloat16)) == "tensor([0., 0.], dtype=plast.bfloat16)"
    assert plast.tensor(2.5, dtype=plast.float16).item() == 2.5


def _F(x):
    return plast if isinstance(x, plast.Tensor) else torch.nn.functional


# name, function (one op), input range, units of difference allowed against torch's own 16-bit kernels
UNARY = [
    ("exp", lambda x: x.exp(), (-2, 2), 1),
    ("log", lambda x: x.log(), (0.1, 4), 1),
    ("sqrt", lambda x: x.sqrt(), (0.1, 4), 1),
    ("tanh", lambda x: x.tanh(), (-2, 2), 1),
    ("sigmoid", lambda x: x.sigmoid(), (-4, 4), 1),
    ("relu", lambda x: x.relu(), (-2, 2), 0),
    ("neg", lambda x: -x, (-2, 2), 0),
    ("sin", lambda x: x.sin(), (-2, 2), 1),
    ("square", lambda x: x**2, (-2, 2), 1),
    ("gelu", lambda x: _F(x).gelu(x), (-3, 3), 2),  # torch's 16-bit gelu rounds between steps
    ("gelu_tanh", lambda x: _F(x).gelu(x, approximate="tanh"), (-3, 3), 2),
    ("silu", lambda x: _F(x).silu(x), (-3, 3), 2),
]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name,fn,domain,ulps", UNARY, ids=[u[0] for u in UNARY])
def test_unary_forward_and_backward(dtype, name, fn, domain, ulps):
    rng = np.random.default_rng(1)
    p, t = pair(rng.uniform(*domain, (5, 7)), dtype, requires_grad=True)
    gp, gt = pair(rng.uniform(-1, 1, (5, 7)), dtype)
    yp, yt = fn(p), fn(t)
    # the rule: torch's float32 result on the same 16-bit inputs, rounded once
    close(yp, fn(t.detach().float()).to(TORCH[dtype]), dtype, 0)
    # torch's own 16-bit kernels (some round between steps)
    close(yp, yt, dtype, ulps)
    (yp * gp).sum().backward()
    (yt * gt).sum().backward()
    assert p.grad.dtype is PLAST[dtype]
    # backward rules are composed differently (e.g. tanh' from the output): a few units
    close(p.grad, t.grad, dtype, 4 * max(ulps, 1), atol=ULP[dtype])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_binary_broadcasting_and_non_contiguous(dtype):
    rng = np.random.default_rng(2)
    a, ta = pair(rng.uniform(-2, 2, (4, 6)), dtype, requires_grad=True)
    b, tb = pair(rng.uniform(0.5, 2, (6,)), dtype, requires_grad=True)
    for f in (
        lambda x, y: x + y,
        lambda x, y: x - y,
        lambda x, y: x * y,
        lambda x, y: x / y,
        lambda x, y: x.T * y[:4],
    ):
        close(f(a, b), f(ta, tb), dtype)
    ((a * b + a / b).T.sum()).backward()
    ((ta * tb + ta / tb).T.sum()).backward()
    close(a.grad, ta.grad, dtype, 2)
    close(b.grad, tb.grad, dtype, 4)  # a sum over the broadcast axis
    m = plast.maximum(a, b.detach())
    close(m, torch.maximum(ta, tb.detach()), dtype, 0)
    assert (a > b).dtype is plast.bool and (a > b).tolist() == (ta > tb).tolist()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reductions_and_norms(dtype):
    rng = np.random.default_rng(3)
    p, t = pair(rng.uniform(-2, 2, (6, 32)), dtype, requires_grad=True)
    close(p.sum(), t.sum(), dtype, 2)
    close(p.mean(1), t.mean(1), dtype, 2)
    close(p.amax(0), t.amax(0), dtype, 0)
    assert p.argmax(1).tolist() == t.argmax(1).tolist()
    close(plast.softmax(p, -1), torch.softmax(t, -1), dtype, 1, atol=ULP[dtype] * 2**-8)
    close(plast.log_softmax(p, -1), torch.log_softmax(t, -1), dtype, 2)
    w, tw = pair(rng.uniform(0.5, 1.5, 32), dtype, requires_grad=True)
    yp = plast.layer_norm(p, (32,), w, None, 1e-5)
    yt = torch.nn.functional.layer_norm(t, (32,), tw, None, 1e-5)
    close(yp, yt, dtype, 2, atol=ULP[dtype])
    yp.sum().backward()
    yt.sum().backward()
    close(p.grad, t.grad, dtype, 8, atol=4 * ULP[dtype])
    close(w.grad, tw.grad, dtype, 8, atol=4 * ULP[dtype])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_cross_entropy(dtype):
    rng = np.random.default_rng(4)
    p, t = pair(rng.uniform(-3, 3, (8, 10)), dtype, requires_grad=True)
    y = rng.integers(0, 10, 8)
    lp = plast.cross_entropy(p, plast.tensor(y))
    lt = torch.nn.functional.cross_entropy(t, torch.tensor(y))
    close(lp, lt, dtype, 2)
    lp.backward()
    lt.backward()
    close(p.grad, t.grad, dtype, 4, atol=ULP[dtype] / 8)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_matmul_and_linear(dtype):
    rng = np.random.default_rng(5)
    a, ta = pair(rng.uniform(-1, 1, (2, 5, 24)), dtype, requires_grad=True)
    w, tw = pair(rng.uniform(-1, 1, (16, 24)), dtype, requires_grad=True)
    b, tb = pair(rng.uniform(-1, 1, (16,)), dtype, requires_grad=True)
    yp = plast.linear(a, w, b)
    yt = torch.nn.functional.linear(ta, tw, tb)
    close(yp, yt, dtype, 2, atol=ULP[dtype])
    (yp.relu() @ w).sum().backward()
    (yt.relu() @ tw).sum().backward()
    for g, tg in ((a.grad, ta.grad), (w.grad, tw.grad), (b.grad, tb.grad)):
        assert g.dtype is PLAST[dtype]
        # w's gradient adds two rounded products whose terms cancel: a unit at the terms' scale
        close(g, tg, dtype, 4, atol=2 * ULP[dtype] * float(tg.abs().max()))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_views_indexing_and_joins_are_exact(dtype):
    rng = np.random.default_rng(6)
    p, t = pair(rng.uniform(-2, 2, (4, 6)), dtype)
    for f in (
        lambda x: x.T,
        lambda x: x.reshape(3, 8),
        lambda x: x[1:3, ::2],
        lambda x: x[:, 2],
        lambda x: x.unsqueeze(0).expand(2, 4, 6),
        lambda x: x.T.contiguous(),
        lambda x: x.flip(0),
    ):
        yp, yt = f(p), f(t)
        assert yp.dtype is PLAST[dtype]
        assert np.array_equal(yp.float().numpy(), yt.float().numpy())
    idx = [2, 0, 3]
    assert np.array_equal(p[idx].float().numpy(), t[idx].float().numpy())
    cat = plast.cat([p, p * 2], 0)
    assert cat.dtype is PLAST[dtype]
    assert np.array_equal(cat.float().numpy(), torch.cat([t, t * 2], 0).float().numpy())
    q = p.clone()
    q[1] = 7.0
    q[:, 0] += 1.0
    tq = t.clone()
    tq[1] = 7.0
    tq[:, 0] += 1.0
    assert q.dtype is PLAST[dtype]
    assert np.array_equal(q.float().numpy(), tq.float().numpy())
    assert np.array_equal(p.float().numpy(), t.float().numpy())  # the clone's writes left p alone


def test_mixed_16bit_types_give_float32():
    a, b = plast.ones(2, dtype="bfloat16"), plast.ones(2, dtype="float16")
    assert (a + b).dtype is plast.float32
    assert (a @ b).dtype is plast.float32


def test_jit_step_in_bfloat16():
    w = plast.randn(8, 4).bfloat16().requires_grad_()

    @plast.jit
    def step(x):
        w.grad = None
        loss = (x @ w).relu().sum()
        loss.backward()
        return loss

    x = plast.randn(3, 8).bfloat16()
    first = step(x).item()
    g1 = w.grad.float().numpy().copy()
    assert step(x).item() == first  # the replay
    assert np.array_equal(w.grad.float().numpy(), g1) and w.grad.dtype is plast.bfloat16
    x2 = plast.randn(3, 8).bfloat16()
    want = (x2.float() @ w.detach().float()).relu().sum().bfloat16().item()
    assert step(x2).item() == pytest.approx(want, rel=2**-7)


def test_in_place_updates_of_16bit_parameters_say_so():
    p = plast.ones(3, dtype=plast.bfloat16)
    with pytest.raises(NotImplementedError, match="keep parameters and optimizer state float32"):
        plast.sgd_update_([p], [plast.ones(3, dtype=plast.bfloat16)], None, plast.tensor([0.1, 0, 0, 0]))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_save_and_load_both_ways_with_torch(tmp_path, dtype):
    from safetensors.torch import load_file, save_file

    p = plast.tensor([1.5, -2.25, 3.0e-3], dtype=dtype)
    path = tmp_path / "p.safetensors"
    plast.save({"w": p}, path)
    back = plast.load(path)["w"]
    assert back.dtype is PLAST[dtype] and back.tolist() == p.tolist()
    t = load_file(str(path))["w"]
    assert t.dtype is TORCH[dtype] and t.tolist() == p.tolist()
    tpath = tmp_path / "t.safetensors"
    save_file({"w": torch.tensor([0.1, 7.0], dtype=TORCH[dtype])}, str(tpath))
    got = plast.load(tpath)["w"]
    assert got.dtype is PLAST[dtype]
    assert got.tolist() == torch.tensor([0.1, 7.0], dtype=TORCH[dtype]).tolist()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_cast_kernel_on_every_simd_path(simd_paths, dtype):
    """csrc/convert16.c: the AVX-512 and scalar conversions, a vector tail, and the threaded split (2^18+)."""
    from plast.kernels.cpu import _runtime

    gen = np.random.default_rng(7)
    for simd in simd_paths:
        _runtime.set_simd(simd)
        for n in (37, 300_001):
            x = (gen.standard_normal(n) * np.exp2(gen.integers(-20, 20, n))).astype(np.float32)
            x[:5] = [np.inf, -np.inf, 1e-40, 70000.0, -0.0]
            want = torch.from_numpy(x).to(TORCH[dtype])
            got = plast.tensor(x).to(PLAST[dtype])
            assert np.array_equal(
                got.numpy().view(np.uint16), want.view(torch.int16).numpy().view(np.uint16)
            ), simd
            back = got.float().numpy()
            assert np.array_equal(back.view(np.uint32), want.float().numpy().view(np.uint32)), simd


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_random_draws_in_16bit_are_float32_draws_rounded(dtype):
    plast.manual_seed(3)
    want = plast.rand(1000).to(PLAST[dtype]).float().numpy()
    plast.manual_seed(3)
    got = plast.rand(1000, dtype=dtype)
    assert got.dtype is PLAST[dtype] and np.array_equal(got.float().numpy(), want)
    plast.manual_seed(3)
    n = plast.randn(5, 7, dtype=dtype, requires_grad=True)
    assert n.requires_grad and n.grad_fn is None and n.dtype is PLAST[dtype]

    x = plast.ones(256, dtype=dtype)

    @plast.jit
    def drop(x):
        return plast.dropout(x, 0.5, training=True)

    masks = [drop(x).float().numpy() for _ in range(3)]  # trace, then replays: a new mask each time
    assert not np.array_equal(masks[1], masks[2])
    assert set(np.unique(masks[2])) <= {0.0, 2.0}


# A sweep over the op families (in-place, indexing, reductions, joins, attention, convolution, random fills), each
# in 16 bits against torch's 16-bit result: the type, and the value to a few units of bfloat16
_A = np.random.default_rng(0).uniform(-2, 2, (4, 6)).astype(np.float32)
_IDX = np.array([[0, 2, 1, 3, 0, 1]] * 4)


def _fn(lib):
    """Where the functional ops live: plast itself (plast-core's tests run without plast-nn), torch.nn.functional."""
    return lib if lib is plast else lib.nn.functional


FAMILY = {
    "zero_": lambda L, x: x.clone().zero_(),
    "fill_": lambda L, x: x.clone().fill_(1.5),
    "copy_": lambda L, x: x.clone().copy_(L.ones(4, 6)),
    "add_": lambda L, x: x.clone().add_(x),
    "mul_": lambda L, x: x.clone().mul_(2.5),
    "clamp_": lambda L, x: x.clone().clamp_(-1, 1),
    "masked_fill": lambda L, x: x.masked_fill(x > 0, 0.25),
    "gather": lambda L, x: L.gather(x, 1, L.tensor(_IDX)),
    "index_select": lambda L, x: L.index_select(x, 0, L.tensor([3, 1])),
    "cumsum": lambda L, x: L.cumsum(x, 1),
    "sort": lambda L, x: L.sort(x, 1)[0],
    "topk": lambda L, x: L.topk(x, 2, 1)[0],
    "where": lambda L, x: L.where(x > 0, x, L.zeros_like(x)),
    "pad": lambda L, x: _fn(L).pad(x, (1, 1)),
    "embedding": lambda L, x: _fn(L).embedding(L.tensor([0, 3, 3]), x),
    "softmax": lambda L, x: L.softmax(x, 1),
    "max": lambda L, x: x.max(),
    "argmax": lambda L, x: x.argmax(1),
    "var": lambda L, x: x.var(1),
    "norm": lambda L, x: x.norm(),
    "abs_sum": lambda L, x: x.abs().sum(0),
    "stack": lambda L, x: L.stack([x, x]),
    "chunk": lambda L, x: L.cat(L.chunk(x, 2, 1), 0),
    "repeat": lambda L, x: x.repeat(2, 1),
    "tril": lambda L, x: L.tril(x),
    "flip": lambda L, x: L.flip(x, [1]),
    "roll": lambda L, x: L.roll(x, 1, 1),
    "einsum": lambda L, x: L.einsum("ij,kj->ik", x, x),
    "sdpa": lambda L, x: _fn(L).scaled_dot_product_attention(
        x[None, None], x[None, None], x[None, None], is_causal=True
    )[0, 0],
    "layer_norm": lambda L, x: _fn(L).layer_norm(x, (6,)),
    "conv2d": lambda L, x: _fn(L).conv2d(x[None, None], x[None, None, :3, :3]),
    "setitem": lambda L, x: _set(x.clone()),
    "scatter_add": lambda L, x: L.zeros(4, 6, dtype=x.dtype).scatter_add(1, L.tensor(_IDX), x),
    "index_add": lambda L, x: L.zeros(4, 6, dtype=x.dtype).index_add(0, L.tensor([0, 0, 1, 2]), x),
    "lerp": lambda L, x: L.lerp(x, L.ones_like(x), 0.3),
    "uniform_": lambda L, x: (x.clone().uniform_(0, 1) >= 0).float(),
    "normal_": lambda L, x: (x.clone().normal_().abs() >= 0).float(),
    "mean_keepdim": lambda L, x: x.mean(1, keepdim=True),
    "prod": lambda L, x: x.prod(1),
    "logsumexp": lambda L, x: L.logsumexp(x, 1),
}


def _set(x):
    x[1:3, 2] = 9.0
    x[0] = x[3]
    return x


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", list(FAMILY))
def test_op_families_in_16bit_match_torch(dtype, name):
    f = FAMILY[name]
    t = torch.tensor(_A).to(TORCH[dtype])
    p = plast.tensor(t.float().numpy()).to(dtype)
    want, got = f(torch, t), f(plast, p)
    assert got.dtype.name == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2**-6, atol=2**-6)
