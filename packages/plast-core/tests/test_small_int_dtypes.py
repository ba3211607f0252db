"""uint8, int8 and int16 as storage types, against torch: creation, casts, promotion with every other dtype,
arithmetic that wraps around, comparisons, reductions, indexing (a uint8 index is a mask, as in torch), the
legacy names, numpy and safetensors both ways, and jit replays (the recorder computes them in int32:
graph/_graph.pyx)."""

import itertools
import warnings

import numpy as np
import pytest
import torch

import plast

SMALL = ["uint8", "int8", "int16"]
ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "bfloat16", "float16", "float32", "float64"]


def _p(name):
    return plast.bool if name == "bool" else getattr(plast, name)


def _t(name):
    return getattr(torch, name)


def _data(name, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    info = np.iinfo(name)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(name)


def _same(p, t):
    assert str(p.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (p.dtype, t.dtype)
    np.testing.assert_array_equal(p.numpy(), t.numpy())


@pytest.mark.parametrize("a, b", list(itertools.product(ALL, ALL)))
def test_promotion_is_torchs(a, b):
    assert (
        str(plast._core.dtypes.promote(_p(a), _p(b))).split(".")[-1]
        == str(torch.promote_types(_t(a), _t(b))).split(".")[-1]
    )
    if a in SMALL or b in SMALL:  # and an op gives it
        x = plast.ones(2, dtype=_p(a)) + plast.ones(2, dtype=_p(b)) if "bool" not in (a, b) else None
        if x is not None:
            assert x.dtype is plast._core.dtypes.promote(_p(a), _p(b))


BINARY = {
    "add": lambda L, x, y: x + y,
    "sub": lambda L, x, y: x - y,
    "mul": lambda L, x, y: x * y,
    "floor_divide": lambda L, x, y: L.floor_divide(x, L.where(y == 0, L.ones_like(y), y)),
    "remainder": lambda L, x, y: L.remainder(x, L.where(y == 0, L.ones_like(y), y)),
    "true_div": lambda L, x, y: x / L.where(y == 0, L.ones_like(y), y),
    "and": lambda L, x, y: x & y,
    "or": lambda L, x, y: x | y,
    "xor": lambda L, x, y: x ^ y,
    "maximum": lambda L, x, y: L.maximum(x, y),
    "minimum": lambda L, x, y: L.minimum(x, y),
    "lt": lambda L, x, y: x < y,
    "eq": lambda L, x, y: x == y,
    "where": lambda L, x, y: L.where(x > y, x, y),
    "scalar_wraps": lambda L, x, y: x * 300 + 7,
    "scalar_neg": lambda L, x, y: x - 1000,
    "broadcast": lambda L, x, y: x + y[:1],
    "strided": lambda L, x, y: x.t() + y.t(),
    "matmul": lambda L, x, y: x @ y.t(),
}
UNARY = {
    "neg": lambda L, x: -x,
    "abs": lambda L, x: x.abs(),
    "not": lambda L, x: ~x,
    "sign": lambda L, x: x.sign(),
    "clamp": lambda L, x: x.clamp(2, 100),
    "sum": lambda L, x: x.sum(),
    "sum_dim": lambda L, x: x.sum(1),
    "prod": lambda L, x: (x % 3).prod(0),
    "max": lambda L, x: x.max(),
    "amin_dim": lambda L, x: x.amin(0),
    "argmax": lambda L, x: x.argmax(1),
    "cumsum": lambda L, x: x.cumsum(1),
    "float": lambda L, x: x.float() * 0.5,
    "to_int64": lambda L, x: x.long(),
    "flip": lambda L, x: x.flip(0),
    "cat": lambda L, x: L.cat([x, x[:1]]),
    "index": lambda L, x: x[L.tensor([2, 0])],
    "slice": lambda L, x: x[1:, ::2],
    "contiguous": lambda L, x: x.t().contiguous(),
    "reshape": lambda L, x: x.reshape(2, 6),
    "sort": lambda L, x: x.sort(1).values,
    "topk": lambda L, x: x.topk(2, 1).values,
}


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dt", SMALL)
def test_binary_ops_like_torch(name, dt):
    a, b = _data(dt, seed=1), _data(dt, seed=2)
    if name == "matmul" and dt == "uint8":
        pytest.skip("torch 2.13 has no uint8 matmul on the CPU")
    p = BINARY[name](plast, plast.tensor(a), plast.tensor(b))
    t = BINARY[name](torch, torch.tensor(a), torch.tensor(b))
    _same(p, t)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dt", SMALL)
def test_unary_ops_and_reductions_like_torch(name, dt):
    a = _data(dt, seed=3)
    if name == "abs" and dt != "uint8":
        a[a == np.iinfo(dt).min] = 0  # abs(min) overflows: torch and plast both wrap, but keep it simple
    _same(UNARY[name](plast, plast.tensor(a)), UNARY[name](torch, torch.tensor(a)))


@pytest.mark.parametrize("dt", SMALL)
def test_creation_casts_and_legacy_names(dt):
    P, T = _p(dt), _t(dt)
    _same(plast.zeros(2, 3, dtype=P), torch.zeros(2, 3, dtype=T))
    _same(plast.full((2,), 7, dtype=P), torch.full((2,), 7, dtype=T))
    _same(plast.arange(0, 20, 3, dtype=P), torch.arange(0, 20, 3, dtype=T))
    f = np.array([0.0, 1.7, 99.9, 126.5], np.float32)
    _same(plast.tensor(f).to(P), torch.tensor(f).to(T))
    a = _data(dt)
    _same(plast.tensor(a), torch.tensor(a))  # the dtype comes from the array
    _same(plast.from_numpy(a), torch.from_numpy(a))
    assert plast.tensor(a).numpy().dtype == np.dtype(dt)
    method = {"uint8": "byte", "int8": "char", "int16": "short"}[dt]
    legacy = {"uint8": "ByteTensor", "int8": "CharTensor", "int16": "ShortTensor"}[dt]
    src = np.array([[1.5, -2.0], [3.0, 4.0]], np.float32)
    if dt == "uint8":
        src = np.abs(src)
    _same(getattr(plast.tensor(src), method)(), getattr(torch.tensor(src), method)())
    _same(getattr(plast, legacy)([1, 2, 3]), getattr(torch, legacy)([1, 2, 3]))
    assert isinstance(plast.tensor(a), getattr(plast, legacy))
    assert plast.as_dtype(dt) is P
    with pytest.raises(RuntimeError, match="floating point|complex"):
        plast.tensor(a).requires_grad_()
    for lib, d in ((plast, P), (torch, T)):  # a value past the type's range raises in both
        with pytest.raises(RuntimeError, match="without overflow"):
            lib.tensor([np.iinfo(dt).max + 1], dtype=d)


def test_uint8_index_is_a_mask_with_torchs_warning():
    x = np.arange(12).reshape(3, 4)
    m = np.array([1, 0, 1], np.uint8)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        p = plast.tensor(x)[plast.tensor(m)]
    assert any("deprecated" in str(i.message) for i in w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.tensor(x)[torch.tensor(m)]
    _same(p, t)
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        plast.tensor(x)[plast.tensor([1], dtype=plast.int16)]


@pytest.mark.parametrize("dt", SMALL)
def test_setitem_and_inplace_like_torch(dt):
    a = _data(dt, seed=5)
    p, t = plast.tensor(a), torch.tensor(a)
    for x in (p, t):
        x[0, 1:3] = 100
        x[1] += 250  # arithmetic wraps around
        x.mul_(3)
        x[2].fill_(-7 if dt != "uint8" else 250)
    _same(p, t)
    # a value written as such must fit, as in torch: a fill, setitem, full, where, clamp and masked_fill refuse
    big = np.iinfo(dt).max + 1
    writes = (
        lambda lib, x: x.fill_(big),
        lambda lib, x: x.__setitem__(0, big),
        lambda lib, x: lib.full((2,), big, dtype=x.dtype),
        lambda lib, x: lib.where(x > 0, x, big),
        lambda lib, x: x.clamp(0, big),
        lambda lib, x: x.masked_fill(x == 0, big),
    )
    for lib, d in ((plast, _p(dt)), (torch, _t(dt))):
        for write in writes:
            with pytest.raises(RuntimeError, match="without overflow"):
                write(lib, lib.zeros(3, dtype=d))


@pytest.mark.parametrize("dt", SMALL)
def test_safetensors_both_ways(tmp_path, dt):
    from safetensors.torch import load_file, save_file

    a = _data(dt)
    plast.save({"x": plast.tensor(a)}, tmp_path / "p.safetensors")
    back = load_file(str(tmp_path / "p.safetensors"))["x"]
    assert back.dtype == _t(dt) and np.array_equal(back.numpy(), a)
    save_file({"y": torch.tensor(a)}, str(tmp_path / "t.safetensors"))
    got = plast.load(tmp_path / "t.safetensors")["y"]
    assert got.dtype is _p(dt) and np.array_equal(got.numpy(), a)


def test_jit_replays_small_int_ops():
    @plast.jit
    def f(x, y):
        return (x + y) * 3, (x.long() - y.long()).sum(), x > y

    for seed in range(3):
        a, b = _data("uint8", seed=seed), _data("uint8", seed=seed + 10)
        outs = f(plast.tensor(a), plast.tensor(b))
        ta, tb = torch.tensor(a), torch.tensor(b)
        for p, t in zip(outs, ((ta + tb) * 3, (ta.long() - tb.long()).sum(), ta > tb)):
            _same(p, t)
    assert f.traces == 1
