"""Layers built under plast.set_default_dtype(plast.float64) have float64 parameters, as torch's under
torch.set_default_dtype(torch.float64), and a training step from the same weights gives torch's values."""

import numpy as np
import pytest
import torch

import plast
import plast.nn as nn


@pytest.fixture(autouse=True)
def float64_default():
    plast.set_default_dtype(plast.float64)
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        plast.set_default_dtype(plast.float32)
        torch.set_default_dtype(torch.float32)


def _dtype_names(module):
    return {n: str(p.dtype).split(".")[-1] for n, p in module.named_parameters()}


LAYERS = [
    ("Linear", (4, 3), {}),
    ("Embedding", (10, 4), {}),
    ("LayerNorm", (4,), {}),
    ("LSTM", (4, 5), {"batch_first": True}),
    ("GRU", (4, 5), {}),
    ("Conv1d", (2, 3, 3), {}),
    ("Conv2d", (2, 3, 3), {}),
    ("BatchNorm1d", (4,), {}),
    ("MultiheadAttention", (4, 2), {}),
]


@pytest.mark.parametrize("name,args,kw", LAYERS, ids=[x[0] for x in LAYERS])
def test_parameters_follow_the_default(name, args, kw):
    pm = getattr(nn, name)(*args, **kw)
    tm = getattr(torch.nn, name)(*args, **kw)
    assert _dtype_names(pm) == _dtype_names(tm)
    assert set(_dtype_names(pm).values()) == {"float64"}
    f32 = getattr(nn, name)(*args, **kw, dtype=plast.float32)
    assert {str(p.dtype) for p in f32.parameters()} == {"plast.float32"}


def _twins(cls_name, *args, **kw):
    tm = getattr(torch.nn, cls_name)(*args, **kw)
    pm = getattr(nn, cls_name)(*args, **kw)
    pm.load_state_dict({k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}, strict=True)
    return pm, tm


def _step_and_compare(pm, tm, pforward, tforward):
    popt = plast.optim.SGD(pm.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        popt.zero_grad()
        topt.zero_grad()
        ploss, tloss = pforward(), tforward()
        assert ploss.dtype is plast.float64 and tloss.dtype is torch.float64
        np.testing.assert_allclose(ploss.item(), tloss.item(), rtol=1e-12)
        ploss.backward()
        tloss.backward()
        popt.step()
        topt.step()
    tparams = dict(tm.named_parameters())
    for n, p in pm.named_parameters():
        assert p.dtype is plast.float64
        np.testing.assert_allclose(p.detach().numpy(), tparams[n].detach().numpy(), rtol=1e-10, atol=1e-12)


def test_linear_trains_like_torch():
    pm, tm = _twins("Linear", 4, 3)
    x = np.random.default_rng(0).standard_normal((5, 4)).tolist()  # Python floats: the default dtype
    y = [0, 2, 1, 1, 0]
    _step_and_compare(
        pm,
        tm,
        lambda: nn.functional.cross_entropy(pm(plast.tensor(x)), plast.tensor(y)),
        lambda: torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y)),
    )


def test_lstm_trains_like_torch():
    pm, tm = _twins("LSTM", 3, 4, batch_first=True)
    x = np.random.default_rng(1).standard_normal((2, 5, 3)).tolist()
    _step_and_compare(
        pm,
        tm,
        lambda: (pm(plast.tensor(x))[0] ** 2).mean() * 0.5,
        lambda: (tm(torch.tensor(x))[0] ** 2).mean() * 0.5,
    )


def test_embedding_layernorm_trains_like_torch():
    pe, te = _twins("Embedding", 10, 4)
    pn, tn = _twins("LayerNorm", 4)
    idx = [[1, 2, 3], [4, 5, 9]]

    class P(nn.Module):
        def __init__(self):
            super().__init__()
            self.e, self.n = pe, pn

    class T(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.e, self.n = te, tn

    _step_and_compare(
        P(),
        T(),
        lambda: (pn(pe(plast.tensor(idx))) * plast.arange(4) / 3).sum(),
        lambda: (tn(te(torch.tensor(idx))) * torch.arange(4) / 3).sum(),
    )
