"""Embedding, LayerNorm, RMSNorm, BatchNorm1d/2d, Dropout, Conv2d, MaxPool2d, AvgPool2d and their functional
forms against torch (copied weights, same inputs, forward and gradients); BatchNorm running statistics over
several steps; bad input shapes."""

import math

import numpy as np
import pytest
import torch

import plast
import plast.nn as nn
import plast.nn.functional as F

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}
REL = {np.float32: 1e-5, np.float64: 1e-12}
PDT = {np.float32: plast.float32, np.float64: plast.float64}
TDT = {np.float32: torch.float32, np.float64: torch.float64}


def _close(a, b, dtype=np.float32):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, **TOL[dtype])
    if a.size and np.linalg.norm(b) > 0:
        assert np.linalg.norm(a - b) / np.linalg.norm(b) <= REL[dtype]


def _load_from_torch(pm, tm):
    """Copy torch module tm's state into plast module pm (names must agree)."""
    sd = {k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}
    pm.load_state_dict(sd)


def _compare(pm, tm, x, dtype=np.float32, grad=True, up_seed=1):
    """Forward and backward (non-uniform upstream gradient) of pm vs tm on numpy input x."""
    px = plast.tensor(x, requires_grad=grad and x.dtype.kind == "f")
    tx = torch.tensor(x, requires_grad=grad and x.dtype.kind == "f")
    po, to = pm(px), tm(tx)
    if isinstance(to, tuple):
        po, to = po[0], to[0]
    _close(po, to, dtype)
    if not grad:
        return po, to
    up = np.random.default_rng(up_seed).uniform(0.5, 1.5, tuple(to.shape)).astype(to.detach().numpy().dtype)
    po.backward(plast.tensor(up))
    to.backward(torch.tensor(up))
    if px.requires_grad:
        _close(px.grad, tx.grad, dtype)
    tparams = dict(tm.named_parameters())
    for name, p in pm.named_parameters():
        t = tparams[name]
        if t.grad is None:
            assert p.grad is None or not np.any(p.grad.numpy()), name
        else:
            _close(p.grad, t.grad, dtype)
    return po, to


# ---- Embedding ----


@pytest.mark.parametrize("padding_idx", [None, 0, -1])
@pytest.mark.parametrize("ids_shape", [(5,), (2, 3), (2, 0)])
def test_embedding_matches_torch(padding_idx, ids_shape):
    pm = nn.Embedding(10, 4, padding_idx=padding_idx)
    tm = torch.nn.Embedding(10, 4, padding_idx=padding_idx)
    _load_from_torch(pm, tm)
    ids = np.random.default_rng(0).integers(0, 10, ids_shape)
    if ids.size:
        ids.flat[0] = 0
        ids.flat[-1] = 9
    po = pm(plast.tensor(ids))
    to = tm(torch.tensor(ids))
    _close(po, to)
    if ids.size:
        up = np.random.default_rng(1).uniform(0.5, 1.5, tuple(to.shape)).astype(np.float32)
        po.backward(plast.tensor(up))
        to.backward(torch.tensor(up))
        _close(pm.weight.grad, tm.weight.grad)
    assert pm.padding_idx == tm.padding_idx
    assert repr(pm) == repr(tm)


def test_embedding_init_padding_from_pretrained_and_errors():
    plast.manual_seed(0)
    e = nn.Embedding(1000, 64, padding_idx=3)
    w = e.weight.detach().numpy()
    assert not np.any(w[3])
    rest = np.delete(w, 3, axis=0)
    assert abs(rest.mean()) < 0.01 and abs(rest.std() - 1.0) < 0.01  # N(0, 1) as torch
    pre = nn.Embedding.from_pretrained(plast.eye(3))
    assert not pre.weight.requires_grad and pre(plast.tensor([2])).tolist() == [[0.0, 0.0, 1.0]]
    with pytest.raises(ValueError, match="Padding_idx"):
        nn.Embedding(3, 2, padding_idx=3)
    with pytest.raises(plast.DTypeError, match=r"Embedding\(3, 2\).*integer ids"):
        e3 = nn.Embedding(3, 2)
        e3(plast.ones(2))
    with pytest.raises(IndexError, match="out of range"):
        nn.Embedding(3, 2)(plast.tensor([3]))
    with pytest.raises(NotImplementedError, match="sparse"):
        nn.Embedding(3, 2, sparse=True)
    assert F.embedding(plast.tensor([1]), plast.eye(2)).tolist() == [[0.0, 1.0]]


