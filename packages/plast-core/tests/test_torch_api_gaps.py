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
    with pytest.raises(NotImplementedError, match="float64"):
        plast.set_default_dtype(plast.float64)
    with pytest.raises(TypeError):
        torch.set_default_dtype(torch.int64)
    with pytest.raises(TypeError):
        plast.set_default_dtype(plast.int64)
    assert plast.get_default_dtype() is plast.float32
