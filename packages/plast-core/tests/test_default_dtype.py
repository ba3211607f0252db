"""plast.set_default_dtype(plast.float64) against torch.set_default_dtype(torch.float64): the factories without
dtype=, tensor()'s inference, Python floats with integer and bool tensors, integer-to-floating promotion, and
what stays as it was (*_like, .float(), float32 tensors with Python floats). Every test restores float32."""

import numpy as np
import pytest

import plast

torch = pytest.importorskip("torch")


def _name(d):
    return str(d).split(".")[-1]


@pytest.fixture(autouse=True)
def float64_default():
    plast.set_default_dtype(plast.float64)
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        plast.set_default_dtype(plast.float32)
        torch.set_default_dtype(torch.float32)


def _same(p, t):
    assert _name(p.dtype) == _name(t.dtype), (p.dtype, t.dtype)
    assert tuple(p.shape) == tuple(t.shape)
    np.testing.assert_allclose(p.numpy().astype(np.float64), t.numpy().astype(np.float64), rtol=1e-12, atol=0)


def test_get_set_default_dtype():
    assert plast.get_default_dtype() is plast.float64
    assert _name(plast.get_default_dtype()) == _name(torch.get_default_dtype())
    plast.set_default_dtype("float32")
    assert plast.get_default_dtype() is plast.float32
    assert plast.ones(2).dtype is plast.float32
    plast.set_default_dtype(plast.float64)
    for bad_p, bad_t in [(plast.int64, torch.int64), (plast.int32, torch.int32), (plast.bool, torch.bool)]:
        with pytest.raises(TypeError):
            torch.set_default_dtype(bad_t)
        with pytest.raises(TypeError):
            plast.set_default_dtype(bad_p)
    for half in (plast.float16, plast.bfloat16):
        with pytest.raises(NotImplementedError, match="float32 or float64"):
            plast.set_default_dtype(half)
    assert plast.get_default_dtype() is plast.float64  # a refused dtype changes nothing


FACTORIES = [
    ("zeros", lambda m: m.zeros(2, 3)),
    ("ones", lambda m: m.ones(2, 3)),
    ("empty", lambda m: m.empty(2, 3).zero_()),
    ("full float", lambda m: m.full((2, 2), 2.5)),
    ("full int", lambda m: m.full((2, 2), 3)),
    ("full bool", lambda m: m.full((2, 2), True)),
    ("eye", lambda m: m.eye(3)),
    ("arange float", lambda m: m.arange(0, 1, 0.1)),
    ("arange float end", lambda m: m.arange(2.5)),
    ("arange int", lambda m: m.arange(5)),
    ("linspace", lambda m: m.linspace(0, 1, 7)),
    ("logspace", lambda m: m.logspace(-2, 2, 9)),
    ("logspace base", lambda m: m.logspace(0, 3, 4, base=2.0)),
    ("tensor floats", lambda m: m.tensor([[0.1, 2.0], [3.5, -1.25]])),
    ("tensor float scalar", lambda m: m.tensor(0.1)),
    ("tensor mixed", lambda m: m.tensor([1, 2.5])),
    ("tensor ints", lambda m: m.tensor([1, 2])),
    ("tensor bools", lambda m: m.tensor([True, False])),
    ("tensor big int as float", lambda m: m.tensor([1.5, 2**64])),
    ("tensor numpy float32", lambda m: m.tensor(np.array([0.1, 0.2], np.float32))),
    ("as_tensor floats", lambda m: m.as_tensor([0.1, 0.7])),
    ("scalar_tensor float", lambda m: m.scalar_tensor(0.1)),
    ("scalar_tensor int", lambda m: m.scalar_tensor(3)),
    ("scalar_tensor f32", lambda m: m.scalar_tensor(0.1, dtype=m.float32)),
    ("zeros f32", lambda m: m.zeros(2, dtype=m.float32)),
    ("float()", lambda m: m.tensor([0.1, 0.2]).float()),
    ("double()", lambda m: m.tensor([0.1], dtype=m.float32).double()),
    ("zeros_like f32", lambda m: m.zeros_like(m.ones(2, dtype=m.float32))),
    ("ones_like int", lambda m: m.ones_like(m.tensor([1, 2]))),
    ("full_like f32", lambda m: m.full_like(m.ones(2, dtype=m.float32), 0.1)),
]


@pytest.mark.parametrize("name,make", FACTORIES, ids=[f[0] for f in FACTORIES])
def test_factories_like_torch(name, make):
    _same(make(plast), make(torch))


@pytest.mark.parametrize("fn", ["rand", "randn"])
def test_random_factories_follow_the_default(fn):
    assert getattr(torch, fn)(3).dtype is torch.float64
    t = getattr(plast, fn)(1000)
    assert t.dtype is plast.float64
    a = t.numpy()
    assert a.dtype == np.float64
    assert len(np.unique(a)) == 1000  # float64 draws, not float32 values widened
    assert plast.rand_like(plast.ones(2, dtype=plast.float32)).dtype is plast.float32
    assert plast.randn_like(plast.ones(2)).dtype is plast.float64
    assert plast.rand(3, dtype=plast.float32).dtype is plast.float32


def _ints(m):
    return m.tensor([[1, -2, 3], [4, 5, -7]])


def _bools(m):
    return m.tensor([[True, False, True], [False, False, True]])


