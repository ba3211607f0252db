"""Layers, activations, losses, functional and init against torch (copied weights, same inputs)."""

import math

import numpy as np
import pytest
import torch

import plast
import plast.nn as nn
import plast.nn.functional as F

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}


def _copy_linear(p, t):
    with torch.no_grad():
        t.weight.copy_(torch.tensor(p.weight.numpy(force=True)))
        if p.bias is not None:
            t.bias.copy_(torch.tensor(p.bias.numpy(force=True)))


def _rel_err(a, b):
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xshape", [(5, 7), (2, 3, 7), (7,), (0, 7)])
def test_linear_forward_backward_matches_torch(dtype, bias, xshape):
    pdt = plast.float32 if dtype == np.float32 else plast.float64
    pl = nn.Linear(7, 4, bias=bias, dtype=pdt)
    tl = torch.nn.Linear(7, 4, bias=bias, dtype=torch.float32 if dtype == np.float32 else torch.float64)
    _copy_linear(pl, tl)
    x = np.random.default_rng(0).standard_normal(xshape).astype(dtype)
    px, tx = plast.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    po, to = pl(px), tl(tx)
    np.testing.assert_allclose(po.detach().numpy(), to.detach().numpy(), **TOL[dtype])
    if po.numel():
        assert _rel_err(po.detach().numpy(), to.detach().numpy()) <= (1e-5 if dtype == np.float32 else 1e-12)
    up = np.random.default_rng(1).uniform(0.5, 1.5, to.shape).astype(dtype)
    po.backward(plast.tensor(up))
    to.backward(torch.tensor(up))
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), **TOL[dtype])
    np.testing.assert_allclose(pl.weight.grad.numpy(), tl.weight.grad.numpy(), **TOL[dtype])
    if bias:
        np.testing.assert_allclose(pl.bias.grad.numpy(), tl.bias.grad.numpy(), **TOL[dtype])


def test_linear_layout_and_init_statistics():
    plast.manual_seed(0)
    fc = nn.Linear(256, 512)
    assert tuple(fc.weight.shape) == (512, 256) and tuple(fc.bias.shape) == (512,)
    assert fc.weight.dtype == plast.float32 and isinstance(fc.weight, nn.Parameter)
    bound = 1 / math.sqrt(256)
    w = fc.weight.detach().numpy()
    b = fc.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    # U(-bound, bound): mean 0, std bound / sqrt(3); 131072 samples
    assert abs(w.mean()) < 0.01 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert w.max() > 0.99 * bound and w.min() < -0.99 * bound
    # the same bound torch uses
    t = torch.nn.Linear(256, 512)
    assert t.weight.abs().max().item() <= bound and t.weight.abs().max().item() > 0.99 * bound
    # seeded: reproducible
    plast.manual_seed(3)
    a = nn.Linear(4, 4).weight.tolist()
    plast.manual_seed(3)
    assert nn.Linear(4, 4).weight.tolist() == a
    assert repr(nn.Linear(2, 8)) == repr(torch.nn.Linear(2, 8))
    assert repr(nn.Linear(2, 8, bias=False)) == repr(torch.nn.Linear(2, 8, bias=False))


def test_linear_integer_inputs_promote():
    fc = nn.Linear(2, 3)
    out = fc(plast.tensor([[0, 1], [1, 0]]))
    assert out.dtype == plast.float32 and out.shape == (2, 3)


def test_linear_bad_input_shape():
    fc = nn.Linear(2, 8)
    with pytest.raises(
        plast.ShapeError, match=r"Linear\(in_features=2, out_features=8, bias=True\).*\(\*, 2\).*\(4, 3\)"
    ):
        fc(plast.ones(4, 3))
    with pytest.raises(NotImplementedError, match="CUDA"):
        nn.Linear(2, 2, device="cuda")


