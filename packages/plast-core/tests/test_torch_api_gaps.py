"""torch's tensor and top-level names that PyTorch programs use (issue 18), each checked against torch."""

import numpy as np
import pytest

import plast

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("spec", [".4f", "", "e", "+.2f", ">10.3f"])
def test_format_0d_like_torch(spec):
    for value, tdt, pdt in [(3.14159265, torch.float32, plast.float32), (-2.5, torch.float64, plast.float64)]:
        assert format(plast.tensor(value, dtype=pdt), spec) == format(torch.tensor(value, dtype=tdt), spec)
    assert format(plast.tensor(7), "d") == format(torch.tensor(7), "d")
    assert f"{plast.tensor(True)}" == f"{torch.tensor(True)}"


def test_format_nd_only_with_empty_spec_like_torch():
    with pytest.raises(TypeError):
        format(torch.ones(2), ".2f")
    with pytest.raises(TypeError):
        format(plast.ones(2), ".2f")
    assert format(plast.ones(2), "") == str(plast.ones(2))


# torch's overloads of the factories: the same call on both libraries (`L` is torch or plast) gives the same
# shape and dtype, and the same values where they are not random
FACTORY_CALLS = [
    "L.zeros(2, 3)",
    "L.zeros((2, 3))",
    "L.zeros([2, 3])",
    "L.zeros(size=(2, 3))",
    "L.zeros(())",
    "L.ones(2, 3, dtype=L.int64)",
    "L.ones([4])",
    "L.ones(size=[2, 1])",
    "L.full((2, 3), 1.5)",
    "L.full([2], 7)",
    "L.full((2,), True)",
    "L.empty(2, 3).zero_()",
    "L.empty([2, 3]).zero_()",
    "L.rand(2, 3)",
    "L.rand((2, 3))",
    "L.rand([2, 3], dtype=L.float64)",
    "L.rand(size=(4,))",
    "L.randn(2, 3)",
    "L.randn([5])",
    "L.randn(size=(2, 2))",
    "L.randint(10, (3,))",
    "L.randint(10, [2, 2])",
    "L.randint(2, 10, (3,))",
    "L.randint(5, size=(2,))",
    "L.randint(low=1, high=5, size=(2, 3))",
    "L.randint(3, (4,), dtype=L.int32)",
    "L.randint(5, ())",
    "L.randperm(7)",
    "L.randperm(0)",
    "L.randperm(5, dtype=L.float32)",
]


@pytest.mark.parametrize("call", FACTORY_CALLS)
def test_factory_overloads_like_torch(call):
    ref = eval(call, {"L": torch})
    got = eval(call, {"L": plast})
    assert tuple(got.shape) == tuple(ref.shape)
    assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    if "rand" not in call:
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
    if "randint" in call:
        lo, hi = (1, 5) if "low=1" in call else (2, 10) if "(2, 10" in call else (0, 10)
        assert ((got.numpy() >= lo) & (got.numpy() < hi)).all()


@pytest.mark.parametrize(
    "call",
    [
        "L.zeros(2, 3, out=o)",
        "L.ones(2, 3, out=o)",
        "L.full((2, 3), 2.5, out=o)",
        "L.rand(2, 3, out=o)",
        "L.randn((2, 3), out=o)",
        "L.empty(2, 3, out=o)",
    ],
)
def test_factory_out_like_torch(call):
    values = []
    for L in (torch, plast):
        o = L.ones(2, 3) * 9
        r = eval(call, {"L": L, "o": o})
        assert r is o and tuple(o.shape) == (2, 3)
        values.append(o.tolist())
    if "rand" not in call and "empty" not in call:
        assert values[0] == values[1]
    for L, dt in ((torch, torch.int64), (plast, plast.int64)):
        o = L.zeros(3, dtype=dt)
        assert L.randint(4, (3,), out=o) is o and o.dtype == dt
        assert L.randperm(3, out=o) is o and sorted(o.tolist()) == [0, 1, 2]
    with pytest.raises(RuntimeError, match="out="):
        plast.zeros(2, 2, out=plast.zeros(3))  # torch would resize out; plast says so instead


