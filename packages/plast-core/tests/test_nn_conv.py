"""conv2d, max_pool2d, avg_pool2d against torch: forward, backward, double backward, errors."""

import numpy as np
import pytest
from test_nn_helpers import compare, double_backward

import plast

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = [np.float32, np.float64]


def _u(shape, dtype=np.float32, lo=-2.0, hi=2.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


CONV_CASES = [
    # xshape, wshape, kwargs
    ((2, 3, 7, 6), (4, 3, 3, 3), {}),
    ((2, 3, 7, 6), (4, 3, 3, 2), dict(stride=2, padding=1)),
    ((1, 2, 8, 9), (3, 2, 3, 3), dict(stride=(2, 3), padding=(1, 2), dilation=(2, 1))),
    ((2, 4, 6, 6), (6, 2, 3, 3), dict(groups=2, padding=1)),
    ((2, 4, 5, 5), (4, 1, 3, 3), dict(groups=4, padding="same")),
    ((1, 2, 6, 7), (2, 2, 4, 2), dict(padding="same", dilation=2)),
    ((1, 2, 5, 5), (3, 2, 5, 5), dict(padding="valid")),
    ((3, 1, 1, 1), (2, 1, 1, 1), {}),
    ((0, 2, 4, 4), (3, 2, 3, 3), {}),
    ((2, 3, 9, 8), (5, 3, 2, 3), dict(stride=3)),  # rows/cols the last window does not reach
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xshape,wshape,kw", CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d(dtype, xshape, wshape, kw, bias, device):
    arrays = [_u(xshape, dtype), _u(wshape, dtype, seed=1)] + (
        [_u((wshape[0],), dtype, seed=2)] if bias else []
    )
    compare(
        lambda *a: plast.conv2d(*a, **kw),
        lambda *a: F.conv2d(*a, **kw),
        arrays,
        grad=tuple(range(len(arrays))),
        dtype=dtype,
        device=device,
    )


def test_conv2d_non_contiguous_and_unbatched(device):
    x = _u((3, 2, 6, 5))  # permuted to (2, 3, 5, 6)
    w = _u((4, 3, 3, 2), seed=1)
    compare(
        lambda a, b: plast.conv2d(a.permute(1, 0, 3, 2), b.transpose(2, 3), padding=1),
        lambda a, b: F.conv2d(a.permute(1, 0, 3, 2), b.transpose(2, 3), padding=1),
        [x, w],
        grad=(0, 1),
        device=device,
    )
    compare(
        lambda a, b: plast.conv2d(a, b, stride=2),
        lambda a, b: F.conv2d(a, b, stride=2),
        [_u((3, 7, 7)), _u((2, 3, 3, 3), seed=1)],
        grad=(0, 1),
        device=device,
    )


def test_conv2d_double_backward(device):
    arrays = [
        _u((2, 4, 6, 5), np.float64),
        _u((4, 2, 3, 2), np.float64, seed=1),
        _u((4,), np.float64, seed=2),
    ]
    for kw in (dict(stride=2, padding=1, groups=2), dict(dilation=2, padding=(2, 1), groups=2)):
        double_backward(
            lambda *a, kw=kw: plast.conv2d(*a, **kw),
            lambda *a, kw=kw: F.conv2d(*a, **kw),
            arrays,
            grad=(0, 1, 2),
            device=device,
        )
    # through a nonlinearity, so the second derivative mixes input and weight
    double_backward(
        lambda x, w, b: plast.tanh(plast.conv2d(x, w, b, groups=2)),
        lambda x, w, b: torch.tanh(F.conv2d(x, w, b, groups=2)),
        arrays,
        grad=(0, 1, 2),
        device=device,
    )


def test_conv2d_errors():
    x = plast.ones(1, 4, 5, 5)
    with pytest.raises(plast.ShapeError, match="4 channels.*groups=1"):
        plast.conv2d(x, plast.ones(2, 3, 3, 3))
    with pytest.raises(plast.ShapeError, match="divisible by groups"):
        plast.conv2d(x, plast.ones(3, 2, 3, 3), groups=2)
    with pytest.raises(plast.ShapeError, match="4-D"):
        plast.conv2d(x, plast.ones(2, 4, 3))
    with pytest.raises(plast.ShapeError, match="3-D.*4-D"):
        plast.conv2d(plast.ones(4, 5), plast.ones(2, 4, 3, 3))
    with pytest.raises(plast.ShapeError, match="empty"):
        plast.conv2d(x, plast.ones(2, 4, 7, 7))
    with pytest.raises(plast.ShapeError, match="bias"):
        plast.conv2d(x, plast.ones(2, 4, 3, 3), plast.ones(3))
    with pytest.raises(ValueError, match="stride"):
        plast.conv2d(x, plast.ones(2, 4, 3, 3), stride=0)
    with pytest.raises(ValueError, match="same"):
        plast.conv2d(x, plast.ones(2, 4, 3, 3), stride=2, padding="same")
    with pytest.raises(ValueError, match="groups"):
        plast.conv2d(x, plast.ones(2, 4, 3, 3), groups=0)


POOL_CASES = [
    ((2, 3, 6, 6), dict(kernel_size=2)),
    ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 7, 8), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0))),
    ((1, 2, 7, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((1, 2, 8, 7), dict(kernel_size=2, stride=3, padding=1, ceil_mode=True)),
    ((1, 1, 1, 1), dict(kernel_size=1)),
    ((0, 2, 4, 4), dict(kernel_size=2)),
    ((2, 3, 5, 5), dict(kernel_size=5)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xshape,kw", POOL_CASES)
def test_max_pool2d(dtype, xshape, kw, device):
    compare(
        lambda a: plast.max_pool2d(a, **kw),
        lambda a: F.max_pool2d(a, **kw),
        [_u(xshape, dtype)],
        grad=(0,),
        dtype=dtype,
        device=device,
    )
    p, pi = plast.max_pool2d(plast.tensor(_u(xshape, dtype), device=device), **kw, return_indices=True)
    t, ti = F.max_pool2d(torch.tensor(_u(xshape, dtype)), **kw, return_indices=True)
    assert pi.dtype is plast.int64
    np.testing.assert_array_equal(pi.cpu().numpy(), ti.numpy())


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=3, dilation=2),
        dict(kernel_size=2, dilation=(2, 3), padding=1),
        dict(kernel_size=3, stride=2, dilation=2, padding=1, ceil_mode=True),
    ],
)
def test_max_pool2d_dilation(kw, device):
    x = _u((2, 2, 9, 10))
    compare(
        lambda a: plast.max_pool2d(a, **kw), lambda a: F.max_pool2d(a, **kw), [x], grad=(0,), device=device
    )
    _, pi = plast.max_pool2d(plast.tensor(x, device=device), **kw, return_indices=True)
    _, ti = F.max_pool2d(torch.tensor(x), **kw, return_indices=True)
    np.testing.assert_array_equal(pi.cpu().numpy(), ti.numpy())


