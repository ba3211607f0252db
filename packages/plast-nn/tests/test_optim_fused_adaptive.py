"""Adadelta, Adagrad, Adamax and NAdam on plast-core's fused update ops (adadelta_update_, ...): one fused call per
device and step, eager and under ``@plast.jit`` with a scheduler changing the learning rate, against torch.optim;
Adagrad's ``fused=True`` as torch takes it. (test_optim_compat.py holds the broader trajectory and state-dict
comparisons of these optimizers.)"""

import numpy as np
import pytest
import torch
from optim_helpers import TOL, twin_params

import plast
import plast.nn as nn
import plast.optim as optim

OPS = {"Adadelta": "adadelta_update_", "Adagrad": "adagrad_update_", "Adamax": "adamax_update_"}
OPS["NAdam"] = "nadam_update_"
# per optimizer: options of the first group, of the second group (its own lr among them)
GROUPS = {
    "Adadelta": (dict(lr=0.5, weight_decay=0.1), dict(lr=1.0, rho=0.5, maximize=False)),
    "Adagrad": (dict(lr=0.05, lr_decay=0.01, initial_accumulator_value=0.2), dict(lr=0.02, weight_decay=0.1)),
    "Adamax": (dict(lr=0.01, weight_decay=0.1), dict(lr=0.003, betas=(0.5, 0.9))),
    "NAdam": (dict(lr=0.01, momentum_decay=0.01), dict(lr=0.003, weight_decay=0.1)),
}


def _groups(name, ps):
    a, b = GROUPS[name]
    return [dict(params=ps[:2], **a), dict(params=ps[2:], **b)]


def _count_calls(monkeypatch, op):
    calls = []
    real = getattr(plast, op)

    def spy(params, *args, **kw):
        calls.append(len(params))
        return real(params, *args, **kw)

    monkeypatch.setattr(plast, op, spy)
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPS))
def test_eager_groups_in_one_fused_call_match_torch(monkeypatch, name, dtype):
    calls = _count_calls(monkeypatch, OPS[name])
    rng, pp, tp = twin_params(dtype, seed=7)
    popt = getattr(optim, name)(_groups(name, pp))
    topt = getattr(torch.optim, name)(_groups(name, tp), foreach=False)
    ps = optim.lr_scheduler.ExponentialLR(popt, gamma=0.8)
    ts = torch.optim.lr_scheduler.ExponentialLR(topt, gamma=0.8)
    for _ in range(10):
        for p, t in zip(pp, tp):
            g = rng.standard_normal(p.shape).astype(dtype)
            p.grad, t.grad = plast.tensor(g), torch.tensor(g)
        popt.step()
        topt.step()
        ps.step()
        ts.step()
    # the first step gathers both groups into one call; later eager steps replay it (no Python-level call)
    assert calls == [len(pp)]
    assert popt._replay is not None and popt._replay.runs == 9
    for p, t in zip(pp, tp):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), **TOL[dtype])
        pst, tst = popt.state[p], topt.state[t]
        assert sorted(pst) == sorted(tst)
        for k, v in tst.items():
            if k == "step":
                assert pst[k].item() == v.item() == 10
            else:
                assert pst[k].dtype.name == str(v.dtype).removeprefix("torch.")
                np.testing.assert_allclose(pst[k].numpy(), v.numpy(), **TOL[dtype])


@pytest.mark.parametrize("name", sorted(OPS))
def test_jit_step_replayed_with_a_scheduler_matches_torch(name):
    plast.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    t = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    kw = dict(GROUPS[name][0], maximize=name == "Adamax")
    popt = getattr(optim, name)(m.parameters(), **kw)
    topt = getattr(torch.optim, name)(t.parameters(), foreach=False, **kw)
    ps = optim.lr_scheduler.StepLR(popt, step_size=2, gamma=0.5)
    ts = torch.optim.lr_scheduler.StepLR(topt, step_size=2, gamma=0.5)

    @plast.jit
    def step(x, y):
        popt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        popt.step()
        return loss

    rng = np.random.default_rng(5)
    xb, yb = plast.zeros(4, 3), plast.zeros(4, 1)  # fixed input tensors: one trace, replayed
    for _ in range(10):
        x, y = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 1)).astype(np.float32)
        with plast.no_grad():
            xb.copy_(plast.tensor(x))
            yb.copy_(plast.tensor(y))
        loss = step(xb, yb).item()
        topt.zero_grad()
        tl = ((t(torch.tensor(x)) - torch.tensor(y)) ** 2).mean()
        tl.backward()
        topt.step()
        ps.step()
        ts.step()
        assert loss == pytest.approx(tl.item(), rel=1e-5)
        plast.reset_transient_arenas()
    assert step.traces == 1 and step.replays == 9
    assert popt.param_groups[0]["lr"] == topt.param_groups[0]["lr"] == kw["lr"] * 0.5**5
    for (n, p), q in zip(m.named_parameters(), t.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=n)
        assert popt.state[p]["step"].item() == 10


def test_adagrad_fused_true_is_accepted_as_torch_accepts_it():
    rng, pp, tp = twin_params(np.float32, seed=2)
    popt = optim.Adagrad(pp, lr=0.05, fused=True)
    topt = torch.optim.Adagrad(tp, lr=0.05, fused=True)
    assert popt.defaults["fused"] is topt.defaults["fused"] is True
    for _ in range(5):
        for p, t in zip(pp, tp):
            g = rng.standard_normal(p.shape).astype(np.float32)
            p.grad, t.grad = plast.tensor(g), torch.tensor(g)
        popt.step()
        topt.step()
    for p, t in zip(pp, tp):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), **TOL[np.float32])
    w, tw = [nn.Parameter(plast.ones(2))], [torch.nn.Parameter(torch.ones(2))]
    for kw in (dict(fused=True, foreach=True), dict(fused=True, differentiable=True)):
        with pytest.raises(RuntimeError) as want:
            torch.optim.Adagrad(tw, **kw)
        with pytest.raises(RuntimeError) as got:
            optim.Adagrad(w, **kw)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("name", ["Adadelta", "Adamax", "NAdam"])
def test_fused_is_rejected_where_torch_rejects_it(name):
    with pytest.raises(TypeError, match="unexpected keyword argument 'fused'"):
        getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], fused=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'fused'"):
        getattr(optim, name)([nn.Parameter(plast.ones(2))], fused=True)


@pytest.mark.parametrize("name", sorted(OPS))
def test_state_dict_round_trip_continues_the_same_trajectory(name):
    rng, pp, _ = twin_params(np.float64, seed=9)
    qq = [nn.Parameter(p.detach().clone()) for p in pp]
    a = getattr(optim, name)(_groups(name, pp))
    grads = [[rng.standard_normal(p.shape) for p in pp] for _ in range(6)]
    for gs in grads[:3]:
        for p, g in zip(pp, gs):
            p.grad = plast.tensor(g)
        a.step()
    with plast.no_grad():
        for q, p in zip(qq, pp):
            q.copy_(p)
    b = getattr(optim, name)(_groups(name, qq))
    b.load_state_dict(a.state_dict())
    for gs in grads[3:]:
        for p, q, g in zip(pp, qq, gs):
            p.grad, q.grad = plast.tensor(g), plast.tensor(g)
        a.step()
        b.step()
    for p, q in zip(pp, qq):
        if name == "NAdam":
            # load_state_dict casts mu_product (float32, the default dtype) to the parameter's float64, as torch's
            # does; the product then rounds differently
            assert b.state[q]["mu_product"].dtype == plast.float64
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-9)
        else:
            np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
