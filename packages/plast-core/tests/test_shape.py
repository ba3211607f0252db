"""Shape ops (ops/shape.py) and einsum (ops/einsum.py) against torch: forward, backward, views, errors."""

import numpy as np
import pytest
from helpers import helper_test_op

import plast

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = [np.float32, np.float64]


def both(fn):
    """(plast_fn, torch_fn) from fn(module, *tensors), for ops that are module functions in both."""
    return (lambda *a: fn(plast, *a)), (lambda *a: fn(torch, *a))


def perm(x):
    """A non-contiguous view of a 3-D input (same shape as the original after permuting back is not needed)."""
    return x.permute(2, 0, 1)


# ---- squeeze / unsqueeze / flatten / unflatten / movedim ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [None, 1, -1, (1, 3), 0, (0, 1)])
def test_squeeze(dim, dtype, device):
    def fn(a):
        return (a.squeeze() if dim is None else a.squeeze(dim)) * 2

    helper_test_op([(2, 1, 3, 1)], fn, dtype=dtype, device=device)
    helper_test_op([(1, 1, 3, 1)], lambda a: fn(a.transpose(0, 2)), dtype=dtype, device=device)


def test_squeeze_edge_shapes(device):
    helper_test_op([()], lambda a: a.squeeze() * 3, device=device)
    helper_test_op([()], lambda a: a.squeeze(0) * 3, device=device)
    helper_test_op([(0, 1, 3)], lambda a: a.squeeze(), device=device)
    helper_test_op([(1,)], lambda a: a.squeeze() + 1, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, 3, -1, -4])
