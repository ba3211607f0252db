"""Fused optimizer updates (plast.sgd_update_, plast.adam_update_) against torch.optim over many steps."""

import numpy as np
import pytest
import torch

import plast

TOL = {np.float32: dict(rtol=2e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}
SHAPES = [(3, 4), (5,), (), (2, 1, 3)]


def _setup(dtype, seed=0, shapes=SHAPES, device="cpu"):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in shapes]
    pp = [plast.tensor(a, device=device) for a in init]
    tp = [torch.nn.Parameter(torch.tensor(a)) for a in init]
    return rng, pp, tp


def _grads(rng, shapes, dtype):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _f64(*vals, device="cpu"):
    return plast.tensor(list(vals), dtype=plast.float64, device=device)


def _lr(step):
    return 0.05 * (0.97**step) + 0.01 * (step % 3)  # changes every step, as a scheduler would


SGD_CASES = [
    dict(),
    dict(momentum=0.9),
    dict(momentum=0.9, dampening=0.3),
    dict(momentum=0.9, nesterov=True),
    dict(momentum=0.8, weight_decay=0.01),
    dict(weight_decay=0.1),
    dict(momentum=0.5, maximize=True, weight_decay=0.02),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "case", SGD_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "plain"
)
def test_sgd_update_matches_torch(dtype, case, device):
    momentum = case.get("momentum", 0.0)
    rng, pp, tp = _setup(dtype, device=device)
    opt = torch.optim.SGD(tp, lr=0.1, **case)
    bufs = [plast.zeros_like(p) for p in pp] if momentum else None
    fresh = [plast.ones((), dtype=plast.float64, device=device) for _ in pp] if momentum else None
    hyper = _f64(0.1, momentum, case.get("dampening", 0.0), case.get("weight_decay", 0.0), device=device)
    for step in range(50):
        lr = _lr(step)
        gs = _grads(rng, SHAPES, dtype)
        for t, g in zip(tp, gs):
            t.grad = torch.tensor(g)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        hyper.copy_(
            _f64(lr, momentum, case.get("dampening", 0.0), case.get("weight_decay", 0.0), device=device)
        )
        plast.sgd_update_(
            pp,
            [plast.tensor(g, device=device) for g in gs],
            bufs,
            hyper,
            fresh=fresh,
            nesterov=case.get("nesterov", False),
            maximize=case.get("maximize", False),
        )
    for p, t in zip(pp, tp):
        assert p.device.type == device
        np.testing.assert_allclose(p.cpu().numpy(), t.detach().numpy(), **TOL[dtype])
    if momentum:
        for b, t in zip(bufs, tp):
            np.testing.assert_allclose(b.cpu().numpy(), opt.state[t]["momentum_buffer"].numpy(), **TOL[dtype])
        assert all(f.item() == 0.0 for f in fresh)


ADAM_CASES = [
    dict(),
    dict(weight_decay=0.05),
    dict(weight_decay=0.05, decoupled_weight_decay=True),
    dict(amsgrad=True),
    dict(amsgrad=True, weight_decay=0.01, decoupled_weight_decay=True),
    dict(maximize=True, betas=(0.8, 0.99), eps=1e-6),
    dict(betas=(0.3, 0.9)),  # 1 - beta1 >= 0.5: torch's other lerp branch
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "case", ADAM_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "plain"
)
def test_adam_update_matches_torch(dtype, case, device):
    rng, pp, tp = _setup(dtype, seed=1, device=device)
    cls = torch.optim.AdamW if case.get("decoupled_weight_decay") else torch.optim.Adam
    kw = {k: v for k, v in case.items() if k != "decoupled_weight_decay"}
    opt = cls(tp, lr=1e-3, **kw)
    b1, b2 = case.get("betas", (0.9, 0.999))
    eps, wd = case.get("eps", 1e-8), case.get("weight_decay", 0.0)
    amsgrad = case.get("amsgrad", False)
    m = [plast.zeros_like(p) for p in pp]
    v = [plast.zeros_like(p) for p in pp]
    vmax = [plast.zeros_like(p) for p in pp] if amsgrad else None
    steps = [plast.zeros((), dtype=plast.float64, device=device) for _ in pp]
    hyper = _f64(1e-3, b1, b2, eps, wd, device=device)
    for step in range(60):
        lr = _lr(step) * 0.1
        gs = _grads(rng, SHAPES, dtype)
        for t, g in zip(tp, gs):
            t.grad = torch.tensor(g)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        hyper.copy_(_f64(lr, b1, b2, eps, wd, device=device))
        plast.adam_update_(
            pp,
            [plast.tensor(g, device=device) for g in gs],
            m,
            v,
            steps,
            hyper,
            amsgrad=amsgrad,
            decoupled_weight_decay=case.get("decoupled_weight_decay", False),
            max_exp_avg_sqs=vmax,
            maximize=case.get("maximize", False),
        )
    for i, (p, t) in enumerate(zip(pp, tp)):
        st = opt.state[t]
        assert p.device.type == device
        np.testing.assert_allclose(p.cpu().numpy(), t.detach().numpy(), **TOL[dtype])
        np.testing.assert_allclose(m[i].cpu().numpy(), st["exp_avg"].numpy(), **TOL[dtype])
        np.testing.assert_allclose(v[i].cpu().numpy(), st["exp_avg_sq"].numpy(), **TOL[dtype])
        if amsgrad:
            np.testing.assert_allclose(vmax[i].cpu().numpy(), st["max_exp_avg_sq"].numpy(), **TOL[dtype])
        assert steps[i].item() == st["step"].item() == 60