ACTS = [
    (lambda: nn.ReLU(), lambda: torch.nn.ReLU()),
    (lambda: nn.GELU(), lambda: torch.nn.GELU()),
    (lambda: nn.GELU(approximate="tanh"), lambda: torch.nn.GELU(approximate="tanh")),
    (lambda: nn.SiLU(), lambda: torch.nn.SiLU()),
    (lambda: nn.Sigmoid(), lambda: torch.nn.Sigmoid()),
    (lambda: nn.Tanh(), lambda: torch.nn.Tanh()),
    (lambda: nn.LeakyReLU(0.2), lambda: torch.nn.LeakyReLU(0.2)),
    (lambda: nn.ELU(0.7), lambda: torch.nn.ELU(0.7)),
    (lambda: nn.Softplus(2.0, 5.0), lambda: torch.nn.Softplus(2.0, 5.0)),
    (lambda: nn.Softmax(dim=-1), lambda: torch.nn.Softmax(dim=-1)),
    (lambda: nn.LogSoftmax(dim=1), lambda: torch.nn.LogSoftmax(dim=1)),
    (lambda: nn.Identity(), lambda: torch.nn.Identity()),
    (lambda: nn.Flatten(), lambda: torch.nn.Flatten()),
    (lambda: nn.Flatten(0, 1), lambda: torch.nn.Flatten(0, 1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("make", ACTS, ids=lambda m: repr(m[0]()))
def test_activations_match_torch(make, dtype):
    pm, tm = make[0](), make[1]()
    assert repr(pm) == repr(tm)
    x = np.random.default_rng(2).uniform(-3, 3, (4, 3, 5)).astype(dtype)
    # a non-contiguous input as well
    for view in (lambda a: a, lambda a: a.transpose(0, 2)):
        px = plast.tensor(x, requires_grad=True)
        tx = torch.tensor(x, requires_grad=True)
        po, to = pm(view(px)), tm(view(tx))
        np.testing.assert_allclose(po.detach().numpy(), to.detach().numpy(), **TOL[dtype])
        up = np.random.default_rng(3).uniform(0.5, 1.5, to.shape).astype(dtype)
        po.backward(plast.tensor(up))
        to.backward(torch.tensor(up))
        np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), **TOL[dtype])


def test_activation_inplace_flag_is_accepted():
    x = plast.tensor([-1.0, 2.0])
    assert nn.ReLU(inplace=True)(x).tolist() == [0.0, 2.0]
    assert F.relu(x, inplace=True).tolist() == [0.0, 2.0]
    with pytest.raises(ValueError):
        nn.GELU(approximate="fast")


def _loss_inputs(kind, dtype, rng):
    if kind == "class":
        return rng.standard_normal((6, 5)).astype(dtype), rng.integers(0, 5, (6,))
    if kind == "prob":
        return rng.uniform(0.05, 0.95, (6, 5)).astype(dtype), rng.uniform(0, 1, (6, 5)).astype(dtype)
    if kind == "logp":
        x = rng.standard_normal((6, 5)).astype(dtype)
        return x - np.log(np.exp(x).sum(1, keepdims=True)), rng.integers(0, 5, (6,))
    return rng.standard_normal((6, 5)).astype(dtype), rng.standard_normal((6, 5)).astype(dtype)


LOSSES = [
    ("MSELoss", {}, "real"),
    ("L1Loss", {}, "real"),
    ("SmoothL1Loss", {"beta": 0.5}, "real"),
    ("CrossEntropyLoss", {}, "class"),
    ("CrossEntropyLoss", {"label_smoothing": 0.1, "ignore_index": 2}, "class"),
    ("NLLLoss", {}, "logp"),
    ("BCELoss", {}, "prob"),
    ("BCEWithLogitsLoss", {}, "real01"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,kw,kind", LOSSES, ids=lambda v: v if isinstance(v, str) else None)
def test_losses_match_torch(name, kw, kind, reduction, dtype):
    rng = np.random.default_rng(4)
    x, y = _loss_inputs(kind, dtype, rng)
    if kind == "real01":
        y = rng.uniform(0, 1, x.shape).astype(dtype)
    pm = getattr(nn, name)(reduction=reduction, **kw)
    tm = getattr(torch.nn, name)(reduction=reduction, **kw)
    assert repr(pm) == repr(tm)
    px, tx = plast.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    po, to = pm(px, plast.tensor(y)), tm(tx, torch.tensor(y))
    np.testing.assert_allclose(po.detach().numpy(), to.detach().numpy(), **TOL[dtype])
    up = np.random.default_rng(5).uniform(0.5, 1.5, to.shape).astype(dtype)
    po.backward(plast.tensor(up))
    to.backward(torch.tensor(up))
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), **TOL[dtype])


def test_weighted_losses_register_weight_buffer():
    w = plast.tensor([1.0, 2.0, 0.5])
    ce = nn.CrossEntropyLoss(weight=w)
    assert ce.weight is w and "weight" in ce.state_dict()
    tw = torch.tensor([1.0, 2.0, 0.5])
    x = np.random.default_rng(6).standard_normal((4, 3)).astype(np.float32)
    y = np.array([0, 1, 2, 1])
    np.testing.assert_allclose(
        ce(plast.tensor(x), plast.tensor(y)).item(),
        torch.nn.CrossEntropyLoss(weight=tw)(torch.tensor(x), torch.tensor(y)).item(),
        rtol=1e-5,
    )
    assert nn.MSELoss(size_average=False).reduction == "sum"
    assert nn.MSELoss(reduce=False).reduction == "none"
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")


def test_functional_reexports():
    x = plast.tensor([[-1.0, 0.5, 2.0]])
    t = torch.tensor([[-1.0, 0.5, 2.0]])
    tf = torch.nn.functional
    for name in ["relu", "gelu", "silu", "sigmoid", "tanh", "leaky_relu", "elu", "hardtanh", "softplus"]:
        np.testing.assert_allclose(
            getattr(F, name)(x).numpy(), getattr(tf, name)(t).numpy(), rtol=1e-6, atol=1e-7
        )
    np.testing.assert_allclose(F.softmax(x, dim=1).numpy(), tf.softmax(t, dim=1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(F.log_softmax(x, 1).numpy(), tf.log_softmax(t, 1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(F.mse_loss(x, x * 0).item(), tf.mse_loss(t, t * 0).item(), rtol=1e-6)
    assert F.cross_entropy is plast.cross_entropy and F.linear(x, plast.ones(2, 3)).shape == (1, 2)
    assert F.dropout(x, 0.5, training=False) is x
    for name in F.missing():
        with pytest.raises(AttributeError, match=f"needs plast.{name}"):
            getattr(F, name)
    with pytest.raises(AttributeError):
        F.not_a_function  # noqa: B018
    assert "relu" in dir(F)


def test_init_functions():
    g = plast.Generator().manual_seed(0)
    t = plast.empty(200, 300)
    init = nn.init
    assert init.uniform_(t, -2, 3, generator=g) is t
    a = t.numpy()
    assert a.min() >= -2 and a.max() <= 3 and abs(a.mean() - 0.5) < 0.05
    init.normal_(t, 1.0, 2.0, generator=g)
    assert abs(t.numpy().mean() - 1.0) < 0.03 and abs(t.numpy().std() - 2.0) < 0.03
    init.constant_(t, 0.25)
    assert (t.numpy() == 0.25).all()
    assert init.zeros_(t).numpy().max() == 0 and init.ones_(t).numpy().min() == 1
    fan_in, fan_out = 300, 200
    init.xavier_uniform_(t, gain=2.0, generator=g)
    bound = 2.0 * math.sqrt(6 / (fan_in + fan_out))
    assert np.abs(t.numpy()).max() <= bound and abs(t.numpy().std() - bound / math.sqrt(3)) < 0.02 * bound
    init.xavier_normal_(t, generator=g)
    assert abs(t.numpy().std() - math.sqrt(2 / (fan_in + fan_out))) < 0.02 * math.sqrt(2 / 500)
    init.kaiming_uniform_(t, nonlinearity="relu", generator=g)
    kb = math.sqrt(2) * math.sqrt(3 / fan_in)
    assert np.abs(t.numpy()).max() <= kb and abs(t.numpy().std() - kb / math.sqrt(3)) < 0.02 * kb
    init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu", generator=g)
    assert abs(t.numpy().std() - math.sqrt(2 / fan_out)) < 0.02 * math.sqrt(2 / fan_out)
    init.trunc_normal_(t, mean=0.5, std=1.0, a=-0.5, b=1.0, generator=g)
    v = t.numpy()
    assert v.min() >= -0.5 and v.max() <= 1.0
    # compare with torch's truncated normal moments (large sample)
    tt = torch.nn.init.trunc_normal_(torch.empty(200, 300), mean=0.5, std=1.0, a=-0.5, b=1.0)
    assert abs(v.mean() - tt.mean().item()) < 0.01 and abs(v.std() - tt.std().item()) < 0.01
    # a parameter that requires grad is filled under no_grad
    p = nn.Parameter(plast.zeros(3, 3))
    init.ones_(p)
    assert p.requires_grad and p.tolist() == [[1.0] * 3] * 3


def test_init_helpers_match_torch():
    ti = torch.nn.init
    for nl, param in [
        ("linear", None),
        ("sigmoid", None),
        ("tanh", None),
        ("relu", None),
        ("leaky_relu", None),
        ("leaky_relu", 0.2),
        ("selu", None),
        ("conv2d", None),
    ]:
        assert nn.init.calculate_gain(nl, param) == ti.calculate_gain(nl, param)
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
    for shape in [(3, 4), (8, 3, 5, 5), (2, 6, 7)]:
        assert nn.init._calculate_fan_in_and_fan_out(plast.empty(*shape)) == ti._calculate_fan_in_and_fan_out(
            torch.empty(*shape)
        )
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init._calculate_fan_in_and_fan_out(plast.empty(3))
    with pytest.raises(ValueError, match="Mode"):
        nn.init.kaiming_uniform_(plast.empty(2, 2), mode="fan_avg")
    with pytest.warns(UserWarning, match="zero-element"):
        nn.init.kaiming_uniform_(plast.empty(0, 2))