def test_max_pool2d_ties_inf_noncontiguous_unbatched(device):
    x = np.zeros((1, 1, 4, 4), np.float32)  # ties: the first maximum wins, as in torch
    x[0, 0, 1, :] = -np.inf
    compare(
        lambda a: plast.max_pool2d(a, 2, padding=1),
        lambda a: F.max_pool2d(a, 2, padding=1),
        [x],
        grad=(0,),
        device=device,
    )
    xi = np.full((1, 1, 3, 3), -np.inf, np.float32)  # windows that hold only -inf and padding
    _, pi = plast.max_pool2d(plast.tensor(xi, device=device), 2, padding=1, return_indices=True)
    _, ti = F.max_pool2d(torch.tensor(xi), 2, padding=1, return_indices=True)
    np.testing.assert_array_equal(pi.cpu().numpy(), ti.numpy())
    compare(
        lambda a: plast.max_pool2d(a.transpose(2, 3), 2),
        lambda a: F.max_pool2d(a.transpose(2, 3), 2),
        [_u((2, 2, 6, 4))],
        grad=(0,),
        device=device,
    )
    compare(
        lambda a: plast.max_pool2d(a, 3, 2),
        lambda a: F.max_pool2d(a, 3, 2),
        [_u((2, 7, 7))],
        grad=(0,),
        device=device,
    )
    p, pi = plast.max_pool2d(plast.tensor(_u((2, 7, 7)), device=device), 3, 2, return_indices=True)
    assert p.shape == pi.shape == (2, 3, 3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xshape,kw", POOL_CASES)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d(dtype, xshape, kw, count_include_pad, device):
    compare(
        lambda a: plast.avg_pool2d(a, **kw, count_include_pad=count_include_pad),
        lambda a: F.avg_pool2d(a, **kw, count_include_pad=count_include_pad),
        [_u(xshape, dtype)],
        grad=(0,),
        dtype=dtype,
        device=device,
    )


def test_avg_pool2d_divisor_noncontiguous_unbatched(device):
    for kw in (
        dict(kernel_size=3, stride=2, padding=1, divisor_override=4),
        dict(kernel_size=2, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    ):
        compare(
            lambda a, kw=kw: plast.avg_pool2d(a.permute(0, 1, 3, 2), **kw),
            lambda a, kw=kw: F.avg_pool2d(a.permute(0, 1, 3, 2), **kw),
            [_u((2, 2, 7, 5))],
            grad=(0,),
            device=device,
        )
    compare(
        lambda a: plast.avg_pool2d(a, 2),
        lambda a: F.avg_pool2d(a, 2),
        [_u((3, 4, 6))],
        grad=(0,),
        device=device,
    )


def test_pool_double_backward(device):
    x = _u((2, 2, 7, 6), np.float64)
    kw = dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)
    double_backward(
        lambda a: plast.max_pool2d(a, **kw) * plast.max_pool2d(a, **kw),
        lambda a: F.max_pool2d(a, **kw) * F.max_pool2d(a, **kw),
        [x],
        grad=(0,),
        device=device,
    )
    double_backward(
        lambda a: plast.avg_pool2d(a, **kw) * plast.avg_pool2d(a, **kw),
        lambda a: F.avg_pool2d(a, **kw) * F.avg_pool2d(a, **kw),
        [x],
        grad=(0,),
        device=device,
    )
    double_backward(
        lambda a: plast.avg_pool2d(a, 2, count_include_pad=False, padding=1),
        lambda a: F.avg_pool2d(a, 2, count_include_pad=False, padding=1),
        [x],
        grad=(0,),
        device=device,
    )


def test_pool_errors():
    x = plast.ones(1, 1, 4, 4)
    for fn in (plast.max_pool2d, plast.avg_pool2d):
        with pytest.raises(ValueError, match="at most half"):
            fn(x, 2, padding=2)
        with pytest.raises(plast.ShapeError, match="empty"):
            fn(x, 5)
        with pytest.raises(plast.ShapeError, match="3-D.*4-D"):
            fn(plast.ones(4, 4), 2)
        with pytest.raises(ValueError, match="kernel_size"):
            fn(x, 0)
        with pytest.raises(plast.DTypeError):
            fn(plast.ones(1, 1, 4, 4, dtype=plast.int64), 2)
    with pytest.raises(ValueError, match="divisor_override"):
        plast.avg_pool2d(x, 2, divisor_override=0)
