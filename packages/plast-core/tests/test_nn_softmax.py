"""softmax, log_softmax, logsumexp (fused primitives) against torch: forward, backward, double backward."""

import numpy as np
import pytest
from test_nn_helpers import compare, double_backward

import plast

torch = pytest.importorskip("torch")

DTYPES = [np.float32, np.float64]
CASES = [
    ((3, 5), 1),
    ((3, 5), 0),
    ((3, 5), -1),
    ((2, 3, 4), 1),
    ((0, 3), 1),
    ((3, 0), 0),
    ((1, 1), 0),
    ((4,), 0),
    ((), 0),
    ((2, 1, 3), -2),
]


def _x(shape, dtype, seed=0, scale=3.0):
    return np.random.default_rng(seed).uniform(-scale, scale, shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_family(name, shape, dim, dtype, device):
    compare(
        lambda x: getattr(plast, name)(x, dim),
        lambda x: getattr(torch, name)(x, dim),
        [_x(shape, dtype)],
        grad=(0,),
        dtype=dtype,
        device=device,
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "dim,keepdim", [(1, False), (0, True), ((0, 2), False), ((0, 2), True), (-1, False), ((), False)]
)
def test_logsumexp(dim, keepdim, dtype, device):
    x = _x((3, 4, 5), dtype)
    if dim == ():
        dim = (0, 1, 2)
    compare(
        lambda t: plast.logsumexp(t, dim, keepdim),
        lambda t: torch.logsumexp(t, dim, keepdim),
        [x],
        grad=(0,),
        dtype=dtype,
        device=device,
    )


def test_logsumexp_edges(device):
    compare(
        lambda t: plast.logsumexp(t, 1),
        lambda t: torch.logsumexp(t, 1),
        [np.zeros((3, 0), np.float32)],
        device=device,
    )
    compare(
        lambda t: plast.logsumexp(t, 0),
        lambda t: torch.logsumexp(t, 0),
        [np.float32(1.5)],
        grad=(0,),
        device=device,
    )
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [1000.0, 1000.0]], np.float32)
    compare(lambda t: plast.logsumexp(t, 1), lambda t: torch.logsumexp(t, 1), [x], device=device)


def test_softmax_extreme_values(device):
    x = np.array([[1000.0, 0.0, -1000.0], [-np.inf, 0.0, 1.0], [-1e30, -1e30, -1e30]], np.float32)
    for name in ("softmax", "log_softmax"):
        compare(
            lambda t, n=name: getattr(plast, n)(t, 1),
            lambda t, n=name: getattr(torch, n)(t, 1),
            [x],
            device=device,
        )


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_non_contiguous(name, device):
    x = _x((4, 6, 5), np.float32)
    compare(
        lambda t: getattr(plast, name)(t.permute(2, 0, 1), 1),
        lambda t: getattr(torch, name)(t.permute(2, 0, 1), 1),
        [x],
        grad=(0,),
        device=device,
    )
    compare(
        lambda t: getattr(plast, name)(t.transpose(0, 2), -1),
        lambda t: getattr(torch, name)(t.transpose(0, 2), -1),
        [x],
        grad=(0,),
        device=device,
    )
    y = _x((3, 1), np.float32)
    compare(
        lambda t: getattr(plast, name)(t.expand(3, 4), 1),
        lambda t: getattr(torch, name)(t.expand(3, 4), 1),
        [y],
        grad=(0,),
        device=device,
    )
    compare(
        lambda t: plast.logsumexp(t.T, 0),
        lambda t: torch.logsumexp(t.T, 0),
        [_x((3, 4), np.float32)],
        grad=(0,),
        device=device,
    )


def test_tensor_methods_and_dtype(device):
    x = _x((3, 4), np.float32)
    compare(
        lambda t: t.softmax(-1) + t.log_softmax(0) + t.logsumexp(1, keepdim=True),
        lambda t: t.softmax(-1) + t.log_softmax(0) + t.logsumexp(1, keepdim=True),
        [x],
        grad=(0,),
        device=device,
    )
    compare(
        lambda t: plast.softmax(t, 1, dtype=plast.float64),
        lambda t: torch.softmax(t, 1, dtype=torch.float64),
        [x],
        grad=(0,),
        dtype=np.float32,
        tol=dict(rtol=1e-6, atol=1e-7),
        device=device,
    )
    out = plast.softmax(plast.tensor([[1, 2, 3]], device=device), 1)  # integer input promotes to float32
    assert out.dtype is plast.float32 and out.device.type == device
    np.testing.assert_allclose(
        out.cpu().numpy(), torch.softmax(torch.tensor([[1.0, 2.0, 3.0]]), 1).numpy(), rtol=1e-6
    )


def test_softmax_errors():
    x = plast.ones(2, 3)
    with pytest.raises(IndexError, match="out of range"):
        plast.softmax(x, 2)
    with pytest.raises(TypeError, match="dim is required"):
        plast.softmax(x)
    with pytest.raises(IndexError):
        plast.logsumexp(x, -3)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_double_backward(name, device):
    x = _x((3, 5), np.float64)
    double_backward(
        lambda t: getattr(plast, name)(t, 1),
        lambda t: getattr(torch, name)(t, 1),
        [x],
        grad=(0,),
        device=device,
    )


def test_double_backward_logsumexp(device):
    x = _x((3, 4, 2), np.float64)
    double_backward(
        lambda t: plast.logsumexp(t, (0, 2)),
        lambda t: torch.logsumexp(t, (0, 2)),
        [x],
        grad=(0,),
        device=device,
    )


def test_third_order_softmax(device):
    # the backward rows' own backward rules are themselves differentiable
    x = _x((2, 4), np.float64)
    p = plast.tensor(x, device=device, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    w = np.random.default_rng(3).uniform(size=(2, 4))
    outs = []
    for lib, v, dev in ((plast, p, device), (torch, t, "cpu")):
        y = (lib.softmax(v, 1) * lib.tensor(w, device=dev)).sum()
        (g1,) = lib.autograd.grad(y, [v], create_graph=True)
        (g2,) = lib.autograd.grad((g1 * g1).sum(), [v], create_graph=True)
        (g3,) = lib.autograd.grad((g2 * lib.tensor(w, device=dev)).sum(), [v])
        outs.append(g3.detach().cpu().numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-8, atol=1e-10)