def test_adam_groups_with_their_own_hyper_in_one_call(device):
    rng, pp, tp = _setup(np.float32, seed=2, device=device)
    opt = torch.optim.Adam(
        [{"params": tp[:2], "lr": 1e-2}, {"params": tp[2:], "lr": 1e-3, "betas": (0.5, 0.9)}]
    )
    h1 = _f64(1e-2, 0.9, 0.999, 1e-8, 0.0, device=device)
    h2 = _f64(1e-3, 0.5, 0.9, 1e-8, 0.0, device=device)
    m, v = [plast.zeros_like(p) for p in pp], [plast.zeros_like(p) for p in pp]
    steps = [plast.zeros((), dtype=plast.float64, device=device) for _ in pp]
    for _ in range(20):
        gs = _grads(rng, SHAPES, np.float32)
        for t, g in zip(tp, gs):
            t.grad = torch.tensor(g)
        opt.step()
        plast.adam_update_(pp, [plast.tensor(g, device=device) for g in gs], m, v, steps, [h1, h1, h2, h2])
    for p, t in zip(pp, tp):
        np.testing.assert_allclose(p.cpu().numpy(), t.detach().numpy(), **TOL[np.float32])


def test_hyper_is_read_when_the_kernel_runs():
    p = plast.zeros(3)
    hyper = _f64(1.0, 0.0, 0.0, 0.0)
    g = plast.ones(3)
    plast.sgd_update_([p], [g], None, hyper)
    hyper.copy_(_f64(0.5, 0.0, 0.0, 0.0))  # the same tensor, a new value: no new op arguments
    plast.sgd_update_([p], [g], None, hyper)
    assert p.tolist() == [-1.5, -1.5, -1.5]


def test_step_counter_is_incremented_by_the_kernel():
    p, g = plast.ones(2), plast.ones(2)
    s = plast.tensor(5.0, dtype=plast.float64)
    plast.adam_update_([p], [g], [plast.zeros(2)], [plast.zeros(2)], [s], _f64(1e-3, 0.9, 0.999, 1e-8, 0.0))
    assert s.item() == 6.0


def test_update_is_single_op_call_over_all_params(monkeypatch):
    from plast.ops import optim as O

    calls = []
    kernel = O.SGD_UPDATE.kernels["cpu"]
    monkeypatch.setitem(O.SGD_UPDATE.kernels, "cpu", lambda n, i, o: (calls.append(n), kernel(n, i, o)))
    pp = [plast.ones(3) for _ in range(5)]
    plast.sgd_update_(pp, [plast.ones(3) for _ in pp], None, _f64(0.1, 0, 0, 0))
    assert len(calls) == 1
    assert all(np.allclose(p.numpy(), 0.9) for p in pp)
    # no hyperparameter value is baked into the op's arguments
    assert not any(isinstance(a, float) for a in calls[0].args)


def test_pending_lazy_reads_see_the_old_value():
    p = plast.ones(2)
    lazy = p * 2  # recorded, not computed
    plast.sgd_update_([p], [plast.ones(2)], None, _f64(0.5, 0, 0, 0))
    assert lazy.tolist() == [2.0, 2.0]
    assert p.tolist() == [0.5, 0.5]


