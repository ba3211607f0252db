"""plast.optim against torch.optim: trajectories over many steps with a changing learning rate, state dicts,
parameter groups, validation; schedulers' learning-rate sequences."""

import numpy as np
import pytest
import torch
from optim_helpers import TOL, twin_params

import plast
import plast.nn as nn
import plast.optim as optim
from plast.optim import lr_scheduler as plr


def _run(popt, topt, pp, tp, rng, dtype, steps, psched=None, tsched=None, skip=None):
    for step in range(steps):
        for i, (p, t) in enumerate(zip(pp, tp)):
            if skip is not None and skip(step, i):
                p.grad, t.grad = None, None
                continue
            g = rng.standard_normal(p.shape).astype(dtype)
            p.grad, t.grad = plast.tensor(g), torch.tensor(g)
        popt.step()
        topt.step()
        if psched is not None:
            psched.step()
            tsched.step()
    for p, t in zip(pp, tp):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), **TOL[dtype])


SGD_CASES = [
    dict(),
    dict(momentum=0.9),
    dict(momentum=0.9, nesterov=True),
    dict(momentum=0.9, dampening=0.5),
    dict(weight_decay=1e-2),
    dict(momentum=0.8, weight_decay=1e-2, nesterov=True),
    dict(momentum=0.5, maximize=True),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "case", SGD_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "plain"
)
def test_sgd_trajectory_with_scheduler(case, dtype):
    rng, pp, tp = twin_params(dtype)
    popt, topt = optim.SGD(pp, lr=0.05, **case), torch.optim.SGD(tp, lr=0.05, **case)
    ps = plr.CosineAnnealingLR(popt, T_max=20, eta_min=1e-3)
    ts = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=20, eta_min=1e-3)
    _run(popt, topt, pp, tp, rng, dtype, 50, ps, ts)
    if case.get("momentum"):
        for p, t in zip(pp, tp):
            np.testing.assert_allclose(
                popt.state[p]["momentum_buffer"].numpy(),
                topt.state[t]["momentum_buffer"].numpy(),
                **TOL[dtype],
            )