def test_unsqueeze(dim, dtype, device):
    helper_test_op([(2, 3, 4)], lambda a: a.unsqueeze(dim) * 2, dtype=dtype, device=device)
    helper_test_op([(2, 3, 4)], lambda a: perm(a).unsqueeze(dim) * 2, dtype=dtype, device=device)
    helper_test_op(
        [(2, 3, 4)],
        lambda a: perm(a).unsqueeze(dim).squeeze(dim) + a.permute(2, 0, 1),
        dtype=dtype,
        device=device,
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("args", [(), (1,), (0, 1), (1, -1), (-2, -1), (2, 2)])
def test_flatten(args, dtype, device):
    helper_test_op([(2, 3, 4)], lambda a: a.flatten(*args) * 2, dtype=dtype, device=device)
    helper_test_op([(2, 3, 4)], lambda a: perm(a).flatten(*args) * 2, dtype=dtype, device=device)
    p, t = both(lambda m, a: m.flatten(a, *args) + 1)
    helper_test_op([(2, 3, 4)], p, t, dtype=dtype, device=device)


def test_flatten_0d_and_errors(device):
    helper_test_op([()], lambda a: a.flatten() * 2, device=device)
    with pytest.raises(ValueError):
        plast.zeros(2, 3, 4).flatten(2, 1)
    with pytest.raises(IndexError):
        plast.zeros(2, 3).flatten(0, 5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unflatten(dtype, device):
    helper_test_op([(2, 12)], lambda a: a.unflatten(1, (3, 4)) * 2, dtype=dtype, device=device)
    helper_test_op([(2, 12)], lambda a: a.unflatten(-1, (2, -1, 3)) * 2, dtype=dtype, device=device)
    helper_test_op([(12, 2)], lambda a: a.T.unflatten(1, (4, 3)) * 2, dtype=dtype, device=device)
    with pytest.raises(plast.ShapeError):
        plast.zeros(2, 12).unflatten(1, (5, -1))
    with pytest.raises(plast.ShapeError):
        plast.zeros(2, 12).unflatten(1, (5, 2))


@pytest.mark.parametrize("src,dst", [(0, -1), (-1, 0), ((0, 1), (2, 0)), ((2,), (1,)), (1, 1)])
def test_movedim(src, dst, device):
    helper_test_op([(2, 3, 4)], lambda a: a.movedim(src, dst) * 2, device=device)
    p, t = both(lambda m, a: m.movedim(a, src, dst) * 2)
    helper_test_op([(2, 3, 4)], p, t, device=device)
    helper_test_op([(2, 3, 4)], lambda a: a.moveaxis(src, dst) * 2, device=device)


def test_as_ops(device):
    o = np.zeros((3, 4), np.float32)
    helper_test_op(
        [(1, 4)],
        lambda a: a.expand_as(plast.tensor(o) if isinstance(a, plast.Tensor) else torch.tensor(o)),
        device=device,
    )
    helper_test_op(
        [(12,)],
        lambda a: a.view_as(plast.tensor(o) if isinstance(a, plast.Tensor) else torch.tensor(o)),
        device=device,
    )
    helper_test_op(
        [(4, 3)],
        lambda a: a.T.reshape_as(plast.tensor(o) if isinstance(a, plast.Tensor) else torch.tensor(o)),
        device=device,
    )


# ---- narrow / select / diagonal / unbind / split / chunk ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("args", [(0, 0, 2), (1, 1, 2), (-1, 2, 2), (2, -3, 2), (1, 3, 0), (0, 2, 1)])
def test_narrow(args, dtype, device):
    helper_test_op([(3, 4, 5)], lambda a: a.narrow(*args) * 3, dtype=dtype, device=device)
    helper_test_op([(4, 5, 3)], lambda a: perm(a).narrow(*args) * 3, dtype=dtype, device=device)
    p, t = both(lambda m, a: m.narrow(a, *args) * 3)
    helper_test_op([(3, 4, 5)], p, t, dtype=dtype, device=device)


def test_narrow_errors():
    x = plast.zeros(3, 4)
    with pytest.raises(IndexError, match="exceeds"):
        x.narrow(1, 2, 5)
    with pytest.raises(IndexError):
        x.narrow(1, 7, 1)
    with pytest.raises(IndexError):
        x.narrow(2, 0, 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim,index", [(0, 0), (1, -1), (2, 3), (-1, 0)])
def test_select(dim, index, dtype, device):
    helper_test_op([(3, 4, 5)], lambda a: a.select(dim, index) * 3, dtype=dtype, device=device)
    helper_test_op([(4, 5, 3)], lambda a: perm(a).select(dim, index) * 3, dtype=dtype, device=device)
    p, t = both(lambda m, a: m.select(a, dim, index) * 3)
    helper_test_op([(3, 4, 5)], p, t, dtype=dtype, device=device)


def test_select_errors():
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"):
        plast.zeros(3, 4).select(1, 4)
    with pytest.raises(IndexError):
        plast.zeros(()).select(0, 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset", [0, 1, -1, 2, -3, 7])
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (2, 0), (-1, -2)])
def test_diagonal(offset, dims, dtype, device):
    helper_test_op([(3, 4, 5)], lambda a: a.diagonal(offset, *dims) * 2, dtype=dtype, device=device)
    helper_test_op([(4, 5, 3)], lambda a: perm(a).diagonal(offset, *dims) * 2, dtype=dtype, device=device)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unbind(dim, device):
    helper_test_op(
        [(3, 4, 2)],
        lambda a: sum((p * (i + 1) for i, p in enumerate(a.unbind(dim))), a.sum() * 0),
        device=device,
    )
    p, t = both(lambda m, a: m.stack(m.unbind(a, dim)[::-1], dim))
    helper_test_op([(3, 4, 2)], p, t, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "size,dim", [(2, 0), (3, 1), (1, -1), ([1, 2, 2], 1), ([0, 5], 1), (10, 1), ([2, 1], 0)]
)
def test_split(size, dim, dtype, device):
    def fn(m, a):
        parts = m.split(a, size, dim)
        return m.cat([p * (i + 1) for i, p in enumerate(parts)], dim)

    p, t = both(fn)
    helper_test_op([(3, 5, 2)], p, t, dtype=dtype, device=device)
    helper_test_op(
        [(5, 2, 3)],
        lambda a: fn(plast if isinstance(a, plast.Tensor) else torch, perm(a)),
        dtype=dtype,
        device=device,
    )

    def shapes(m, a):
        return [tuple(p.shape) for p in a.split(size, dim)]

    assert shapes(plast, plast.zeros(3, 5, 2)) == shapes(torch, torch.zeros(3, 5, 2))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size,dim", [(2, 0), (3, 1), ([1, 2, 2], 1), ([0, 5], 1), ([2, 1], 0), (1, -1)])
@pytest.mark.parametrize("shape", [(3, 5, 2), (1, 5, 2)])  # (1, 5, 2): pieces along dim 1 are blocks too
def test_split_copy(size, dim, shape, dtype, device):
    # copies with torch's values, one concatenation backward; the second piece is left out of the result, so
    # its gradient is absent (zeros in the concatenation)
    if isinstance(size, list) and sum(size) != shape[dim]:
        pytest.skip("sections for the other shape")

    def fn(m, a):  # torch's split_copy takes one size only; its split has the same values and gradients
        parts = m.split_copy(a, size, dim) if m is plast else m.split(a, size, dim)
        return m.cat([p * (i + 1) for i, p in enumerate(parts) if i != 1], dim)

    p, t = both(fn)
    helper_test_op([shape], p, t, dtype=dtype, device=device)
    helper_test_op(
        [shape[1:] + shape[:1]],  # perm gives `shape` back, strided
        lambda a: fn(plast if isinstance(a, plast.Tensor) else torch, perm(a)),
        dtype=dtype,
        device=device,
    )
    x = plast.randn(*shape)
    parts = plast.split_copy(x, size, dim)
    want = torch.split(torch.tensor(x.numpy()), size, dim)
    assert [tuple(q.shape) for q in parts] == [tuple(q.shape) for q in want]
    for q, w in zip(parts, want, strict=True):
        assert q.is_contiguous() or q.numel() == 0
        np.testing.assert_array_equal(q.numpy(), w.numpy())


def test_split_copy_is_one_node_with_a_concatenation_backward():
    x = plast.randn(12, 3, requires_grad=True)
    parts = plast.split_copy(x, 2)
    assert len({id(q.grad_fn) for q in parts}) == 1
    with plast.profiler.profile() as prof:
        sum((q * (i + 1)).sum() for i, q in enumerate(parts)).backward()
    names = {e.key for e in prof.key_averages()}
    assert not any("strided_scatter" in n for n in names), names
    np.testing.assert_array_equal(
        x.grad.numpy(), np.repeat(np.arange(1.0, 7.0), 2)[:, None] * np.ones((1, 3))
    )


@pytest.mark.parametrize("n,chunks", [(5, 3), (6, 4), (6, 3), (1, 4), (0, 3), (7, 7), (7, 1)])
def test_chunk(n, chunks, device):
    assert [tuple(p.shape) for p in plast.zeros(2, n).chunk(chunks, 1)] == [
        tuple(p.shape) for p in torch.zeros(2, n).chunk(chunks, 1)
    ]
    if n:
        p, t = both(lambda m, a: m.cat([q * (i + 2) for i, q in enumerate(m.chunk(a, chunks, 1))], 1))
        helper_test_op([(2, n)], p, t, device=device)


def test_split_errors():
    with pytest.raises(plast.ShapeError):
        plast.zeros(5).split([2, 2])
    with pytest.raises(ValueError):
        plast.zeros(5).split(0)
    with pytest.raises(ValueError):
        plast.zeros(5).chunk(0)


def test_views_share_memory():
    x = plast.arange(24).reshape(2, 3, 4).float()
    plast.forward(x)
    views = [
        x.narrow(2, 1, 2),
        x.select(1, 0),
        x.diagonal(0, 1, 2),
        x.unsqueeze(1),
        x.squeeze(),
        x.split(1, 1)[1],
        x.unbind(0)[1],
        x.chunk(2, 2)[0],
        x.movedim(0, 2),
    ]
    expected = [v.numpy() + 100 for v in views]
    x.add_(100)
    for v, e in zip(views, expected):
        np.testing.assert_array_equal(v.numpy(), e)
        assert v._storage is x._storage


# ---- cat / stack ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes,dim",
    [
        ([(2, 3), (4, 3)], 0),
        ([(2, 3), (2, 1), (2, 5)], 1),
        ([(2, 3), (2, 3)], -1),
        ([(2, 0, 3), (2, 4, 3)], 1),
        ([(3,), (0,), (2,)], 0),
        ([(1, 1, 1), (1, 1, 1)], 2),
    ],
)
def test_cat(shapes, dim, dtype, device):
    p, t = both(lambda m, *a: m.cat(list(a), dim) * 2)
    helper_test_op(shapes, p, t, dtype=dtype, device=device)
    p, t = both(lambda m, *a: m.concat(list(a), dim=dim))
    helper_test_op(shapes, p, t, dtype=dtype, device=device)


def test_cat_non_contiguous_and_single(device):
    p, t = both(lambda m, a, b: m.cat([a.T, b[:, ::2]], 1))
    helper_test_op([(3, 2), (2, 6)], p, t, device=device)
    p, t = both(lambda m, a: m.cat([a], 0))
    helper_test_op([(2, 3)], p, t, device=device)
    x = plast.ones(2)
    y = plast.cat([x])
    y.add_(1)
    assert x.tolist() == [1.0, 1.0]  # cat copies


def test_cat_legacy_empty_and_dtypes(device):
    p, t = both(lambda m, a, b: m.cat([a, b]))
    helper_test_op([(0,), (2, 3)], p, t, device=device)
    a = plast.tensor([1, 2])
    b = plast.tensor([0.5])
    out = plast.cat([a, b])
    assert out.dtype is plast.float32 and out.tolist() == [1.0, 2.0, 0.5]
    c = plast.cat([plast.tensor([True]), plast.tensor([3], dtype=plast.int32)])
    assert c.dtype is plast.int32


def test_cat_errors():
    with pytest.raises(plast.ShapeError, match=r"\(2, 3\).*\(2, 4\)"):
        plast.cat([plast.zeros(2, 3), plast.zeros(2, 4)])
    with pytest.raises(plast.ShapeError):
        plast.cat([plast.zeros(2, 3), plast.zeros(2, 3, 1)], 0)
    with pytest.raises(ValueError):
        plast.cat([])
    with pytest.raises(TypeError):
        plast.cat(plast.zeros(2))
    with pytest.raises(plast.ShapeError):
        plast.cat([plast.tensor(1.0), plast.tensor(2.0)])
    with pytest.raises(IndexError):
        plast.cat([plast.zeros(2, 3)], 2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack(dim, dtype, device):
    p, t = both(lambda m, a, b, c: m.stack([a, b, c], dim) * 2)
    helper_test_op([(2, 3)] * 3, p, t, dtype=dtype, device=device)
    p, t = both(lambda m, a, b: m.stack([a.T, b], dim))
    helper_test_op([(3, 2), (2, 3)], p, t, dtype=dtype, device=device)


def test_stack_errors_and_hvstack(device):
    with pytest.raises(plast.ShapeError, match="equal size"):
        plast.stack([plast.zeros(2, 3), plast.zeros(2, 4)])
    with pytest.raises(IndexError):
        plast.stack([plast.zeros(2)], 3)
    helper_test_op(
        [()],
        lambda a: plast.stack([a, a * 2]) if isinstance(a, plast.Tensor) else torch.stack([a, a * 2]),
        device=device,
    )
    for name in ("hstack", "vstack"):
        p, t = both(lambda m, a, b, name=name: getattr(m, name)([a, b]))
        helper_test_op([(2, 3), (2, 3)], p, t, device=device)
        helper_test_op([(3,), (3,)], p, t, device=device)


# ---- tril / triu ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["tril", "triu"])
@pytest.mark.parametrize("k", [0, 1, -1, 5, -5])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 4, 3), (0, 3)])
def test_tril_triu(op, k, shape, dtype, device):
    helper_test_op([shape], lambda a: getattr(a, op)(k) * 2, dtype=dtype, device=device)
    p, t = both(lambda m, a: getattr(m, op)(a.transpose(-1, -2), diagonal=k))
    helper_test_op([shape], p, t, dtype=dtype, device=device)


