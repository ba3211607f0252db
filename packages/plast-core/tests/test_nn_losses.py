"""cross_entropy, nll_loss, mse/l1/smooth_l1, binary cross-entropies against torch."""

import warnings

import numpy as np
import pytest
from test_nn_helpers import compare, double_backward

import plast

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = [np.float32, np.float64]
REDUCTIONS = ["mean", "sum", "none"]


def _u(shape, dtype, lo=-2.0, hi=2.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def _targets(shape, k, seed=1, ignore=None):
    t = np.random.default_rng(seed).integers(0, k, shape).astype(np.int64)
    if ignore is not None and t.size:
        t.reshape(-1)[::3] = ignore
    return t


def _fn(name, **kw):
    return (lambda *a: getattr(plast, name)(*a, **kw)), (lambda *a: getattr(F, name)(*a, **kw))


# ---- cross_entropy ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("ignore", [None, 2])
def test_cross_entropy_indices(dtype, reduction, weighted, smoothing, ignore, device):
    x = _u((6, 5), dtype)
    t = _targets((6,), 5, ignore=ignore)
    arrays = [x, t] + ([_u((5,), dtype, 0.2, 2.0, seed=4)] if weighted else [])
    kw = dict(reduction=reduction, label_smoothing=smoothing)
    if ignore is not None:
        kw["ignore_index"] = ignore
    if weighted:
        fp = lambda a, b, w: plast.cross_entropy(a, b, weight=w, **kw)  # noqa: E731
        ft = lambda a, b, w: F.cross_entropy(a, b, weight=w, **kw)  # noqa: E731
    else:
        fp, ft = _fn("cross_entropy", **kw)
    compare(fp, ft, arrays, grad=(0,), dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("xshape", [(2, 4, 3), (2, 3, 4, 5), (1, 1, 1), (0, 3)])
def test_cross_entropy_spatial(dtype, reduction, xshape, device):
    x = _u(xshape, dtype)
    t = _targets((xshape[0],) + xshape[2:], xshape[1], ignore=-100)
    w = _u((xshape[1],), dtype, 0.2, 2.0, seed=4)
    compare(
        lambda a, b, c: plast.cross_entropy(a, b, weight=c, reduction=reduction, label_smoothing=0.1),
        lambda a, b, c: F.cross_entropy(a, b, weight=c, reduction=reduction, label_smoothing=0.1),
        [x, t, w],
        grad=(0,),
        dtype=dtype,
        device=device,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_unbatched_and_int32(reduction, device):
    x = _u((5,), np.float32)
    compare(*_fn("cross_entropy", reduction=reduction), [x, np.array(3)], grad=(0,), device=device)
    t = _targets((4,), 5)
    xb = _u((4, 5), np.float32)
    p = plast.cross_entropy(
        plast.tensor(xb, device=device), plast.tensor(t.astype(np.int32), device=device), reduction=reduction
    )
    r = F.cross_entropy(torch.tensor(xb), torch.tensor(t), reduction=reduction)
    np.testing.assert_allclose(p.cpu().numpy(), r.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_probabilities(dtype, reduction, weighted, smoothing, device):
    x = _u((4, 5, 3), dtype)
    pr = np.random.default_rng(2).dirichlet(np.ones(5), size=(4, 3)).transpose(0, 2, 1).astype(dtype)
    arrays = [x, pr] + ([_u((5,), dtype, 0.2, 2.0, seed=4)] if weighted else [])
    fp = lambda *a: plast.cross_entropy(
        *a[:2],
        weight=a[2] if weighted else None,
        reduction=reduction,  # noqa: E731
        label_smoothing=smoothing,
    )
    ft = lambda *a: F.cross_entropy(
        *a[:2],
        weight=a[2] if weighted else None,
        reduction=reduction,  # noqa: E731
        label_smoothing=smoothing,
    )
    compare(fp, ft, arrays, grad=(0, 1), dtype=dtype, device=device)


def test_cross_entropy_non_contiguous(device):
    x = _u((5, 4), np.float32)  # used as x.T: (4, 5)
    t = _targets((4,), 5)
    compare(
        lambda a, b: plast.cross_entropy(a.T, b),
        lambda a, b: F.cross_entropy(a.T, b),
        [x, t],
        grad=(0,),
        device=device,
    )
    x3 = _u((3, 2, 4), np.float32)  # permuted to (2, 4, 3): N=2, C=4, d=3
    t3 = _targets((2, 3), 4)
    compare(
        lambda a, b: plast.cross_entropy(a.permute(1, 2, 0), b, reduction="none"),
        lambda a, b: F.cross_entropy(a.permute(1, 2, 0), b, reduction="none"),
        [x3, t3],
        grad=(0,),
        device=device,
    )


def test_cross_entropy_all_ignored_is_nan(device):
    x = _u((3, 4), np.float32)
    t = np.full(3, -100)
    compare(*_fn("cross_entropy"), [x, t], grad=(0,), device=device)
    compare(*_fn("nll_loss"), [x, t], device=device)


def test_cross_entropy_extreme_logits(device):
    x = np.array([[1000.0, -1000.0, 0.0], [-np.inf, 0.0, 1.0]], np.float32)
    compare(*_fn("cross_entropy", reduction="none"), [x, np.array([0, 2])], grad=(0,), device=device)


def test_cross_entropy_double_backward_indices(device):
    x = _u((4, 5), np.float64)
    t = _targets((4,), 5, ignore=-100)
    w = _u((5,), np.float64, 0.5, 1.5, seed=5)
    for red in REDUCTIONS:
        double_backward(
            lambda a, b, c, red=red: plast.cross_entropy(a, b, weight=c, reduction=red, label_smoothing=0.1),
            lambda a, b, c, red=red: F.cross_entropy(a, b, weight=c, reduction=red, label_smoothing=0.1),
            [x, t, w],
            grad=(0,),
            device=device,
        )


def test_cross_entropy_double_backward_probabilities(device):
    x = _u((3, 4, 2), np.float64)
    pr = np.random.default_rng(2).dirichlet(np.ones(4), size=(3, 2)).transpose(0, 2, 1)
    for red in REDUCTIONS:
        double_backward(
            lambda a, b, red=red: plast.cross_entropy(a, b, reduction=red, label_smoothing=0.2),
            lambda a, b, red=red: F.cross_entropy(a, b, reduction=red, label_smoothing=0.2),
            [x, pr],
            grad=(0, 1),
            device=device,
        )


def test_cross_entropy_bad_targets():
    x = plast.randn(3, 4)
    with pytest.raises(IndexError, match="target 4 is out of bounds for 4 classes"):
        plast.cross_entropy(x, plast.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match="target -1"):
        plast.cross_entropy(x, plast.tensor([0, -1, 1]))
    # a target that is only known when the graph runs: the kernel checks it
    lazy = plast.tensor([0, 1, 2]) + 5
    loss = plast.cross_entropy(x, lazy)
    with pytest.raises(IndexError, match="target 5 is out of bounds"):
        loss.item()
    with pytest.raises(IndexError, match="out of bounds"):  # reading again raises again, never garbage
        loss.item()
    xg = plast.randn(3, 4, requires_grad=True)
    with pytest.raises(IndexError):
        plast.cross_entropy(xg, plast.tensor([0, 1, 2]) * 3).backward()
    with pytest.raises(IndexError):
        plast.nll_loss(x, plast.tensor([9, 0, 0]))
    # the ignore_index itself is fine even though it is out of range
    assert np.isfinite(plast.cross_entropy(x, plast.tensor([0, -100, 1])).item())


def test_cross_entropy_bad_shapes_and_args():
    x = plast.randn(3, 4)
    with pytest.raises(plast.ShapeError, match=r"\(3,\)"):
        plast.cross_entropy(x, plast.tensor([0, 1]))
    with pytest.raises(plast.ShapeError, match="probability targets"):
        plast.cross_entropy(x, plast.rand(3, 5))
    with pytest.raises(plast.ShapeError, match="weight"):
        plast.cross_entropy(x, plast.tensor([0, 1, 2]), weight=plast.ones(3))
    with pytest.raises(ValueError, match="reduction"):
        plast.cross_entropy(x, plast.tensor([0, 1, 2]), reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        plast.cross_entropy(x, plast.tensor([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(plast.DTypeError):
        plast.cross_entropy(x, plast.tensor([True, False, True]))
    with pytest.raises(plast.DTypeError):
        plast.nll_loss(x, plast.rand(3, 4))
    with pytest.raises(plast.ShapeError):
        plast.cross_entropy(plast.tensor(1.0), plast.tensor(0))


# ---- nll_loss ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("xshape", [(5, 4), (2, 4, 3), (4,)])
def test_nll_loss(dtype, reduction, xshape, device):
    x = _u(xshape, dtype, -3, 0)
    tshape = () if len(xshape) == 1 else (xshape[0],) + xshape[2:]
    k = xshape[0] if len(xshape) == 1 else xshape[1]
    t = _targets(tshape, k, ignore=1 if len(xshape) > 1 else None)
    w = _u((k,), dtype, 0.2, 2.0, seed=4)
    compare(
        lambda a, b, c: plast.nll_loss(a, b, weight=c, ignore_index=1, reduction=reduction),
        lambda a, b, c: F.nll_loss(a, b, weight=c, ignore_index=1, reduction=reduction),
        [x, t, w],
        grad=(0,),
        dtype=dtype,
        device=device,
    )
    compare(*_fn("nll_loss", reduction=reduction), [x, t], grad=(0,), dtype=dtype, device=device)


def test_nll_composes_with_log_softmax(device):
    x = _u((4, 6), np.float64)
    t = _targets((4,), 6)
    compare(
        lambda a, b: plast.nll_loss(plast.log_softmax(a.T.T, 1), b),
        lambda a, b: F.nll_loss(F.log_softmax(a, 1), b),
        [x, t],
        grad=(0,),
        dtype=np.float64,
        device=device,
    )
    double_backward(
        lambda a, b: plast.nll_loss(plast.log_softmax(a, 1), b),
        lambda a, b: F.nll_loss(F.log_softmax(a, 1), b),
        [x, t],
        grad=(0,),
        device=device,
    )


# ---- regression losses ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss"])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((0, 2), (0, 2)), ((1,), (1,)), ((), ())])
def test_regression_losses(name, reduction, dtype, shapes, device):
    arrays = [_u(shapes[0], dtype), _u(shapes[1], dtype, seed=3)]
    compare(*_fn(name, reduction=reduction), arrays, grad=(0, 1), dtype=dtype, device=device)


@pytest.mark.parametrize("beta", [0.0, 0.5, 2.0])
def test_smooth_l1_beta(beta, device):
    arrays = [_u((5, 6), np.float64), _u((5, 6), np.float64, seed=3)]
    compare(*_fn("smooth_l1_loss", beta=beta), arrays, grad=(0, 1), dtype=np.float64, device=device)
    compare(
        *_fn("smooth_l1_loss", beta=beta, reduction="none"),
        arrays,
        grad=(0, 1),
        dtype=np.float64,
        device=device,
    )


def test_regression_broadcast_weight_noncontiguous(device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(
            *_fn("mse_loss"),
            [_u((3, 4), np.float32), _u((4,), np.float32, seed=2)],
            grad=(0, 1),
            device=device,
        )
    w = _u((3, 4), np.float32, 0.1, 1.0, seed=5)
    for name in ("mse_loss", "l1_loss"):
        for red in REDUCTIONS:
            compare(
                lambda a, b, c, name=name, red=red: getattr(plast, name)(a, b, reduction=red, weight=c),
                lambda a, b, c, name=name, red=red: getattr(F, name)(a, b, reduction=red, weight=c),
                [_u((3, 4), np.float32), _u((3, 4), np.float32, seed=2), w],
                grad=(0, 1),
                device=device,
            )
    compare(
        lambda a, b: plast.mse_loss(a.T, b),
        lambda a, b: F.mse_loss(a.T, b),
        [_u((4, 3), np.float32), _u((3, 4), np.float32, seed=2)],
        grad=(0, 1),
        device=device,
    )
    with pytest.raises(ValueError, match="reduction"):
        plast.mse_loss(plast.ones(2), plast.ones(2), reduction="max")
    with pytest.raises(plast.ShapeError):
        plast.l1_loss(plast.ones(2), plast.ones(3))
    with pytest.raises(ValueError, match="beta"):
        plast.smooth_l1_loss(plast.ones(2), plast.ones(2), beta=-1.0)


def test_regression_double_backward(device):
    arrays = [_u((3, 4), np.float64), _u((3, 4), np.float64, seed=3)]
    for name in ("mse_loss", "smooth_l1_loss"):
        double_backward(*_fn(name), arrays, grad=(0, 1), device=device)


# ---- binary cross-entropy ----


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(dtype, reduction, weighted, device):
    x = _u((4, 3), dtype, 0.05, 0.95)
    t = _u((4, 3), dtype, 0.0, 1.0, seed=2)
    arrays = [x, t] + ([_u((3,), dtype, 0.2, 2.0, seed=4)] if weighted else [])
    fp = lambda *a: plast.binary_cross_entropy(
        *a[:2],
        weight=a[2] if weighted else None,  # noqa: E731
        reduction=reduction,
    )
    ft = lambda *a: F.binary_cross_entropy(*a[:2], weight=a[2] if weighted else None, reduction=reduction)  # noqa: E731
    compare(fp, ft, arrays, grad=(0, 1), dtype=dtype, device=device)


def test_binary_cross_entropy_edges(device):
    x = np.array([0.0, 1.0, 0.5, 1e-30], np.float32)
    t = np.array([1.0, 0.0, 1.0, 1.0], np.float32)
    compare(*_fn("binary_cross_entropy", reduction="none"), [x, t], device=device)  # logs clamp at -100
    compare(*_fn("binary_cross_entropy"), [np.zeros((0,), np.float32)] * 2, device=device)
    with pytest.raises(ValueError, match="between 0 and 1"):
        plast.binary_cross_entropy(plast.tensor([1.5, 0.2]), plast.tensor([1.0, 0.0])).item()
    with pytest.raises(plast.ShapeError):
        plast.binary_cross_entropy(plast.tensor([0.5, 0.2]), plast.tensor([1.0]))
    x = _u((3, 4), np.float64, 0.1, 0.9)
    t = _u((3, 4), np.float64, 0.0, 1.0, seed=2)
    double_backward(*_fn("binary_cross_entropy"), [x, t], grad=(0, 1), device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("pos", [False, True])
def test_binary_cross_entropy_with_logits(dtype, reduction, weighted, pos, device):
    x = _u((4, 3), dtype, -5, 5)
    t = _u((4, 3), dtype, 0.0, 1.0, seed=2)
    arrays = [x, t, _u((4, 1), dtype, 0.2, 2.0, seed=4), _u((3,), dtype, 0.5, 3.0, seed=5)]

    def fn(lib):
        f = plast.binary_cross_entropy_with_logits if lib == "p" else F.binary_cross_entropy_with_logits
        return lambda a, b, w, pw: f(
            a, b, weight=w if weighted else None, pos_weight=pw if pos else None, reduction=reduction
        )

    compare(fn("p"), fn("t"), arrays, grad=(0, 1), dtype=dtype, device=device)


def test_bce_with_logits_extremes_and_double_backward(device):
    x = np.array([-200.0, -30.0, 0.0, 30.0, 200.0], np.float32)
    t = np.array([1.0, 0.0, 0.5, 1.0, 0.0], np.float32)
    compare(*_fn("binary_cross_entropy_with_logits", reduction="none"), [x, t], grad=(0,), device=device)
    x = _u((3, 4), np.float64, -3, 3)
    t = _u((3, 4), np.float64, 0.0, 1.0, seed=2)
    pw = _u((4,), np.float64, 0.5, 2.0, seed=3)
    double_backward(
        lambda a, b, c: plast.binary_cross_entropy_with_logits(a, b, pos_weight=c),
        lambda a, b, c: F.binary_cross_entropy_with_logits(a, b, pos_weight=c),
        [x, t, pw],
        grad=(0, 1),
        device=device,
    )