ADAM_CASES = [
    ("Adam", dict()),
    ("Adam", dict(weight_decay=1e-2)),
    ("Adam", dict(amsgrad=True)),
    ("Adam", dict(betas=(0.8, 0.95), eps=1e-6, maximize=True)),
    ("AdamW", dict()),
    ("AdamW", dict(amsgrad=True, weight_decay=0.1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,case", ADAM_CASES, ids=lambda c: c if isinstance(c, str) else str(c))
def test_adam_trajectory_with_scheduler(name, case, dtype):
    rng, pp, tp = twin_params(dtype, seed=1)
    popt, topt = getattr(optim, name)(pp, lr=1e-2, **case), getattr(torch.optim, name)(tp, lr=1e-2, **case)
    ps = plr.StepLR(popt, step_size=7, gamma=0.5)
    ts = torch.optim.lr_scheduler.StepLR(topt, step_size=7, gamma=0.5)
    _run(popt, topt, pp, tp, rng, dtype, 50, ps, ts)
    for p, t in zip(pp, tp):
        ps_, ts_ = popt.state[p], topt.state[t]
        assert list(ps_) == list(ts_) and ps_["step"].item() == ts_["step"].item() == 50
        for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            if k in ts_:
                np.testing.assert_allclose(ps_[k].numpy(), ts_[k].numpy(), **TOL[dtype])


def test_params_without_grad_are_skipped():
    rng, pp, tp = twin_params(np.float32, seed=2)
    popt, topt = optim.Adam(pp, lr=1e-2), torch.optim.Adam(tp, lr=1e-2)
    # parameter 1 gets no gradient on even steps; parameter 3 never
    _run(popt, topt, pp, tp, rng, np.float32, 20, skip=lambda s, i: i == 3 or (i == 1 and s % 2 == 0))
    assert pp[3] not in popt.state and popt.state[pp[1]]["step"].item() == 10
    rng, pp, tp = twin_params(np.float32, seed=3)
    popt, topt = (
        optim.SGD(pp, lr=0.1, momentum=0.9, dampening=0.2),
        torch.optim.SGD(tp, lr=0.1, momentum=0.9, dampening=0.2),
    )
    _run(popt, topt, pp, tp, rng, np.float32, 20, skip=lambda s, i: i == 0 and s < 5)


def test_param_groups_and_one_fused_call(monkeypatch):
    rng, pp, tp = twin_params(np.float32, seed=4)
    popt = optim.Adam([{"params": pp[:2]}, {"params": pp[2:], "lr": 1e-3, "weight_decay": 0.1}], lr=1e-2)
    topt = torch.optim.Adam(
        [{"params": tp[:2]}, {"params": tp[2:], "lr": 1e-3, "weight_decay": 0.1}], lr=1e-2
    )
    calls = []
    real = plast.adam_update_
    monkeypatch.setattr(plast, "adam_update_", lambda *a, **k: (calls.append(len(a[0])), real(*a, **k)))
    monkeypatch.setenv("PLAST_PLAN_CACHE", "0")  # no eager replays: every step gathers and calls again
    _run(popt, topt, pp, tp, rng, np.float32, 15)
    assert calls == [4] * 15  # every parameter of both groups in one call per step
    # with replays, the first step's single call is the one replayed
    monkeypatch.delenv("PLAST_PLAN_CACHE")
    calls.clear()
    _run(popt, topt, pp, tp, rng, np.float32, 5)
    assert calls == [4] and len(popt._replay) == 1 and popt._replay.runs == 4
    assert [g["lr"] for g in popt.param_groups] == [1e-2, 1e-3]
    extra = nn.Parameter(plast.ones(2))
    popt.add_param_group({"params": extra, "betas": (0.5, 0.5)})
    assert popt.param_groups[2]["eps"] == 1e-8 and popt.param_groups[2]["params"] == [extra]
    with pytest.raises(ValueError, match="more than one parameter group"):
        popt.add_param_group({"params": [pp[0]]})


def test_hyper_tensor_follows_group_lr_without_new_tensors():
    w = nn.Parameter(plast.zeros(2))
    opt = optim.SGD([w], lr=1.0)
    w.grad = plast.ones(2)
    opt.step()
    h = opt._hyper(opt.param_groups[0])
    opt.param_groups[0]["lr"] = 0.25
    opt.step()
    assert opt._hyper(opt.param_groups[0]) is h and h.tolist()[0] == 0.25
    assert w.tolist() == [-1.25, -1.25]


def test_zero_grad_and_closure():
    w = nn.Parameter(plast.tensor([1.0, 2.0]))
    opt = optim.SGD([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with plast.no_grad():
        loss = opt.step(closure)  # closure runs with grad enabled
    assert loss.item() == 5.0
    np.testing.assert_allclose(w.numpy(force=True), [0.8, 1.6], rtol=1e-6)
    opt.zero_grad(set_to_none=False)
    assert w.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def test_state_dict_format_and_resume_matches_torch():
    rng, pp, tp = twin_params(np.float32, seed=5)
    popt, topt = optim.Adam(pp, lr=1e-2, amsgrad=True), torch.optim.Adam(tp, lr=1e-2, amsgrad=True)
    _run(popt, topt, pp, tp, rng, np.float32, 5)
    psd, tsd = popt.state_dict(), topt.state_dict()
    assert psd["param_groups"] == tsd["param_groups"]
    assert list(psd["state"]) == list(tsd["state"]) == [0, 1, 2, 3]
    assert all(list(psd["state"][i]) == list(tsd["state"][i]) for i in range(4))
    # a fresh plast optimizer loading the torch state continues exactly like torch
    pp2 = [nn.Parameter(p.detach().clone()) for p in pp]
    popt2 = optim.Adam(pp2, lr=0.5)
    conv = {
        "state": {i: {k: plast.tensor(v.numpy()) for k, v in s.items()} for i, s in tsd["state"].items()},
        "param_groups": tsd["param_groups"],
    }
    popt2.load_state_dict(conv)
    assert popt2.param_groups[0]["lr"] == 1e-2 and popt2.param_groups[0]["params"] == pp2
    assert popt2.state[pp2[0]]["step"].dtype == plast.float64
    _run(popt2, topt, pp2, tp, rng, np.float32, 10)
    # round trip of plast's own state dict (copied, so the two optimizers don't share state)
    popt3 = optim.Adam([nn.Parameter(p.detach().clone()) for p in pp2], lr=0.5)
    popt3.load_state_dict(popt2.state_dict())
    assert (
        popt3.state[popt3.param_groups[0]["params"][0]]["exp_avg"]._storage
        is not popt2.state[pp2[0]]["exp_avg"]._storage
    )
    with pytest.raises(ValueError, match="different number of parameter groups"):
        popt3.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="doesn't match the size"):
        popt3.load_state_dict({"state": {}, "param_groups": [{"params": [0]}]})


def test_sgd_state_dict_resume_keeps_momentum():
    rng, pp, tp = twin_params(np.float64, seed=6)
    popt = optim.SGD(pp, lr=0.1, momentum=0.9, dampening=0.3)
    topt = torch.optim.SGD(tp, lr=0.1, momentum=0.9, dampening=0.3)
    _run(popt, topt, pp, tp, rng, np.float64, 4)
    assert popt.state_dict()["param_groups"] == topt.state_dict()["param_groups"]
    popt2 = optim.SGD(pp, lr=0.1, momentum=0.9, dampening=0.3)
    popt2.load_state_dict(popt.state_dict())
    _run(popt2, topt, pp, tp, rng, np.float64, 6)


def test_validation_matches_torch():
    w = [nn.Parameter(plast.ones(1))]
    for kw, msg in [
        (dict(lr=-1), "Invalid learning rate"),
        (dict(momentum=-1), "Invalid momentum"),
        (dict(weight_decay=-1), "Invalid weight_decay"),
        (dict(nesterov=True), "Nesterov momentum"),
    ]:
        with pytest.raises(ValueError, match=msg):
            optim.SGD(w, **kw)
    for kw, msg in [
        (dict(lr=-1), "Invalid learning rate"),
        (dict(eps=-1), "Invalid epsilon"),
        (dict(betas=(1.0, 0.9)), "index 0"),
        (dict(betas=(0.9, -0.1)), "index 1"),
        (dict(weight_decay=-1), "Invalid weight_decay"),
    ]:
        with pytest.raises(ValueError, match=msg):
            optim.Adam(w, **kw)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(w[0], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": set(w)}], lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        optim.SGD([1.0], lr=0.1)
    x = plast.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([x * 2], lr=0.1)
    with pytest.raises(ValueError, match="duplicate"):
        optim.SGD([w[0], w[0]], lr=0.1)
    assert repr(optim.Adam(w)) == repr(torch.optim.Adam([torch.nn.Parameter(torch.ones(1))]))
    assert repr(optim.SGD(w, lr=0.1)) == repr(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1))


def test_training_a_model_matches_torch_float64():
    """End to end: same model, same data, same losses over 30 Adam steps (gradients from each framework)."""
    pm = nn.Sequential(nn.Linear(3, 8, dtype=plast.float64), nn.Tanh(), nn.Linear(8, 1, dtype=plast.float64))
    tm = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in pm.state_dict().items()})
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((16, 3)), rng.standard_normal((16, 1))
    popt, topt = optim.AdamW(pm.parameters(), lr=3e-2), torch.optim.AdamW(tm.parameters(), lr=3e-2)
    ps = plr.LinearLR(popt, start_factor=0.2, total_iters=10)
    ts = torch.optim.lr_scheduler.LinearLR(topt, start_factor=0.2, total_iters=10)
    for _ in range(30):
        popt.zero_grad()
        topt.zero_grad()
        pl = nn.MSELoss()(pm(plast.tensor(x)), plast.tensor(y))
        tl = torch.nn.MSELoss()(tm(torch.tensor(x)), torch.tensor(y))
        pl.backward()
        tl.backward()
        popt.step()
        topt.step()
        ps.step()
        ts.step()
        np.testing.assert_allclose(pl.item(), tl.item(), rtol=1e-10)
        plast.reset_transient_arenas()


# ---- schedulers ----


def _sched_pair(make_p, make_t, groups=2):
    pw = [nn.Parameter(plast.ones(1)) for _ in range(groups)]
    tw = [torch.nn.Parameter(torch.ones(1)) for _ in range(groups)]
    lrs = [0.1 * (i + 1) for i in range(groups)]
    popt = optim.SGD([{"params": [w], "lr": lr} for w, lr in zip(pw, lrs)], lr=0.1)
    topt = torch.optim.SGD([{"params": [w], "lr": lr} for w, lr in zip(tw, lrs)], lr=0.1)
    return popt, topt, make_p(popt), make_t(topt)


SCHEDS = [
    ("StepLR", lambda o, m: m.StepLR(o, step_size=3, gamma=0.5)),
    ("MultiStepLR", lambda o, m: m.MultiStepLR(o, milestones=[7, 2, 11, 11], gamma=0.3)),
    ("ExponentialLR", lambda o, m: m.ExponentialLR(o, gamma=0.9)),
    ("CosineAnnealingLR", lambda o, m: m.CosineAnnealingLR(o, T_max=10, eta_min=0.01)),
    ("LinearLR", lambda o, m: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=8)),
    ("LambdaLR", lambda o, m: m.LambdaLR(o, lambda e: 1 / (1 + e))),
    ("LambdaLR-per-group", lambda o, m: m.LambdaLR(o, [lambda e: 0.9**e, lambda e: 1 + e % 3])),
    (
        "SequentialLR",
        lambda o, m: m.SequentialLR(
            o,
            [m.LinearLR(o, start_factor=0.1, total_iters=5), m.CosineAnnealingLR(o, T_max=15)],
            milestones=[5],
        ),
    ),
    (
        "SequentialLR-3",
        lambda o, m: m.SequentialLR(
            o,
            [
                m.ConstantLR(o, factor=0.5, total_iters=2),
                m.ExponentialLR(o, gamma=0.8),
                m.StepLR(o, step_size=4),
            ],
            milestones=[3, 9],
        ),
    ),
]


@pytest.mark.parametrize("name,make", SCHEDS, ids=lambda v: v if isinstance(v, str) else None)
def test_scheduler_lr_sequence_matches_torch(name, make):
    popt, topt, ps, ts = _sched_pair(lambda o: make(o, plr), lambda o: make(o, torch.optim.lr_scheduler))
    seq_p, seq_t = [], []
    for _ in range(40):
        seq_p.append(list(ps.get_last_lr()) + [g["lr"] for g in popt.param_groups])
        seq_t.append(list(ts.get_last_lr()) + [g["lr"] for g in topt.param_groups])
        popt.step()
        topt.step()
        ps.step()
        ts.step()
    np.testing.assert_allclose(np.array(seq_p), np.array(seq_t), rtol=1e-10, atol=1e-14)
    assert ps.last_epoch == ts.last_epoch


def test_scheduler_state_dict_round_trip():
    popt, _, ps, _ = _sched_pair(lambda o: plr.CosineAnnealingLR(o, T_max=10), lambda o: None)
    for _ in range(4):
        ps.step()
    sd = ps.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4
    popt2, _, ps2, _ = _sched_pair(lambda o: plr.CosineAnnealingLR(o, T_max=10), lambda o: None)
    ps2.load_state_dict(sd)
    ps.step()
    ps2.step()
    assert ps.get_last_lr() == ps2.get_last_lr()
    lam = plr.LambdaLR(popt, lambda e: 0.5)
    assert lam.state_dict()["lr_lambdas"] == [None, None]
    seq_opt, _, seq, _ = _sched_pair(
        lambda o: plr.SequentialLR(o, [plr.ExponentialLR(o, 0.5), plr.StepLR(o, 2)], milestones=[3]),
        lambda o: None,
    )
    for _ in range(5):
        seq.step()
    sd = seq.state_dict()
    assert len(sd["_schedulers"]) == 2
    seq.load_state_dict(sd)


def test_scheduler_validation():
    opt = optim.SGD([nn.Parameter(plast.ones(1))], lr=0.1)
    with pytest.raises(TypeError, match="not an Optimizer"):
        plr.StepLR(object(), 3)
    with pytest.raises(KeyError, match="initial_lr"):
        plr.StepLR(opt, 3, last_epoch=5)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        plr.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas"):
        plr.LambdaLR(opt, [lambda e: 1, lambda e: 2])
    with pytest.raises(ValueError, match="number of milestone"):
        plr.SequentialLR(opt, [plr.StepLR(opt, 2)], milestones=[3])
