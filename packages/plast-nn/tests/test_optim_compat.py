"""Adadelta, Adagrad, Adamax, NAdam, RAdam and LBFGS against torch.optim: trajectories from the same init (a
small model trained 20 steps, and 30 steps of given gradients with a scheduler), every option torch has, state
keys and values, state dicts, param groups; the scheduler aliases plast.optim.StepLR etc."""

import numpy as np
import pytest
import torch
from optim_helpers import TOL, twin_params

import plast
import plast.nn as nn
import plast.optim as optim
from plast.optim import lr_scheduler as plr

CASES = [
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1)),
    ("Adadelta", dict(maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.05, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.3, eps=1e-8)),
    ("Adagrad", dict(maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)),
    ("Adamax", dict(maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, betas=(0.8, 0.95), weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1)),
    ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict(betas=(0.9, 0.5))),  # rho_t > 5 from the first steps: the rectified branch at once
]


def _ids(c):
    return c if isinstance(c, str) else ",".join(f"{k}={v}" for k, v in c.items()) or "defaults"


def _twin_models(dtype):
    # NOTE: a fixed init. Early Adam-like steps are nearly sign(g): a gradient component within round-off of 0
    # can take either sign in two engines, so some inits amplify 1e-7 gradient differences to 1e-5 in a few
    # weights; a fixed init makes the comparison reproducible
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    tm = tm.to(torch.float64 if dtype == np.float64 else torch.float32)
    pm = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    pm.load_state_dict({k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return pm, tm


def _rel(a, b):
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


@pytest.mark.parametrize("name,kw", CASES, ids=_ids)
def test_small_model_20_steps_matches_torch(name, kw):
    pm, tm = _twin_models(np.float32)
    popt, topt = (
        getattr(optim, name)(pm.parameters(), **kw),
        getattr(torch.optim, name)(tm.parameters(), **kw),
    )
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 4)).astype(np.float32), rng.standard_normal((16, 3)).astype(np.float32)
    px, py, tx, ty = plast.tensor(x), plast.tensor(y), torch.tensor(x), torch.tensor(y)
    for _ in range(20):
        popt.zero_grad()
        topt.zero_grad()
        plast.mse_loss(pm(px), py).backward()
        torch.nn.functional.mse_loss(tm(tx), ty).backward()
        popt.step()
        topt.step()
    for (n, p), t in zip(pm.named_parameters(), tm.parameters()):
        a, b = p.detach().numpy(), t.detach().numpy()
        assert _rel(a, b) <= 1e-6, (n, _rel(a, b))
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kw", CASES, ids=_ids)
def test_given_gradients_with_scheduler_match_torch(name, kw, dtype):
    rng, pp, tp = twin_params(dtype, seed=3)
    popt, topt = getattr(optim, name)(pp, **kw), getattr(torch.optim, name)(tp, **kw)
    ps = optim.StepLR(popt, step_size=7, gamma=0.5)  # the alias is lr_scheduler's class
    ts = torch.optim.lr_scheduler.StepLR(topt, step_size=7, gamma=0.5)
    for step in range(30):
        for i, (p, t) in enumerate(zip(pp, tp)):
            if i == 1 and step % 3 == 0:  # a parameter without a gradient now and then is skipped
                p.grad, t.grad = None, None
                continue
            g = rng.standard_normal(p.shape).astype(dtype)
            p.grad, t.grad = plast.tensor(g), torch.tensor(g)
        popt.step()
        topt.step()
        ps.step()
        ts.step()
    for p, t in zip(pp, tp):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), **TOL[dtype])
        pst, tst = popt.state[p], topt.state[t]
        assert list(pst) == list(tst)
        for k, v in tst.items():
            pv = pst[k]
            if k == "step":
                assert pv.item() == v.item()
            else:
                np.testing.assert_allclose(pv.numpy(), v.numpy(), **TOL[dtype])