def test_tril_ints_and_errors():
    x = np.arange(12).reshape(3, 4)
    assert plast.tensor(x).tril(1).tolist() == torch.tensor(x).tril(1).tolist()
    assert plast.tensor(x > 3).triu().tolist() == torch.tensor(x > 3).triu().tolist()
    with pytest.raises(plast.ShapeError):
        plast.zeros(3).tril()


# ---- pad ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "pads", [(1, 2), (0, 0), (1, 1, 2, 0), (2, 1, 0, 1, 1, 1), (-1, 2), (1, -2, -1, 1), (-1, -1)]
)
def test_pad_constant(pads, dtype, device):
    helper_test_op(
        [(2, 3, 4)],
        lambda a: plast.pad(a, pads) * 2 if isinstance(a, plast.Tensor) else F.pad(a, pads) * 2,
        dtype=dtype,
        device=device,
    )
    helper_test_op(
        [(2, 3, 4)],
        lambda a: (
            plast.pad(perm(a), pads, value=1.5)
            if isinstance(a, plast.Tensor)
            else F.pad(perm(a), pads, value=1.5)
        ),
        dtype=dtype,
        device=device,
    )


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads", [(1, 2), (2, 0), (1, 1, 2, 1)])
def test_pad_modes(mode, pads, device):
    shape = (2, 3, 4) if len(pads) == 2 else (2, 3, 4, 5)
    helper_test_op(
        [shape],
        lambda a: plast.pad(a, pads, mode=mode) if isinstance(a, plast.Tensor) else F.pad(a, pads, mode=mode),
        device=device,
    )


