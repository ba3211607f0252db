"""LSTM, GRU and their cells on the fused cell ops (plast.fused_lstm_cell / fused_gru_cell): the layers run them
(one kernel per step forward and one backward, no sigmoid/tanh ops left, no scatter of step gradients), and what test_rnn.py does not cover
agrees with torch: hidden states given as non-contiguous views, float64 gradients of every parameter through a
bidirectional, batch_first, projected stack, and a gradient penalty (double backward through the cells)."""

import numpy as np
import pytest
import torch

import plast
import plast.nn as nn


def _twins(cls_name, *args, dtype=np.float32, **kw):
    tm = getattr(torch.nn, cls_name)(*args, **kw)
    pm = getattr(nn, cls_name)(*args, **kw)
    pm.load_state_dict({k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}, strict=True)
    if dtype == np.float64:
        tm.double()
        pm.double()
    return pm, tm


def _kernel_names(fn):
    with plast.profiler.profile() as p:
        fn()
    return {e.key for e in p.key_averages()}


@pytest.mark.parametrize("cls_name", ["LSTM", "GRU", "LSTMCell", "GRUCell"])
def test_layers_run_the_fused_cells(cls_name):
    pm, _ = _twins(cls_name, 5, 8)
    x = plast.randn(4, 3, 5) if cls_name in ("LSTM", "GRU") else plast.randn(3, 5)

    def step():
        out = pm(x)
        h = out[0] if isinstance(out, tuple) else out
        (h * h).sum().backward()

    names = " ".join(_kernel_names(step))
    cell = "fused_lstm_cell" if "LSTM" in cls_name else "fused_gru_cell"
    assert cell in names and f"{cell}_backward" in names, names
    # fusion may merge the leftover ops into groups named after their members ("mul+add"), so look at parts
    assert not {"sigmoid", "tanh"} & set(names.replace("+", " ").split()), names
    # the sequence's gate projection is cut into steps by split_copy: no step scatters a sequence-sized gradient
    assert "strided_scatter" not in names, names


@pytest.mark.parametrize("cls_name", ["LSTM", "GRU"])
def test_non_contiguous_hidden_states_match_torch(cls_name):
    # (batch, layers, H) arrays transposed to (layers, batch, H): the cells read strided rows
    pm, tm = _twins(cls_name, 5, 6, num_layers=2)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 3, 5)).astype(np.float32)
    states = [
        rng.standard_normal((3, 2, 6)).astype(np.float32) for _ in range(2 if cls_name == "LSTM" else 1)
    ]
    p_leaves = [plast.tensor(s, requires_grad=True) for s in states]
    t_leaves = [torch.tensor(s, requires_grad=True) for s in states]
    p_h = [s.transpose(0, 1) for s in p_leaves]
    t_h = [s.transpose(0, 1) for s in t_leaves]
    assert not p_h[0].is_contiguous()
    pout, ph = pm(plast.tensor(x), tuple(p_h) if cls_name == "LSTM" else p_h[0])
    tout, th = tm(torch.tensor(x), tuple(t_h) if cls_name == "LSTM" else t_h[0])
    ph = ph if isinstance(ph, tuple) else (ph,)
    th = th if isinstance(th, tuple) else (th,)
    ploss = (pout * pout).sum() + sum((s * s).sum() for s in ph)
    tloss = (tout * tout).sum() + sum((s * s).sum() for s in th)
    ploss.backward()
    tloss.backward()
    np.testing.assert_allclose(pout.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    for p, t in zip(p_leaves, t_leaves, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), t in zip(pm.named_parameters(), tm.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize(
    "cls_name,kw",
    [("LSTM", dict(proj_size=3)), ("LSTM", dict()), ("GRU", dict())],
    ids=["lstm_proj", "lstm", "gru"],
)
def test_float64_bidirectional_batch_first_gradients_match_torch(cls_name, kw):
    pm, tm = _twins(
        cls_name, 4, 5, num_layers=2, bidirectional=True, batch_first=True, dtype=np.float64, **kw
    )
    x = np.random.default_rng(5).standard_normal((3, 6, 4))
    px = plast.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    pout, _ = pm(px)
    tout, _ = tm(tx)
    w = np.random.default_rng(6).standard_normal(tuple(tout.shape))
    (pout * plast.tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    tol = dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(pout.detach().numpy(), tout.detach().numpy(), **tol)
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), **tol)
    for (name, p), t in zip(pm.named_parameters(), tm.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), **tol, err_msg=name)


@pytest.mark.parametrize("cls_name", ["LSTM", "GRU"])
def test_gradient_penalty_through_the_cells_matches_torch(cls_name):
    # d/dW of |d loss / d x|^2: backward with create_graph=True runs the cells' backward in plast ops
    pm, tm = _twins(cls_name, 3, 4, dtype=np.float64)
    x = np.random.default_rng(8).standard_normal((5, 2, 3))
    grads = {}
    for lib, m in ((plast, pm), (torch, tm)):
        xi = lib.tensor(x, requires_grad=True)
        out, _ = m(xi)
        (gx,) = lib.autograd.grad((out * out).sum(), [xi], create_graph=True)
        (gx * gx).sum().backward()
        grads[lib.__name__] = [p.grad.detach().numpy() for p in m.parameters()]
    for g, w in zip(grads["plast"], grads["torch"], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)