def test_randperm_is_a_seeded_permutation():
    plast.manual_seed(5)
    a = plast.randperm(100).tolist()
    plast.manual_seed(5)
    assert plast.randperm(100).tolist() == a and sorted(a) == list(range(100)) and a != list(range(100))
    g = plast.Generator().manual_seed(1)
    assert sorted(plast.randperm(10, generator=g).tolist()) == list(range(10))
    with pytest.raises(RuntimeError):
        plast.randperm(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        torch.randperm(3, requires_grad=True)


def test_default_dtype():
    assert str(plast.get_default_dtype()).split(".")[-1] == str(torch.get_default_dtype()).split(".")[-1]
    plast.set_default_dtype(plast.float32)
    with pytest.raises(NotImplementedError, match="float16"):
        plast.set_default_dtype(plast.float16)
    with pytest.raises(TypeError):
        torch.set_default_dtype(torch.int64)
    with pytest.raises(TypeError):
        plast.set_default_dtype(plast.int64)
    assert plast.get_default_dtype() is plast.float32


# ---- torch's top-level elementwise functions ----

# torch's top-level elementwise functions on real tensors (complex-only, quantization and in-place `_` variants
# left out)
TORCH_ELEMENTWISE = """
abs absolute acos arccos acosh arccosh add addcdiv addcmul asin arcsin asinh arcsinh atan arctan atanh arctanh
atan2 arctan2 bitwise_not bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift ceil clamp
clip copysign cos cosh deg2rad div divide digamma erf erfc erfinv exp exp2 expm1 fix float_power floor
floor_divide fmod frac frexp hypot i0 igamma igammac ldexp lerp lgamma log log10 log1p log2 logaddexp logaddexp2
logical_and logical_not logical_or logical_xor logit mul multiply mvlgamma nan_to_num neg negative nextafter
polygamma positive pow rad2deg reciprocal remainder round rsqrt sigmoid sign sgn signbit sin sinc sinh sqrt square
sub subtract tan tanh true_divide trunc xlogy maximum minimum fmax fmin eq ne lt le gt ge greater less
greater_equal less_equal not_equal isfinite isinf isnan isposinf isneginf isreal heaviside gcd lcm relu where
""".split()

# NOT YET, honestly: each needs a kernel (or a careful composite) plast does not have, or an integer dtype it
# lacks. Empty now (issue 18 wrote the last ones); a new name in TORCH_ELEMENTWISE that plast lacks goes here with
# its reason, and the test fails if a name here gets implemented and is not removed.
NOT_YET: set[str] = set()


def test_torch_elementwise_names_exist_or_are_listed_not_yet():
    assert all(hasattr(torch, n) for n in TORCH_ELEMENTWISE)
    missing = sorted(n for n in TORCH_ELEMENTWISE if not hasattr(plast, n) and n not in NOT_YET)
    assert not missing, f"implement these or list them in NOT_YET with the reason: {missing}"
    stale = sorted(n for n in NOT_YET if hasattr(plast, n))
    assert not stale, f"implemented now: remove from NOT_YET: {stale}"


def _inputs(name, rng):
    a = rng.uniform(-2.0, 2.0, (3, 4))
    b = rng.uniform(-2.0, 2.0, (3, 4))
    if name == "logit":
        a = rng.uniform(0.05, 0.95, (3, 4))
    if name == "xlogy":
        b = rng.uniform(0.1, 3.0, (3, 4))
        a[0, 0] = 0.0
    if name == "tan":
        a = rng.uniform(-1.2, 1.2, (3, 4))
    return a, b


UNARY = ["tan", "sinh", "cosh", "frac", "deg2rad", "rad2deg", "logit", "absolute", "negative", "sgn", "fix"]
BINARY = ["logaddexp", "logaddexp2", "xlogy", "hypot", "divide", "true_divide", "multiply", "subtract"]


@pytest.mark.parametrize("name", UNARY + BINARY)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_composite_forward_and_backward_like_torch(name, dtype):
    rng = np.random.default_rng(hash(name) % 2**32)
    arrays = _inputs(name, rng)[: 1 if name in UNARY else 2]
    arrays = [a.astype(dtype) for a in arrays]
    tx = [torch.tensor(a, requires_grad=True) for a in arrays]
    px = [plast.tensor(a, requires_grad=True) for a in arrays]
    ty, py = getattr(torch, name)(*tx), getattr(plast, name)(*px)
    tol = {"float32": 2e-5, "float64": 1e-10}[dtype]
    np.testing.assert_allclose(py.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    g = rng.standard_normal(arrays[0].shape).astype(dtype)
    if name not in ("frac", "sgn", "fix"):  # piecewise constant or x - trunc(x): gradient checked below
        ty.backward(torch.tensor(g))
        py.backward(plast.tensor(g))
        for t, p in zip(tx, px):
            np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=10 * tol, atol=10 * tol)
    # the method form is the same function
    assert np.array_equal(getattr(px[0], name)(*px[1:]).detach().numpy(), py.detach().numpy())


def test_frac_gradient_is_one_like_torch():
    x = np.array([-1.5, -0.25, 0.75, 2.5], dtype=np.float32)
    t, p = torch.tensor(x, requires_grad=True), plast.tensor(x, requires_grad=True)
    torch.frac(t).sum().backward()
    plast.frac(p).sum().backward()
    assert p.grad.tolist() == t.grad.tolist()


def test_comparison_aliases_and_infinities_like_torch():
    x = [float("-inf"), -1.0, 0.0, 2.0, float("inf"), float("nan")]
    y = [0.0, -1.0, 1.0, 2.0, float("inf"), 0.0]
    for name in ("greater", "greater_equal", "less", "less_equal", "not_equal"):
        assert getattr(plast, name)(plast.tensor(x), plast.tensor(y)).tolist() == (
            getattr(torch, name)(torch.tensor(x), torch.tensor(y)).tolist()
        ), name
    for name in ("isposinf", "isneginf"):
        assert (
            getattr(plast, name)(plast.tensor(x)).tolist() == getattr(torch, name)(torch.tensor(x)).tolist()
        )
    t = plast.ones(2)
    assert plast.positive(t) is t and torch.positive(torch.ones(2)).shape == (2,)


# ---- legacy methods and constructors ----


def test_legacy_methods_like_torch():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t, p = torch.tensor(a), plast.tensor(a)
    assert p.nelement() == t.nelement() == 6
    b = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(p.mm(plast.tensor(b)).numpy(), t.mm(torch.tensor(b)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(plast.mm(p, plast.tensor(b)).numpy(), torch.mm(t, torch.tensor(b)).numpy())
    with pytest.raises(RuntimeError):
        torch.mm(torch.ones(2, 2, 2), torch.ones(2, 2))
    with pytest.raises(RuntimeError, match="2-D"):
        plast.mm(plast.ones(2, 2, 2), plast.ones(2, 2))
    for meth in ("float", "double", "half", "bfloat16", "long", "int", "bool"):
        assert str(getattr(p, meth)().dtype).split(".")[-1] == str(getattr(t, meth)().dtype).split(".")[-1]
    assert p.type().split(".")[-1] == t.type().split(".")[-1] == "FloatTensor"
    assert p.type(plast.float64).dtype == plast.float64 and p.type(plast.float32) is p
    assert p.type("torch.LongTensor").tolist() == t.type("torch.LongTensor").tolist()
    assert p.pin_memory() is p and not p.is_pinned()
    assert plast.numel(p) == torch.numel(t) and plast.is_tensor(p) and not plast.is_tensor(a)


@pytest.mark.parametrize(
    "call",
    [
        "x.new_zeros(2, 3)",
        "x.new_zeros((2, 3))",
        "x.new_zeros([4], dtype=L.int64)",
        "x.new_ones(3)",
        "x.new_ones((1, 2))",
        "x.new_full((2, 2), 7.0)",
        "x.new_full([3], 2, dtype=L.int32)",
        "x.new_empty((2, 3)).zero_()",
        "x.new_empty(2).zero_()",
        "x.new_tensor([1, 2, 3])",
        "x.new_tensor([[1.5]], dtype=L.float64)",
        "xi.new_tensor([1.7, 2.2])",
        "xi.new_zeros(2)",
    ],
)
def test_new_constructors_like_torch(call):
    out = []
    for L in (torch, plast):
        x = L.ones(2, dtype=L.float64)
        xi = L.ones(2, dtype=L.int32)
        r = eval(call, {"L": L, "x": x, "xi": xi})
        out.append((tuple(r.shape), str(r.dtype).split(".")[-1], r.tolist(), r.requires_grad))
    assert out[0] == out[1]


@pytest.mark.parametrize(
    "name",
    ["FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor", "HalfTensor", "BFloat16Tensor"],
)
def test_legacy_constructors_like_torch(name):
    T, P = getattr(torch, name), getattr(plast, name)
    for args in ([(2, 3)], [(4,)], [([1, 0, 2],)], [([[1.0, 2.0], [3.0, 0.0]],)], [(torch.Size([2, 2]),)]):
        (targs,) = args
        pargs = tuple(plast.Size(a) if isinstance(a, torch.Size) else a for a in targs)
        t, p = T(*targs), P(*pargs)
        assert tuple(p.shape) == tuple(t.shape)
        assert str(p.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        if isinstance(targs[0], list):
            assert p.tolist() == t.tolist()
        assert isinstance(p, P) and isinstance(t, T)
    other = plast.FloatTensor if name != "FloatTensor" else plast.LongTensor
    assert not isinstance(P(2), other)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tensor_legacy_constructor_like_torch(dtype):
    # torch.Tensor(data) / torch.Tensor(*sizes) / torch.Tensor(): the default dtype (word_language_model's
    # generate.py builds its next input with torch.Tensor([[idx]]).long())
    plast.set_default_dtype(getattr(plast, dtype))
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        for args in ([[[3, 1]]], [2, 3], [], [[1.5, -2.0]], [7]):
            p, t = plast.Tensor(*args), torch.Tensor(*args)
            assert (
                tuple(p.shape) == tuple(t.shape)
                and str(p.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
            )
            if args and isinstance(args[0], list):
                assert p.tolist() == t.tolist()
        assert plast.Tensor(plast.Size([2, 2])).shape == (2, 2)
        assert plast.Tensor([[4]]).long().tolist() == [[4]]
        with pytest.raises(TypeError, match="sizes or one sequence"):
            plast.Tensor([1], [2])
    finally:
        plast.set_default_dtype(plast.float32)
        torch.set_default_dtype(torch.float32)

    class Sub(plast.Tensor):
        pass

    with pytest.raises(TypeError, match="can't be constructed directly"):
        Sub([1.0])


def test_xlogy_edges_like_torch():
    x = [0.0, 0.0, 0.0, 1.0, 2.0, 0.0]
    y = [0.0, float("inf"), float("nan"), 0.0, 3.0, 2.0]
    got = plast.xlogy(plast.tensor(x), plast.tensor(y)).tolist()
    ref = torch.xlogy(torch.tensor(x), torch.tensor(y)).tolist()
    np.testing.assert_allclose(got, ref, rtol=1e-6)


# ---- isclose / allclose / equal ----


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize(
    "kw", [{}, {"rtol": 1e-3}, {"atol": 0.5}, {"rtol": 0, "atol": 0}, {"equal_nan": True}], ids=str
)
def test_isclose_allclose_like_torch(dtype, kw):
    rng = np.random.default_rng(5)
    a = rng.uniform(-3, 3, (4, 5))
    b = a + rng.choice([0.0, 1e-9, 1e-6, 1e-4, 0.3, 1.0], a.shape)
    if dtype.startswith("float"):
        a[0, :4] = [np.nan, np.inf, -np.inf, np.nan]
        b[0, :4] = [np.nan, np.inf, np.inf, 1.0]
    a, b = a.astype(dtype), b.astype(dtype)
    bb = b[:1] if dtype == "int64" else b  # broadcasting too
    want = torch.isclose(torch.tensor(a), torch.tensor(bb), **kw).numpy()
    got = plast.isclose(plast.tensor(a), plast.tensor(bb), **kw)
    assert got.dtype == plast.bool and np.array_equal(got.numpy(), want)
    assert plast.allclose(plast.tensor(a), plast.tensor(bb), **kw) is bool(want.all())
    assert plast.tensor(a).isclose(plast.tensor(bb), **kw).numpy().tolist() == want.tolist()
    assert plast.allclose(plast.tensor(a), plast.tensor(a), equal_nan=True) is torch.allclose(
        torch.tensor(a), torch.tensor(a), equal_nan=True
    )


def test_isclose_errors_like_torch():
    with pytest.raises(TypeError, match="did not match"):
        plast.isclose(plast.ones(2), plast.ones(2, dtype=plast.float64))
    with pytest.raises(ValueError, match="non-negative"):
        plast.isclose(plast.ones(2), plast.ones(2), rtol=-1)


@pytest.mark.parametrize(
    "a,b",
    [
        ([1, 2], [1.0, 2.0]),
        ([1.0, 2.0], [[1.0, 2.0]]),
        ([float("nan")], [float("nan")]),
        ([1.0, 2.0], [1.0, 2.5]),
        ([], []),
        ([True, False], [1, 0]),
    ],
)
def test_equal_like_torch(a, b):
    got = plast.equal(plast.tensor(a), plast.tensor(b))
    assert got is torch.equal(torch.tensor(a), torch.tensor(b))
    assert plast.tensor(a).equal(plast.tensor(b)) is got
