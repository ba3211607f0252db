"""plast.optim.DiLoCo as N replicas in one process (no MPI): the pseudo-gradient's sign on a model where the
answer is known, the outer Nesterov step against a DiLoCo written with torch.optim (the oracle), H=1 with outer
lr 1 and no momentum as plain data parallelism, and a checkpoint that resumes exactly. The MPI-rank form is
checked against DDP in test_ddp.py."""

import copy

import numpy as np
import pytest
import torch

import plast
import plast.nn as nn
import plast.optim as optim


def test_pseudo_gradient_points_against_the_descent():
    # loss = -w: the inner SGD step moves w from 0 to +0.1, so the pseudo-gradient (global - local) is -0.1, a
    # gradient in the usual sense, and the outer step (lr 1, no momentum) moves the global copy to +0.1
    w = nn.Parameter(plast.zeros(1))
    opt = optim.DiLoCo([w], optim.SGD([w], lr=0.1), inner_steps=1, outer_lr=1.0, outer_momentum=0.0)
    (-w).sum().backward()
    opt.inner[0].step()
    (delta,) = opt.pseudo_gradients()[0]
    np.testing.assert_allclose(delta.numpy(), [-0.1], rtol=1e-6)
    opt.outer_step()
    np.testing.assert_allclose(opt.global_params[0].detach().numpy(), [0.1], rtol=1e-6)
    np.testing.assert_allclose(w.detach().numpy(), [0.1], rtol=1e-6)


def _replicas(n, seed=0):
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    b0 = rng.standard_normal(3).astype(np.float32)
    pl = [[nn.Parameter(plast.tensor(w0)), nn.Parameter(plast.tensor(b0))] for _ in range(n)]
    th = [[torch.nn.Parameter(torch.tensor(w0)), torch.nn.Parameter(torch.tensor(b0))] for _ in range(n)]
    data = [(rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32))
            for _ in range(40)]  # fmt: skip
    return pl, th, data


def _loss_pl(ps, x, y):
    return ((plast.tensor(x) @ ps[0].t() + ps[1] - plast.tensor(y)) ** 2).mean()


def _loss_th(ps, x, y):
    return ((torch.tensor(x) @ ps[0].t() + ps[1] - torch.tensor(y)) ** 2).mean()


def _torch_diloco(replicas, data, H, outer_lr, momentum, steps):
    """DiLoCo written out with torch.optim: the oracle."""
    inner = [torch.optim.AdamW(ps, lr=1e-2) for ps in replicas]
    glob = [torch.nn.Parameter(p.detach().clone()) for p in replicas[0]]
    outer = torch.optim.SGD(glob, lr=outer_lr, momentum=momentum, nesterov=True)
    for step in range(steps):
        for r, (ps, opt) in enumerate(zip(replicas, inner)):
            x, y = data[(step * len(replicas) + r) % len(data)]
            opt.zero_grad()
            _loss_th(ps, x, y).backward()
            opt.step()
        if (step + 1) % H == 0:
            with torch.no_grad():
                for i, g in enumerate(glob):
                    g.grad = sum(g - ps[i] for ps in replicas) / len(replicas)
            outer.step()
            with torch.no_grad():
                for ps in replicas:
                    for p, g in zip(ps, glob):
                        p.copy_(g)
    return [g.detach().numpy() for g in glob]


def _plast_diloco(opt, replicas, data, steps, start=0):
    for step in range(start, steps):
        opt.zero_grad()
        for r, ps in enumerate(replicas):
            x, y = data[(step * len(replicas) + r) % len(data)]
            _loss_pl(ps, x, y).backward()
        opt.step()


def test_outer_nesterov_step_matches_torch():
    pl, th, data = _replicas(3)
    want = _torch_diloco(th, data, H=4, outer_lr=0.7, momentum=0.9, steps=12)
    opt = optim.DiLoCo(pl, [optim.AdamW(ps, lr=1e-2) for ps in pl], inner_steps=4)
    _plast_diloco(opt, pl, data, 12)
    for g, w in zip(opt.global_params, want):
        np.testing.assert_allclose(g.detach().numpy(), w, rtol=1e-5, atol=1e-6)
    for ps in pl:  # every replica holds the global copy after an outer step
        for p, w in zip(ps, want):
            np.testing.assert_allclose(p.detach().numpy(), w, rtol=1e-5, atol=1e-6)