def test_pad_ints_and_errors():
    x = plast.tensor([[1, 2], [3, 4]])
    assert plast.pad(x, (1, 0), value=7).tolist() == [[7, 1, 2], [7, 3, 4]]
    assert plast.pad(x, (1, 0), value=7).dtype is plast.int64
    with pytest.raises(plast.ShapeError):
        plast.pad(plast.zeros(3), (1,))
    with pytest.raises(plast.ShapeError):
        plast.pad(plast.zeros(3), (1, 1, 1, 1))
    with pytest.raises(plast.ShapeError):
        plast.pad(plast.zeros(3), (-2, -2))
    with pytest.raises(plast.ShapeError):
        plast.pad(plast.zeros(1, 3), (3, 0), mode="reflect")
    with pytest.raises(ValueError):
        plast.pad(plast.zeros(3), (1, 1), mode="bogus")


# ---- flip / roll / repeat / tile ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dims", [0, (1,), (0, 2), (-1, 0, 1), ()])
def test_flip(dims, dtype, device):
    helper_test_op([(2, 3, 4)], lambda a: a.flip(dims) * 2, dtype=dtype, device=device)
    p, t = both(lambda m, a: m.flip(perm(a), (dims,) if isinstance(dims, int) else dims))
    helper_test_op([(2, 3, 4)], p, t, dtype=dtype, device=device)