OPS = [
    ("int * float", lambda m: _ints(m) * 2.5),
    ("float * int", lambda m: 0.1 * _ints(m)),
    ("int + float", lambda m: _ints(m) + 0.1),
    ("int - float", lambda m: _ints(m) - 0.3),
    ("float - int", lambda m: 0.3 - _ints(m)),
    ("int / int scalar", lambda m: _ints(m) / 3),
    ("int / int tensor", lambda m: _ints(m) / m.tensor([3, 7, 9])),
    ("int scalar / int", lambda m: 1 / _ints(m)),
    ("int / float", lambda m: _ints(m) / 0.7),
    ("int // float", lambda m: _ints(m) // 0.7),
    ("int ** float", lambda m: m.tensor([1, 2, 3]) ** 0.5),
    ("bool * float", lambda m: _bools(m) * 0.1),
    ("bool / int", lambda m: _bools(m) / 3),
    ("int * int", lambda m: _ints(m) * 3),
    ("int * 0-d float32", lambda m: _ints(m) * m.tensor(0.1, dtype=m.float32)),
    ("float32 * float", lambda m: m.tensor([0.1, 0.2], dtype=m.float32) * 0.3),
    ("float32 / int", lambda m: m.tensor([1.0, 2.0], dtype=m.float32) / 3),
    ("float32 + int tensor", lambda m: m.tensor([0.1], dtype=m.float32) + m.tensor([1])),
    ("float64 + float32", lambda m: m.tensor([0.1]) + m.tensor([0.2], dtype=m.float32)),
    ("int.sin()", lambda m: _ints(m).sin()),
    ("int.exp()", lambda m: _ints(m).exp()),
    ("int.sqrt()", lambda m: _ints(m).abs().sqrt()),
    ("int.sigmoid()", lambda m: _ints(m).sigmoid()),
    ("int.reciprocal()", lambda m: _ints(m).reciprocal()),
    ("int.exp2()", lambda m: _ints(m).exp2()),
    ("bool.exp()", lambda m: _bools(m).exp()),
    ("int.asin()", lambda m: m.tensor([0, 1, -1]).asin()),
    ("atan2 ints", lambda m: m.atan2(_ints(m), m.tensor([2, 3, 5]))),
    ("int.abs() stays int", lambda m: _ints(m).abs()),
    ("where float", lambda m: m.where(_bools(m), _ints(m), 0.5)),
    ("clamp int by float", lambda m: m.clamp(_ints(m), min=0.5)),
    ("int mean(dtype)", lambda m: _ints(m).mean(dtype=m.float64)),
    ("int.sum() * float", lambda m: _ints(m).sum() * 0.5),
    ("float64 mean", lambda m: m.tensor([0.1, 0.2, 0.4]).mean()),
    ("matmul float", lambda m: m.tensor([[0.1, 0.2]]) @ m.tensor([[0.3], [0.4]])),
]


@pytest.mark.parametrize("name,op", OPS, ids=[o[0] for o in OPS])
def test_promotion_like_torch(name, op):
    _same(op(plast), op(torch))


def test_mean_of_int_raises_as_torch():
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).mean()
    # plast raises its dtype error (a TypeError) where torch raises RuntimeError
    with pytest.raises(plast.errors.DTypeError):
        plast.tensor([1, 2]).mean()


def test_repr_names_float32_not_the_default():
    # as torch: the default floating dtype goes unnamed, float32 is named once it is not the default
    assert "dtype" not in repr(plast.tensor([1.5])) and "dtype" not in repr(torch.tensor([1.5]))
    assert "dtype=plast.float32" in repr(plast.tensor([1.5], dtype=plast.float32))
    assert "dtype=torch.float32" in repr(torch.tensor([1.5], dtype=torch.float32))


def test_backward_under_float64_default():
    x = plast.tensor([0.1, 0.2, 0.3], requires_grad=True)
    tx = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
    (x.sin() * plast.arange(3) / 3).sum().backward()
    (tx.sin() * torch.arange(3) / 3).sum().backward()
    _same(x.grad, tx.grad)


def test_back_to_float32():
    plast.set_default_dtype(plast.float32)
    torch.set_default_dtype(torch.float32)
    for op in (
        lambda m: m.ones(2),
        lambda m: m.tensor([0.5]),
        lambda m: _ints(m) / 2,
        lambda m: _ints(m) * 0.5,
    ):
        assert op(plast).dtype is plast.float32
        assert _name(op(plast).dtype) == _name(op(torch).dtype)


def test_python_types_as_dtypes_are_torchs():
    """dtype=float is float64, int int64, bool bool, in creation, .to and new_*, whatever the default dtype."""
    import torch

    for default in (plast.float32, plast.float64):
        plast.set_default_dtype(default)
        try:
            for py in (float, int, bool):
                cases = [
                    (plast.zeros(2, dtype=py), torch.zeros(2, dtype=py)),
                    (plast.tensor([1, 0], dtype=py), torch.tensor([1, 0], dtype=py)),
                    (plast.ones(2).to(py), torch.ones(2).to(py)),
                    (plast.ones(2).new_zeros(3, dtype=py), torch.ones(2).new_zeros(3, dtype=py)),
                ]
                if py is not bool:  # torch has no bool arange
                    cases.append((plast.arange(3, dtype=py), torch.arange(3, dtype=py)))
                for p, t in cases:
                    assert str(p.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (py, p.dtype, t.dtype)
        finally:
            plast.set_default_dtype(plast.float32)