@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding_max_norm_and_scale_grad_by_freq_match_torch(scale_grad_by_freq):
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((6, 4)) * 3
    ids = np.array([[0, 2, 2], [5, 0, 2]])
    pe = nn.Embedding(
        6, 4, max_norm=1.5, norm_type=2.0, scale_grad_by_freq=scale_grad_by_freq, dtype=plast.float64
    )
    te = torch.nn.Embedding(6, 4, max_norm=1.5, norm_type=2.0, scale_grad_by_freq=scale_grad_by_freq).double()
    with plast.no_grad():
        pe.weight.copy_(plast.tensor(w0))
    with torch.no_grad():
        te.weight.copy_(torch.tensor(w0))
    g = rng.standard_normal((2, 3, 4))
    pe(plast.tensor(ids)).backward(plast.tensor(g))
    te(torch.tensor(ids)).backward(torch.tensor(g))
    # the picked rows were renormalized in place; the others are untouched
    np.testing.assert_allclose(pe.weight.detach().numpy(), te.weight.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pe.weight.grad.numpy(), te.weight.grad.numpy(), rtol=1e-12, atol=1e-12)


# ---- LayerNorm, RMSNorm ----


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "ns,xshape,kw",
    [
        (8, (4, 8), {}),
        (8, (2, 3, 8), dict(bias=False)),
        ((3, 8), (2, 3, 8), {}),
        (8, (4, 8), dict(elementwise_affine=False)),
        (8, (4, 8), dict(eps=1e-3)),
    ],
)
def test_layer_norm_matches_torch(dtype, ns, xshape, kw):
    pm = nn.LayerNorm(ns, dtype=PDT[dtype], **kw)
    tm = torch.nn.LayerNorm(ns, dtype=TDT[dtype], **kw)
    with torch.no_grad():  # non-trivial affine parameters
        for p in tm.parameters():
            p.copy_(torch.randn(p.shape, dtype=p.dtype))
    _load_from_torch(pm, tm)
    x = np.random.default_rng(2).standard_normal(xshape).astype(dtype) * 3 + 1
    _compare(pm, tm, x, dtype)
    assert repr(pm) == repr(tm)
    assert list(pm.state_dict()) == list(tm.state_dict())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [{}, dict(eps=1e-6), dict(elementwise_affine=False)])
def test_rms_norm_matches_torch(dtype, kw):
    pm = nn.RMSNorm(6, dtype=PDT[dtype], **kw)
    tm = torch.nn.RMSNorm(6, dtype=TDT[dtype], **kw)
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(torch.randn(p.shape, dtype=p.dtype))
    _load_from_torch(pm, tm)
    x = np.random.default_rng(3).standard_normal((3, 4, 6)).astype(dtype)
    _compare(pm, tm, x, dtype)
    assert repr(pm) == repr(tm)