def test_fliplr_flipud(device):
    for name in ("fliplr", "flipud"):
        p, t = both(lambda m, a, name=name: getattr(m, name)(a))
        helper_test_op([(3, 4)], p, t, device=device)
    with pytest.raises(ValueError):
        plast.zeros(3).flip((0, 0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shifts,dims", [(1, None), (-2, None), (7, 0), ((1, 2), (0, 2)), (3, -1), (0, 1), (4, 1)]
)
def test_roll(shifts, dims, dtype, device):
    helper_test_op([(2, 3, 4)], lambda a: a.roll(shifts, dims) * 2, dtype=dtype, device=device)
    p, t = both(lambda m, a: m.roll(perm(a), shifts, dims))
    helper_test_op([(2, 3, 4)], p, t, dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sizes", [(2, 1), (1, 3), (2, 2, 2), (3, 1, 1), (0, 2), (1, 1)])
def test_repeat(sizes, dtype, device):
    helper_test_op([(2, 3)], lambda a: a.repeat(*sizes) * 2, dtype=dtype, device=device)
    helper_test_op([(3, 2)], lambda a: a.T.repeat(sizes), dtype=dtype, device=device)


def test_repeat_errors():
    with pytest.raises(plast.ShapeError):
        plast.zeros(2, 3).repeat(2)


@pytest.mark.parametrize("dims", [(2,), (2, 1), (1, 2, 2), 3])
def test_tile(dims, device):
    p, t = both(lambda m, a: m.tile(a, dims if isinstance(dims, tuple) else (dims,)))
    helper_test_op([(2, 3)], p, t, device=device)
    helper_test_op(
        [(2, 3)], lambda a: a.tile(dims if isinstance(dims, tuple) else (dims,)) * 2, device=device
    )


# ---- double backward through the scatter/view pair ----


@pytest.mark.parametrize("name", ["pad", "narrow", "cat", "tril", "flip", "diagonal", "repeat", "select"])
def test_double_backward(name):
    fns = {
        "pad": (lambda a: plast.pad(a, (1, 2, -1, 1)), lambda a: F.pad(a, (1, 2, -1, 1))),
        "narrow": (lambda a: a.narrow(1, 1, 2), lambda a: a.narrow(1, 1, 2)),
        "cat": (lambda a: plast.cat([a, a * a], 1), lambda a: torch.cat([a, a * a], 1)),
        "tril": (lambda a: a.tril(), lambda a: a.tril()),
        "flip": (lambda a: a.flip(0), lambda a: a.flip(0)),
        "diagonal": (lambda a: a.diagonal(), lambda a: a.diagonal()),
        "repeat": (lambda a: a.repeat(2, 2), lambda a: a.repeat(2, 2)),
        "select": (lambda a: a.select(1, 2), lambda a: a.select(1, 2)),
    }
    pf, tf = fns[name]
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 4))
    xp = plast.tensor(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    yp, yt = pf(xp), tf(xt)
    w = rng.standard_normal(tuple(yt.shape))
    # f(x) = sum(w * y(x)^3): its gradient depends on x, so differentiating it again is a real check
    (gp,) = plast.autograd.grad((plast.tensor(w) * yp * yp * yp).sum(), xp, create_graph=True)
    (gt,) = torch.autograd.grad((torch.tensor(w) * yt * yt * yt).sum(), xt, create_graph=True)
    np.testing.assert_allclose(gp.detach().numpy(), gt.detach().numpy(), rtol=1e-10, atol=1e-10)
    v = rng.standard_normal(a.shape)
    (ggp,) = plast.autograd.grad((gp * plast.tensor(v)).sum(), xp)
    (ggt,) = torch.autograd.grad((gt * torch.tensor(v)).sum(), xt)
    np.testing.assert_allclose(ggp.numpy(), ggt.numpy(), rtol=1e-10, atol=1e-10)


def test_finite_difference_pad_reflect():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 5))
    w = rng.standard_normal((2, 9))

    def f(arr):
        return float(
            (plast.pad(plast.tensor(arr), (2, 2), mode="reflect") ** 2 * plast.tensor(w)).sum().item()
        )

    x = plast.tensor(a, requires_grad=True)
    (plast.pad(x, (2, 2), mode="reflect") ** 2 * plast.tensor(w)).sum().backward()
    num = np.zeros_like(a)
    eps = 1e-6
    for i in np.ndindex(a.shape):
        d = np.zeros_like(a)
        d[i] = eps
        num[i] = (f(a + d) - f(a - d)) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), num, rtol=1e-6, atol=1e-8)