@pytest.mark.parametrize("name,kw", CASES[::3], ids=_ids)
def test_state_dict_from_torch_continues_the_trajectory(name, kw):
    rng, pp, tp = twin_params(np.float64, seed=4)
    topt = getattr(torch.optim, name)(tp, **kw)
    for _ in range(5):
        for t in tp:
            t.grad = torch.tensor(rng.standard_normal(t.shape))
        topt.step()
    with plast.no_grad():
        for p, t in zip(pp, tp):
            p.copy_(plast.tensor(t.detach().numpy()))
    popt = getattr(optim, name)(pp, **kw)
    sd = topt.state_dict()
    popt.load_state_dict(
        {
            "state": {
                i: {k: plast.tensor(v.numpy()) for k, v in st.items()} for i, st in sd["state"].items()
            },
            "param_groups": sd["param_groups"],
        }
    )
    own = popt.state_dict()
    assert own["param_groups"] == sd["param_groups"]
    assert {i: list(s) for i, s in own["state"].items()} == {i: list(s) for i, s in sd["state"].items()}
    for _ in range(5):
        for p, t in zip(pp, tp):
            g = rng.standard_normal(p.shape)
            p.grad, t.grad = plast.tensor(g), torch.tensor(g)
        popt.step()
        topt.step()
    for p, t in zip(pp, tp):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), **TOL[np.float64])


