"""Ops implemented so far, forward and backward, against torch 2.13 (CPU)."""

import numpy as np
import pytest
from helpers import helper_test_op

torch = pytest.importorskip("torch")

BROADCASTS = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((2, 1, 5), (3, 1)),
    ((1,), (4, 3)),
    ((0, 3), (3,)),
    ((), (2, 2)),
    ((1, 1), (1, 1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", BROADCASTS)
@pytest.mark.parametrize(
    "fn",
    [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / (b * b + 0.5)],
    ids=["add", "sub", "mul", "div"],
)
def test_binary(shapes, fn, dtype, device):
    helper_test_op(shapes, fn, dtype=dtype, device=device)


@pytest.mark.parametrize(
    "fn",
    [lambda a: -a, lambda a: a * 3 - 1, lambda a: 2 / (a * a + 1), lambda a: 1 - a],
    ids=["neg", "scalar_ops", "rdiv", "rsub"],
)
def test_unary_and_scalar(fn, device):
    helper_test_op([(4, 5)], fn, device=device)


@pytest.mark.parametrize("dims", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean(dims, keepdim, device):
    def ps(a):
        return a.sum(dims, keepdim=keepdim) if dims is not None else a.sum()

    def pm(a):
        return a.mean(dims, keepdim=keepdim) if dims is not None else a.mean()

    if dims is None and keepdim:
        pytest.skip("torch's sum() without dim has no keepdim")
    helper_test_op([(3, 4, 5)], ps, device=device)
    helper_test_op([(3, 4, 5)], pm, device=device)


def test_non_contiguous_inputs(device):
    helper_test_op([(4, 6), (6, 4)], lambda a, b: a.T * b + b, transform=None, device=device)
    helper_test_op([(3, 4, 5)], lambda a: (a.permute(2, 0, 1) * 2).sum(1), device=device)
    helper_test_op([(3, 4, 5), (5, 4, 3)], lambda a, b: a.transpose(0, 2) + b, device=device)
    helper_test_op([(3, 4)], lambda a: a.T.reshape(12) * 1.5, device=device)  # reshape of a transpose copies
    helper_test_op([(3, 1, 4)], lambda a: a.expand(3, 5, 4) * a, device=device)


def test_views_share_gradient(device):
    helper_test_op([(2, 6)], lambda a: a.view(3, 4).T.reshape(-1, 2) * a.reshape(6, 2), device=device)


def test_gradient_accumulates_and_retain_graph():
    import plast

    x = plast.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_backward_errors():
    import plast

    x = plast.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        plast.tensor([1.0]).sum().backward()
    with plast.no_grad():
        z = x * 2
    assert not z.requires_grad


def test_autograd_grad_and_hooks():
    import plast

    x = plast.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()))
    (gx,) = plast.autograd.grad((y * 2).sum(), x)
    assert gx.tolist() == [4.0, 8.0, 12.0]
    assert seen == [[2.0, 2.0, 2.0]]
    assert x.grad is None


UNARY = {
    "exp": (lambda a: a.exp(), -2, 2),
    "log": (lambda a: a.log(), 0.1, 3),
    "log1p": (lambda a: a.log1p(), -0.5, 3),
    "sqrt": (lambda a: a.sqrt(), 0.1, 3),
    "rsqrt": (lambda a: a.rsqrt(), 0.1, 3),
    "sin": (lambda a: a.sin(), -3, 3),
    "cos": (lambda a: a.cos(), -3, 3),
    "tanh": (lambda a: a.tanh(), -3, 3),
    "sigmoid": (lambda a: a.sigmoid(), -5, 5),
    "abs": (lambda a: a.abs(), -2, 2),
    "relu": (lambda a: a.relu(), -2, 2),
    "erf": (lambda a: a.erf(), -2, 2),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ops(name, dtype, device):
    fn, lo, hi = UNARY[name]
    helper_test_op([(4, 7)], fn, dtype=dtype, low=lo, high=hi, device=device)
    helper_test_op(
        [(7, 4)], lambda a: fn(a.T), dtype=dtype, low=lo, high=hi, device=device
    )  # non-contiguous input


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_silu(approximate, device):
    import plast

    helper_test_op(
        [(5, 6)],
        lambda a: (
            plast.gelu(a, approximate)
            if isinstance(a, plast.Tensor)
            else torch.nn.functional.gelu(a, approximate=approximate)
        ),
        low=-4,
        high=4,
        device=device,
    )
    helper_test_op(
        [(5, 6)],
        lambda a: plast.silu(a) if isinstance(a, plast.Tensor) else torch.nn.functional.silu(a),
        device=device,
    )


MATMULS = [
    ((3, 4), (4, 5)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((2, 3, 4), (4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((0, 4), (4, 3)),
    ((3, 0), (0, 2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", MATMULS)
def test_matmul(shapes, dtype, device):
    helper_test_op(shapes, lambda a, b: a @ b, dtype=dtype, device=device)


def test_matmul_transposed_and_int_promotion(device):
    import plast

    helper_test_op([(5, 3), (4, 5)], lambda a, b: a.T @ b.T, device=device)
    x = plast.tensor([[0, 1], [1, 0]])
    w = plast.tensor([[2.0], [3.0]])
    assert (x @ w).dtype == plast.float32 and (x @ w).tolist() == [[3.0], [2.0]]
    with pytest.raises(plast.ShapeError, match="cannot be multiplied"):
        plast.ones(2, 3) @ plast.ones(4, 2)