# ---- BatchNorm ----


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "cls,xshape",
    [("BatchNorm1d", (8, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (4, 3, 5, 6))],
)
@pytest.mark.parametrize(
    "kw",
    [
        {},
        dict(momentum=None),
        dict(momentum=0.3, eps=1e-3),
        dict(affine=False),
        dict(track_running_stats=False),
    ],
    ids=["default", "cumulative", "momentum", "no-affine", "no-stats"],
)
def test_batch_norm_training_steps_then_eval_match_torch(dtype, cls, xshape, kw):
    pm = getattr(nn, cls)(3, dtype=PDT[dtype], **kw)
    tm = getattr(torch.nn, cls)(3, dtype=TDT[dtype], **kw)
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(torch.rand(p.shape, dtype=p.dtype) + 0.5)
    _load_from_torch(pm, tm)
    rng = np.random.default_rng(4)
    for step in range(4):
        x = (rng.standard_normal(xshape) * (step + 1) + step).astype(dtype)
        _compare(pm, tm, x, dtype, up_seed=step)
        for p in list(pm.parameters()):
            p.grad = None
        tm.zero_grad()
        if kw.get("track_running_stats", True):
            _close(pm.running_mean, tm.running_mean, dtype)
            _close(pm.running_var, tm.running_var, dtype)
            assert pm.num_batches_tracked.item() == tm.num_batches_tracked.item() == step + 1
        else:
            assert pm.running_mean is None and tm.running_mean is None
    pm.eval()
    tm.eval()
    x = rng.standard_normal(xshape).astype(dtype)
    _compare(pm, tm, x, dtype)
    assert repr(pm) == repr(tm)
    assert list(pm.state_dict()) == list(tm.state_dict())


def test_batch_norm_state_dict_from_torch_and_eval_uses_running_stats():
    tm = torch.nn.BatchNorm2d(2)
    tm.train()
    for _ in range(3):
        tm(torch.randn(4, 2, 3, 3) * 2 + 1)
    pm = nn.BatchNorm2d(2)
    _load_from_torch(pm, tm)
    assert pm.num_batches_tracked.item() == 3
    pm.eval()
    tm.eval()
    x = np.random.default_rng(5).standard_normal((2, 2, 3, 3)).astype(np.float32)
    _close(pm(plast.tensor(x)), tm(torch.tensor(x)))
    # an old checkpoint without num_batches_tracked still loads
    sd = {k: plast.tensor(v.numpy()) for k, v in tm.state_dict().items() if k != "num_batches_tracked"}
    nn.BatchNorm2d(2).load_state_dict(sd)


def test_batch_norm_running_stats_update_inside_jit():
    tm = torch.nn.BatchNorm1d(3, momentum=None)
    pm = nn.BatchNorm1d(3, momentum=None)

    @plast.jit
    def step(x):
        return pm(x).sum()

    rng = np.random.default_rng(6)
    for i in range(5):
        x = rng.standard_normal((6, 3)).astype(np.float32) + i
        with plast.no_grad():
            step(plast.tensor(x))
        with torch.no_grad():
            tm(torch.tensor(x))
        plast.reset_transient_arenas()
    assert step.replays == 4
    _close(pm.running_mean, tm.running_mean)
    _close(pm.running_var, tm.running_var)
    assert pm.num_batches_tracked.item() == 5


def test_functional_batch_norm_matches_torch():
    x = np.random.default_rng(7).standard_normal((5, 4, 3)).astype(np.float32)
    rm, rv = np.zeros(4, np.float32), np.ones(4, np.float32)
    prm, prv = plast.tensor(rm), plast.tensor(rv)
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    w, b = np.linspace(0.5, 2, 4).astype(np.float32), np.linspace(-1, 1, 4).astype(np.float32)
    po = F.batch_norm(
        plast.tensor(x), prm, prv, plast.tensor(w), plast.tensor(b), training=True, momentum=0.2
    )
    to = torch.nn.functional.batch_norm(
        torch.tensor(x), trm, trv, torch.tensor(w), torch.tensor(b), training=True, momentum=0.2
    )
    _close(po, to)
    _close(prm, trm)
    _close(prv, trv)
    po = F.batch_norm(plast.tensor(x), prm, prv, training=False)
    to = torch.nn.functional.batch_norm(torch.tensor(x), trm, trv, training=False)
    _close(po, to)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(plast.ones(1, 4), None, None, training=True)


# ---- Dropout ----