def test_h1_outer_lr1_no_momentum_is_data_parallel_sgd():
    pl, _, data = _replicas(2)
    single = [nn.Parameter(p.detach().clone()) for p in pl[0]]
    sgd = optim.SGD(single, lr=0.1)
    opt = optim.DiLoCo(
        pl, [optim.SGD(ps, lr=0.1) for ps in pl], inner_steps=1, outer_lr=1.0, outer_momentum=0.0
    )
    for step in range(6):
        sgd.zero_grad()
        ((_loss_pl(single, *data[2 * step]) + _loss_pl(single, *data[2 * step + 1])) / 2).backward()
        sgd.step()
    _plast_diloco(opt, pl, data, 6)
    for p, q in zip(pl[1], single):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_state_dict_resumes_exactly():
    pl, _, data = _replicas(2)
    opt = optim.DiLoCo(pl, [optim.AdamW(ps, lr=1e-2) for ps in pl], inner_steps=3)
    _plast_diloco(opt, pl, data, 5)
    state = copy.deepcopy(opt.state_dict())  # (a state dict refers to live tensors, as torch's does)
    saved = [[p.detach().clone() for p in ps] for ps in pl]
    assert set(state) >= {"inner", "outer", "global_params", "local_step"} and state["local_step"] == 5
    _plast_diloco(opt, pl, data, 11, start=5)
    want = [p.detach().numpy().copy() for p in pl[0]]
    # a fresh DiLoCo over fresh parameters, loaded from the checkpoint, continues the same way
    pl2 = [[nn.Parameter(p.clone()) for p in ps] for ps in saved]
    opt2 = optim.DiLoCo(pl2, [optim.AdamW(ps, lr=1e-2) for ps in pl2], inner_steps=3)
    opt2.load_state_dict(state)
    for ps, sv in zip(pl2, saved):
        with plast.no_grad():
            for p, s in zip(ps, sv):
                p.copy_(s)
    _plast_diloco(opt2, pl2, data, 11, start=5)
    for p, w in zip(pl2[0], want):
        np.testing.assert_allclose(p.detach().numpy(), w, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("cd", ["bfloat16", "float16"])
def test_16_bit_pseudo_gradients_are_rounded_replicas_averaged_in_float32(cd):
    # two replicas, one SGD inner step each from the same start; outer lr 1, momentum 0: the global copy moves by
    # the mean of the 16-bit-rounded pseudo-gradients
    rng = np.random.default_rng(3)
    start = rng.standard_normal(7).astype(np.float32)
    grads = [rng.standard_normal(7).astype(np.float32) for _ in range(2)]
    ps = [[nn.Parameter(plast.tensor(start))] for _ in range(2)]
    opt = optim.DiLoCo(ps, [optim.SGD(p, lr=0.37) for p in ps], inner_steps=1, outer_lr=1.0, outer_momentum=0.0,
                       communication_dtype=cd)  # fmt: skip
    assert opt.communication_dtype is getattr(plast, cd)
    for p, g in zip(ps, grads):
        p[0].grad = plast.tensor(g)
    opt.step()
    np_cd = {"bfloat16": plast.bfloat16.np, "float16": np.float16}[cd]
    local = [start - np.float32(0.37) * g for g in grads]  # float32, as the SGD step computes it
    sent = [(start - lo).astype(np_cd).astype(np.float32) for lo in local]  # global - local, rounded
    mean = ((sent[0] + sent[1]) / 2).astype(np_cd).astype(np.float32)
    want = start - mean
    for p in ps:
        np.testing.assert_allclose(p[0].detach().numpy(), want, rtol=0, atol=1e-6)
    # and not what float32 pseudo-gradients would give (the rounding is real)
    assert not np.allclose(want, start - 0.37 * (grads[0] + grads[1]) / 2, rtol=0, atol=1e-7)


def test_bad_settings_raise():
    w = nn.Parameter(plast.zeros(1))
    with pytest.raises(ValueError, match="communication_dtype"):
        optim.DiLoCo([w], optim.SGD([w], lr=0.1), communication_dtype="int8")
    with pytest.raises(ValueError, match="inner_steps"):
        optim.DiLoCo([w], optim.SGD([w], lr=0.1), inner_steps=0)


def test_jitted_steps_equal_torchs_diloco():
    # under @plast.jit: one plan for the inner steps, one for every H-th call with the outer step in it (its
    # averaging as plan steps), the step count moving on before each replay
    pl, th, data = _replicas(2, seed=3)
    want = _torch_diloco(th, data, H=3, outer_lr=0.7, momentum=0.9, steps=12)
    opt = optim.DiLoCo(pl, [optim.AdamW(ps, lr=1e-2) for ps in pl], inner_steps=3)
    xs = [[plast.zeros(5, 4), plast.zeros(5, 3)] for _ in pl]

    @plast.jit
    def step(*batch):
        opt.zero_grad()
        for r, ps in enumerate(pl):
            x, y = batch[2 * r], batch[2 * r + 1]
            ((x @ ps[0].t() + ps[1] - y) ** 2).mean().backward()
        opt.step()

    for i in range(12):
        with plast.no_grad():
            for r, (xb, yb) in enumerate(xs):
                x, y = data[(i * len(pl) + r) % len(data)]
                xb.copy_(plast.tensor(x))
                yb.copy_(plast.tensor(y))
        step(*[t for pair in xs for t in pair])
        plast.reset_transient_arenas()
    assert (step.traces, step.replays, opt.local_step) == (2, 10, 12)
    for g, w in zip(opt.global_params, want):
        np.testing.assert_allclose(g.detach().numpy(), w, rtol=1e-5, atol=1e-6)
    for ps in pl:  # the 12th call took an outer step: every replica holds the global copy
        for p, w in zip(ps, want):
            np.testing.assert_allclose(p.detach().numpy(), w, rtol=1e-5, atol=1e-6)