def test_defaults_and_groups_match_torch():
    w = [nn.Parameter(plast.ones(2)), nn.Parameter(plast.ones(3))]
    tw = [torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(3))]
    for name in ("Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam", "LBFGS"):
        p = getattr(optim, name)(w)
        t = getattr(torch.optim, name)(tw)
        pd, td = p.defaults, t.defaults
        assert set(pd) <= set(td) | {"capturable"} and {k: pd[k] for k in pd if k in td} == {
            k: td[k] for k in pd if k in td
        }, name
    popt = optim.RAdam([{"params": w[:1]}, {"params": w[1:], "lr": 0.1}])
    topt = torch.optim.RAdam([{"params": tw[:1]}, {"params": tw[1:], "lr": 0.1}])
    assert [g["lr"] for g in popt.param_groups] == [g["lr"] for g in topt.param_groups]
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.Adamax(w, lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        optim.NAdam(w, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid rho value"):
        optim.Adadelta(w, rho=1.5)
    with pytest.raises(ValueError, match="per-parameter options"):
        optim.LBFGS([{"params": w[:1]}, {"params": w[1:]}])
    with pytest.raises(NotImplementedError, match="differentiable"):
        optim.RAdam(w, differentiable=True)


def test_scheduler_aliases_are_the_lr_scheduler_classes():
    for n in plr.__all__:
        assert getattr(optim, n) is getattr(plr, n)
    for n in ("StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR", "OneCycleLR"):
        assert n in optim.__all__


def _rosenbrock_pair(dtype):
    init = np.array([-1.5, 2.0], dtype=dtype)
    return nn.Parameter(plast.tensor(init)), torch.nn.Parameter(torch.tensor(init))


def _rosen(v, lib):
    return (1 - v[0]) ** 2 + 100 * (v[1] - v[0] ** 2) ** 2


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
@pytest.mark.parametrize("kw", [dict(), dict(lr=0.5, history_size=3, max_iter=7)], ids=_ids)
def test_lbfgs_matches_torch(line_search, kw):
    lr = kw.get("lr", 1.0 if line_search else 1e-3)
    kw = dict(kw, lr=lr)
    pw, tw = _rosenbrock_pair(np.float64)
    popt = optim.LBFGS([pw], line_search_fn=line_search, **kw)
    topt = torch.optim.LBFGS([tw], line_search_fn=line_search, **kw)

    def pclosure():
        popt.zero_grad()
        loss = _rosen(pw, plast)
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = _rosen(tw, torch)
        loss.backward()
        return loss

    for _ in range(4):
        pl, tl = popt.step(pclosure), topt.step(tclosure)
        np.testing.assert_allclose(pl.item(), tl.item(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(pw.detach().numpy(), tw.detach().numpy(), rtol=1e-9, atol=1e-12)
    ps, ts = popt.state[pw], topt.state[tw]
    assert set(ps) == set(ts)
    assert ps["func_evals"] == ts["func_evals"] and ps["n_iter"] == ts["n_iter"]
    assert len(ps["old_dirs"]) == len(ts["old_dirs"])


def test_lbfgs_trains_a_small_model_like_torch():
    pm, tm = _twin_models(np.float32)
    popt = optim.LBFGS(pm.parameters(), lr=0.5, max_iter=5, line_search_fn="strong_wolfe")
    topt = torch.optim.LBFGS(tm.parameters(), lr=0.5, max_iter=5, line_search_fn="strong_wolfe")
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((16, 4)).astype(np.float32), rng.standard_normal((16, 3)).astype(np.float32)

    def closure(opt, m, lib, xx, yy):
        def f():
            opt.zero_grad()
            loss = ((m(xx) - yy) ** 2).mean()
            loss.backward()
            return loss

        return f

    pf = closure(popt, pm, plast, plast.tensor(x), plast.tensor(y))
    tf = closure(topt, tm, torch, torch.tensor(x), torch.tensor(y))
    first = None
    for _ in range(3):
        pl, tl = popt.step(pf), topt.step(tf)
        first = first or pl.item()
        np.testing.assert_allclose(pl.item(), tl.item(), rtol=1e-4)
    assert pf().item() < first
    for p, t in zip(pm.parameters(), tm.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ["Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_jitted_steps_equal_eager_steps(name):
    # learning rate and step counts are read at run time: a replayed plan follows the scheduler's changes
    def train(jit):
        pm, _ = _twin_models(np.float32)
        opt = getattr(optim, name)(pm.parameters(), lr=1e-2, weight_decay=0.01)
        sched = optim.StepLR(opt, 3, 0.5)

        def step(x, y):
            opt.zero_grad()
            loss = plast.mse_loss(pm(x), y)
            loss.backward()
            opt.step()
            return loss

        f = plast.jit(step) if jit else step
        rng = np.random.default_rng(2)
        x = plast.tensor(rng.standard_normal((16, 4)).astype(np.float32))
        y = plast.tensor(rng.standard_normal((16, 3)).astype(np.float32))
        losses = []
        for _ in range(8):
            losses.append(f(x, y).item())
            sched.step()
        return losses, [p.detach().numpy().copy() for p in pm.parameters()]

    (le, pe), (lj, pj) = train(False), train(True)
    np.testing.assert_allclose(lj, le, rtol=1e-6)
    for a, b in zip(pj, pe):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def _to_plast(v):
    if isinstance(v, torch.Tensor):
        return plast.tensor(v.detach().numpy())
    if isinstance(v, list):
        return [_to_plast(x) for x in v]
    return v


@pytest.mark.parametrize("source", ["plast", "torch"])
def test_lbfgs_state_dict_round_trip(source):
    pw, tw = _rosenbrock_pair(np.float64)
    popt = optim.LBFGS([pw], history_size=5, max_iter=4)
    topt = torch.optim.LBFGS([tw], history_size=5, max_iter=4)

    def closure(opt, w):
        def f():
            opt.zero_grad()
            loss = _rosen(w, None)
            loss.backward()
            return loss

        return f

    for _ in range(2):
        popt.step(closure(popt, pw))
        topt.step(closure(topt, tw))
    sd = popt.state_dict()
    if source == "torch":
        tsd = topt.state_dict()
        sd = {
            "state": {i: {k: _to_plast(v) for k, v in st.items()} for i, st in tsd["state"].items()},
            "param_groups": tsd["param_groups"],
        }
    w2 = nn.Parameter(plast.tensor(pw.detach().numpy()))
    opt2 = optim.LBFGS([w2], history_size=5, max_iter=4)
    opt2.load_state_dict(sd)
    for _ in range(2):
        popt.step(closure(popt, pw))
        opt2.step(closure(opt2, w2))
        topt.step(closure(topt, tw))
    np.testing.assert_allclose(w2.detach().numpy(), pw.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(w2.detach().numpy(), tw.detach().numpy(), rtol=1e-9)