def test_backward_after_update_of_a_saved_input_raises():
    w = plast.ones(2, requires_grad=True)
    loss = (w * w).sum()
    plast.sgd_update_([w], [plast.ones(2)], None, _f64(0.1, 0, 0, 0))
    with pytest.raises(RuntimeError):
        loss.backward()


def test_lazy_grads_are_computed_first():
    p = plast.ones(2)
    g = plast.ones(2) * 3  # unrealized
    plast.sgd_update_([p], [g], None, _f64(0.1, 0, 0, 0))
    np.testing.assert_allclose(p.numpy(), [0.7, 0.7], rtol=1e-6)


def test_non_contiguous_params_and_grads():
    base = plast.zeros(3, 4)
    p = base.T  # a view: the update writes through it
    g = plast.tensor(np.arange(12, dtype=np.float32).reshape(4, 3).T.copy()).T
    plast.sgd_update_([p], [g], None, _f64(1.0, 0, 0, 0))
    np.testing.assert_allclose(base.numpy(), -np.arange(12, dtype=np.float32).reshape(4, 3).T)


def test_size_zero_params():
    p, g = plast.zeros(0, 3), plast.zeros(0, 3)
    plast.sgd_update_([p], [g], [plast.zeros(0, 3)], _f64(0.1, 0.9, 0, 0))
    s = plast.zeros((), dtype=plast.float64)
    plast.adam_update_(
        [p], [g], [plast.zeros(0, 3)], [plast.zeros(0, 3)], [s], _f64(1e-3, 0.9, 0.999, 1e-8, 0)
    )
    assert s.item() == 1.0 and tuple(p.shape) == (0, 3)


def test_bad_inputs():
    h = _f64(0.1, 0, 0, 0)
    p = plast.ones(2)
    with pytest.raises(plast.ShapeError, match="grads\\[0\\] has shape"):
        plast.sgd_update_([p], [plast.ones(3)], None, h)
    with pytest.raises(ValueError, match="1 tensors but there are 2"):
        plast.sgd_update_([p, plast.ones(2)], [plast.ones(2)], None, h)
    with pytest.raises(plast.ShapeError, match="hyper must hold 4"):
        plast.sgd_update_([p], [plast.ones(2)], None, _f64(0.1, 0))
    with pytest.raises(plast.DTypeError):
        plast.sgd_update_([plast.tensor([1, 2])], [plast.tensor([1, 2])], None, h)
    with pytest.raises(ValueError, match="appears twice"):
        plast.sgd_update_([p, p], [plast.ones(2), plast.ones(2)], None, h)
    with pytest.raises(ValueError, match="nesterov"):
        plast.sgd_update_([p], [plast.ones(2)], None, h, nesterov=True)
    with pytest.raises(TypeError, match="list of tensors"):
        plast.sgd_update_(p, [plast.ones(2)], None, h)
    with pytest.raises(ValueError, match="amsgrad needs"):
        plast.adam_update_(
            [p],
            [plast.ones(2)],
            [plast.zeros(2)],
            [plast.zeros(2)],
            [plast.zeros((), dtype=plast.float64)],
            _f64(1e-3, 0.9, 0.999, 1e-8, 0),
            amsgrad=True,
        )
    with pytest.raises(plast.ShapeError, match="step\\[0\\] must hold one number"):
        plast.adam_update_(
            [p],
            [plast.ones(2)],
            [plast.zeros(2)],
            [plast.zeros(2)],
            [plast.zeros(2)],
            _f64(1e-3, 0.9, 0.999, 1e-8, 0),
        )
    with pytest.raises(plast.DTypeError, match="exp_avgs\\[0\\] is"):
        plast.adam_update_(
            [p],
            [plast.ones(2)],
            [plast.zeros(2, dtype=plast.float64)],
            [plast.zeros(2)],
            [plast.zeros((), dtype=plast.float64)],
            _f64(1e-3, 0.9, 0.999, 1e-8, 0),
        )
    # a non-leaf (op result with a graph) can't be updated in place
    w = plast.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="realized leaf"):
        plast.sgd_update_([w * 2], [plast.ones(2)], None, h)
    assert p.tolist() == [1.0, 1.0]
