"""Eager optimizer replays (optim/optimizer.py, core's graph/_mutation.UpdateReplay): after the first eager step,
an optimizer hands each step's gradients to the fused calls it recorded, as long as nothing they were built from
changed. Every test here checks the replayed trajectory against torch.optim or against plast with replays off
(PLAST_PLAN_CACHE=0), bit for bit, and that the replay really ran or was really dropped."""

import gc

import numpy as np
import pytest
import torch
from optim_helpers import twin_params

import plast
import plast.nn as nn
import plast.optim as optim
from plast.kernels.cpu import _optim as cpu_optim

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=1e-2)),
    ("RMSprop", dict(lr=1e-2, momentum=0.5, centered=True)),
]


def _grads(rng, pp, tp, dtype=np.float32, skip=()):
    for i, (p, t) in enumerate(zip(pp, tp)):
        if i in skip:
            p.grad, t.grad = None, None
            continue
        g = rng.standard_normal(p.shape).astype(dtype)
        p.grad, t.grad = plast.tensor(g), torch.tensor(g)


def _same(pp, tp):
    for p, t in zip(pp, tp):
        np.testing.assert_array_equal(p.detach().numpy(), t.detach().numpy())


def _train(name, kw, steps, seed=0):
    """A small model trained `steps` steps with forward, backward and the optimizer; its parameters and the
    optimizer (with its replay, if any)."""
    plast.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = getattr(optim, name)(model.parameters(), **kw)
    rng = np.random.default_rng(seed)
    x = plast.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    y = plast.tensor(rng.standard_normal((5, 2)).astype(np.float32))
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        plast.reset_transient_arenas()
    return [p.detach().numpy().copy() for p in model.parameters()], opt


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_replayed_training_is_bit_identical(name, kw, monkeypatch):
    replayed, opt = _train(name, kw, 12)
    assert opt._replay is not None and opt._replay.runs == 11  # every step after the first
    monkeypatch.setenv("PLAST_PLAN_CACHE", "0")
    plain, opt0 = _train(name, kw, 12)
    assert opt0._replay is None
    for a, b in zip(replayed, plain):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_replay_matches_torch_with_a_scheduler(name, kw):
    rng, pp, tp = twin_params(np.float64)
    popt = getattr(optim, name)(pp, **kw)
    topt = getattr(torch.optim, name)(tp, **kw)
    ps = optim.lr_scheduler.StepLR(popt, step_size=2, gamma=0.5)
    ts = torch.optim.lr_scheduler.StepLR(topt, step_size=2, gamma=0.5)
    for _ in range(8):
        _grads(rng, pp, tp, np.float64)
        popt.step()
        topt.step()
        ps.step()
        ts.step()
    # the learning rate changed every other step and the replay followed it (the hyperparameter tensor)
    assert popt._replay.runs == 7
    for p, t in zip(pp, tp):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_plans_are_reused_across_eager_steps():
    _, opt = _train("Adam", dict(lr=1e-2), 3)
    built = cpu_optim.stats()["plans_built"]
    model_params = [p for g in opt.param_groups for p in g["params"]]
    for _ in range(5):
        for p in model_params:
            p.grad = plast.ones(p.shape)  # new gradients each step, in blocks the arena hands out again
        opt.step()
    assert cpu_optim.stats()["plans_built"] == built  # the packed table was re-pointed, not rebuilt
    assert opt._replay.runs == 7