def test_dropout_module():
    d = nn.Dropout(0.25)
    assert repr(d) == repr(torch.nn.Dropout(0.25))
    plast.manual_seed(0)
    y = d(plast.ones(20000)).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    d.eval()
    assert d(plast.ones(3)).tolist() == [1.0, 1.0, 1.0]
    assert nn.Dropout(0.0)(plast.ones(2)).tolist() == [1.0, 1.0]
    assert not np.any(nn.Dropout(1.0)(plast.ones(4)).numpy())
    # gradients flow through the kept elements with the same scale
    x = plast.ones(1000, requires_grad=True)
    plast.manual_seed(1)
    out = nn.Dropout(0.5)(x)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), out.detach().numpy())
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


# ---- Conv2d and pools ----


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "kw,xshape",
    [
        (dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 7, 6)),
        (
            dict(in_channels=3, out_channels=6, kernel_size=(3, 2), stride=2, padding=1, bias=False),
            (2, 3, 8, 7),
        ),
        (dict(in_channels=4, out_channels=6, kernel_size=3, groups=2, dilation=2, padding=2), (1, 4, 9, 9)),
        (dict(in_channels=2, out_channels=3, kernel_size=3, padding="same"), (2, 2, 5, 5)),
        (dict(in_channels=2, out_channels=3, kernel_size=4, padding="same"), (1, 2, 6, 5)),
        (dict(in_channels=2, out_channels=3, kernel_size=3, padding="valid"), (2, 2, 5, 5)),
        (dict(in_channels=2, out_channels=3, kernel_size=3, padding=1, padding_mode="reflect"), (2, 2, 5, 5)),
        (
            dict(in_channels=2, out_channels=3, kernel_size=3, padding=2, padding_mode="circular"),
            (1, 2, 5, 6),
        ),
        (dict(in_channels=2, out_channels=3, kernel_size=3, padding=1, padding_mode="replicate"), (2, 5, 5)),
    ],
)
def test_conv2d_matches_torch(dtype, kw, xshape):
    pm = nn.Conv2d(**kw, dtype=PDT[dtype])
    tm = torch.nn.Conv2d(**kw, dtype=TDT[dtype])
    _load_from_torch(pm, tm)
    x = np.random.default_rng(8).standard_normal(xshape).astype(dtype)
    _compare(pm, tm, x, dtype)
    assert repr(pm) == repr(tm)
    assert [tuple(p.shape) for p in pm.parameters()] == [tuple(p.shape) for p in tm.parameters()]


def test_conv2d_init_matches_torch_bounds():
    plast.manual_seed(0)
    c = nn.Conv2d(16, 32, 3)
    bound = 1 / math.sqrt(16 * 9)  # kaiming_uniform(a=sqrt(5)) = U(+-1/sqrt(fan_in)), as the bias
    w, b = c.weight.detach().numpy(), c.bias.detach().numpy()
    assert np.abs(w).max() <= bound and w.max() > 0.98 * bound
    assert np.abs(b).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.03 * bound
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(3, 4, 3, padding_mode="zero")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "cls,kw,xshape",
    [
        ("MaxPool2d", dict(kernel_size=2), (2, 3, 6, 6)),
        ("MaxPool2d", dict(kernel_size=3, stride=2, padding=1), (2, 3, 7, 8)),
        ("MaxPool2d", dict(kernel_size=2, dilation=2, ceil_mode=True), (1, 2, 7, 7)),
        ("MaxPool2d", dict(kernel_size=(2, 3)), (3, 6, 6)),
        ("AvgPool2d", dict(kernel_size=2), (2, 3, 6, 6)),
        ("AvgPool2d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False), (2, 3, 7, 8)),
        ("AvgPool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), (1, 2, 8, 8)),
        ("AvgPool2d", dict(kernel_size=2, divisor_override=3), (1, 2, 4, 4)),
    ],
)
def test_pools_match_torch(dtype, cls, kw, xshape):
    pm, tm = getattr(nn, cls)(**kw), getattr(torch.nn, cls)(**kw)
    x = np.random.default_rng(9).permutation(int(np.prod(xshape))).reshape(xshape).astype(dtype)  # no ties
    _compare(pm, tm, x, dtype)
    assert repr(pm) == repr(tm)


def test_max_pool_return_indices():
    x = np.random.default_rng(10).permutation(32).reshape(1, 2, 4, 4).astype(np.float32)
    po, pi = nn.MaxPool2d(2, return_indices=True)(plast.tensor(x))
    to, ti = torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x))
    _close(po, to)
    assert pi.tolist() == ti.tolist()