# ---- einsum ----

EINSUM = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
    ("bi,ij,bj->b", [(3, 4), (4, 5), (3, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("i,i->", [(4,), (4,)]),
    ("bi,bj->bij", [(2, 3), (2, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("i...->...", [(3, 4, 5)]),
    ("ij->", [(3, 4)]),
    ("iij->ij", [(3, 3, 2)]),
    ("bi,i->b", [(3, 1), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)]),
    ("ij,ij->ij", [(0, 3), (0, 3)]),
    ("ik,kj->ij", [(2, 0), (0, 3)]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(eq, shapes, dtype, device):
    p, t = both(lambda m, *a: m.einsum(eq, *a))
    helper_test_op(shapes, p, t, dtype=dtype, device=device)


def test_einsum_non_contiguous_and_list_form(device):
    helper_test_op(
        [(4, 3), (5, 4)],
        lambda a, b: (
            plast.einsum("ij,jk->ik", [a.T, b.T])
            if isinstance(a, plast.Tensor)
            else torch.einsum("ij,jk->ik", [a.T, b.T])
        ),
        device=device,
    )


def test_einsum_double_backward():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    pa, pb = plast.tensor(a, requires_grad=True), plast.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    yp = plast.einsum("bij,bjk->bik", pa, pb)
    yt = torch.einsum("bij,bjk->bik", ta, tb)
    (gp,) = plast.autograd.grad((yp * yp).sum(), pa, create_graph=True)
    (gt,) = torch.autograd.grad((yt * yt).sum(), ta, create_graph=True)
    (gg_p,) = plast.autograd.grad(gp.sum(), pb)
    (gg_t,) = torch.autograd.grad(gt.sum(), tb)
    np.testing.assert_allclose(gg_p.numpy(), gg_t.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "eq,shapes,exc",
    [
        ("ij,jk->ik", [(2, 3)], ValueError),
        ("ij->ik", [(2, 3)], ValueError),
        ("ijk->ij", [(2, 3)], ValueError),
        ("ij,jk->ik", [(2, 3), (4, 5)], plast.ShapeError),
        ("i1->i", [(2, 3)], ValueError),
        ("ij->ii", [(2, 3)], ValueError),
        ("ij->i->j", [(2, 3)], ValueError),
        ("ii->i", [(2, 3)], plast.ShapeError),
        ("......->", [(2, 3)], ValueError),
    ],
)
def test_einsum_errors(eq, shapes, exc):
    with pytest.raises(exc):
        plast.einsum(eq, *[plast.zeros(*s) for s in shapes])