def test_changes_that_drop_the_replay_match_torch():
    rng, pp, tp = twin_params(np.float64)
    popt = optim.SGD(pp, lr=0.1)
    topt = torch.optim.SGD(tp, lr=0.1)

    def step(skip=()):
        _grads(rng, pp, tp, np.float64, skip)
        popt.step()
        topt.step()
        _same(pp, tp)

    step()
    step()
    r = popt._replay
    assert r.runs == 1
    # momentum turns on: the calls now carry momentum buffers
    for g in (popt.param_groups[0], topt.param_groups[0]):
        g["momentum"] = 0.9
    step()
    assert popt._replay is not r and popt._replay.runs == 0
    step()
    assert popt._replay.runs == 1
    # an option outside the hyperparameter tensor
    for g in (popt.param_groups[0], topt.param_groups[0]):
        g["nesterov"] = True
    r = popt._replay
    step()
    assert popt._replay is not r
    # a parameter without a gradient this step, then with one again
    step(skip=(1,))
    step()
    step()
    # a state entry replaced by hand
    with plast.no_grad():
        popt.state[pp[0]]["momentum_buffer"] = plast.zeros(pp[0].shape, dtype=plast.float64)
    topt.state[tp[0]]["momentum_buffer"] = torch.zeros(tp[0].shape, dtype=torch.float64)
    r = popt._replay
    step()
    assert popt._replay is not r
    # a parameter added to a group's list by hand, and a new group
    extra_p, extra_t = (
        nn.Parameter(plast.ones(3, dtype=plast.float64)),
        torch.nn.Parameter(torch.ones(3, dtype=torch.float64)),
    )
    popt.param_groups[0]["params"].append(extra_p)
    topt.param_groups[0]["params"].append(extra_t)
    pp.append(extra_p)
    tp.append(extra_t)
    step()
    step()
    more_p, more_t = (
        nn.Parameter(plast.ones(2, dtype=plast.float64)),
        torch.nn.Parameter(torch.ones(2, dtype=torch.float64)),
    )
    popt.add_param_group({"params": [more_p], "lr": 0.5})
    topt.add_param_group({"params": [more_t], "lr": 0.5})
    pp.append(more_p)
    tp.append(more_t)
    step()
    step()
    # a state dict loaded mid-run
    popt.load_state_dict(popt.state_dict())
    assert popt._replay is None
    step()
    step()
    assert popt._replay.runs == 1


def test_replay_keeps_mutation_semantics():
    w = nn.Parameter(plast.ones(3))
    opt = optim.SGD([w], lr=1.0)
    for _ in range(2):
        w.grad = plast.ones(3)
        opt.step()
    assert opt._replay.runs == 1
    # a read of the old value that was recorded and not computed yet is computed before the update
    with plast.no_grad():
        before = w * 2
    w.grad = plast.ones(3)
    opt.step()
    assert opt._replay.runs == 2
    assert before.tolist() == [-2.0, -2.0, -2.0] and w.tolist() == [-2.0, -2.0, -2.0]
    # a backward that needs the overwritten value is refused, as in torch
    loss = (w * w).sum()
    w.grad = plast.ones(3)
    opt.step()
    assert opt._replay.runs == 3
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        loss.backward()


def _linear_adam_step():
    """A Linear layer, its Adam and one training step of it on a fixed input (seeded: equal each call)."""
    plast.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    x = plast.randn(4, 3)

    def step(x=x):
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    return model, opt, step


def test_replay_hands_over_to_jit_and_back(monkeypatch):
    model, opt, step = _linear_adam_step()
    for _ in range(3):
        step()
    assert opt._replay.runs == 2
    jitted = plast.jit(step)
    for _ in range(3):
        jitted()
    step()  # eager again: a fresh recording
    step()
    assert opt._replay.runs == 1
    # the same eight steps without any replay
    monkeypatch.setenv("PLAST_PLAN_CACHE", "0")
    ref, _, ref_step = _linear_adam_step()
    for _ in range(8):
        ref_step()
    for a, b in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_dropped_optimizer_frees_its_state_at_once():
    gc.collect()
    gc.disable()
    try:
        w = nn.Parameter(plast.ones(4096))
        opt = optim.Adam([w], lr=1e-3)
        for _ in range(3):
            w.grad = plast.ones(4096)
            opt.step()
        assert opt._replay.runs == 2
        w.grad = None
        before = plast.arena_stats()["cpu"]["persistent"]["in_use_bytes"]
        del opt
        # exp_avg and exp_avg_sq (16 KiB each) went back to the arena without the garbage collector
        assert plast.arena_stats()["cpu"]["persistent"]["in_use_bytes"] <= before - 2 * 4096 * 4
    finally:
        gc.enable()