# ---- functional names ----


def test_functional_forms_match_torch():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    tf = torch.nn.functional
    _close(
        F.conv2d(plast.tensor(x), plast.tensor(w), padding=1),
        tf.conv2d(torch.tensor(x), torch.tensor(w), padding=1),
    )
    _close(F.max_pool2d(plast.tensor(x), 2), tf.max_pool2d(torch.tensor(x), 2))
    _close(F.avg_pool2d(plast.tensor(x), 2), tf.avg_pool2d(torch.tensor(x), 2))
    _close(F.pad(plast.tensor(x), (1, 2, 0, 1)), tf.pad(torch.tensor(x), (1, 2, 0, 1)))
    _close(F.layer_norm(plast.tensor(x), (5,), eps=1e-3), tf.layer_norm(torch.tensor(x), (5,), eps=1e-3))
    assert F.one_hot(plast.tensor([0, 2]), 3).tolist() == tf.one_hot(torch.tensor([0, 2]), 3).tolist()
    q, k, v = (rng.standard_normal((2, 2, 4, 8)).astype(np.float32) for _ in range(3))
    _close(
        F.scaled_dot_product_attention(plast.tensor(q), plast.tensor(k), plast.tensor(v), is_causal=True),
        tf.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v), is_causal=True),
    )
    assert F.dropout(plast.ones(3), 0.5, training=False).tolist() == [1.0, 1.0, 1.0]
    assert "batch_norm" not in F.missing()


# ---- bad input shapes ----


@pytest.mark.parametrize(
    "layer,x,expect",
    [
        (
            lambda: nn.LayerNorm(8),
            plast.ones(4, 7),
            r"LayerNorm\(\(8,\).*expected an input of shape \(\*, 8\)",
        ),
        (lambda: nn.LayerNorm((3, 8)), plast.ones(4, 8), r"expected an input of shape \(\*, 3, 8\)"),
        (lambda: nn.RMSNorm(8), plast.ones(8, 4), r"RMSNorm\(\(8,\).*\(\*, 8\)"),
        (lambda: nn.BatchNorm1d(3), plast.ones(4, 4), r"BatchNorm1d\(3.*\(N, 3\) or \(N, 3, L\)"),
        (lambda: nn.BatchNorm1d(3), plast.ones(4, 3, 2, 2), r"\(N, 3\) or \(N, 3, L\)"),
        (lambda: nn.BatchNorm2d(3), plast.ones(4, 3, 2), r"BatchNorm2d\(3.*\(N, 3, H, W\)"),
        (lambda: nn.Conv2d(3, 4, 3), plast.ones(2, 4, 5, 5), r"Conv2d\(3, 4.*\(N, 3, H, W\) or \(3, H, W\)"),
        (lambda: nn.Conv2d(3, 4, 3), plast.ones(3, 5), r"Conv2d.*\(N, 3, H, W\)"),
        (lambda: nn.MaxPool2d(2), plast.ones(4, 4), r"MaxPool2d.*\(N, C, H, W\) or \(C, H, W\)"),
        (lambda: nn.AvgPool2d(2), plast.ones(1, 1, 1, 4, 4), r"AvgPool2d.*\(N, C, H, W\)"),
        (lambda: nn.Linear(3, 2), plast.ones(4, 4), r"Linear.*\(\*, 3\)"),
    ],
)
def test_bad_input_shapes_raise_shape_error_naming_layer(layer, x, expect):
    with pytest.raises(plast.ShapeError, match=expect):
        layer()(x)
