"""GradScaler with plast.optim's fused optimizers, eager and inside one @plast.jit step, against torch's GradScaler
step for step: parameters, scale, growth tracker and which steps were skipped. Some steps multiply the loss by an
inf or NaN (an input tensor, so the trace is the same and only the data differs); growth_interval=3 so the scale
grows too. The jitted step traces once."""

import numpy as np
import pytest
import torch

import plast
import plast.nn.functional as F

BAD = {0: float("inf"), 4: float("inf"), 8: float("nan"), 9: float("inf")}  # step -> loss multiplier
STEPS = 12


def _models(seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(8, 4), (8,), (1, 8), (1,)]
    init = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in shapes]
    pm = plast.nn.Sequential(plast.nn.Linear(4, 8), plast.nn.ReLU(), plast.nn.Linear(8, 1))
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    with plast.no_grad(), torch.no_grad():
        for p, t, a in zip(pm.parameters(), tm.parameters(), init):
            p.copy_(plast.tensor(a))
            t.copy_(torch.tensor(a))
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = rng.standard_normal((16, 1)).astype(np.float32)
    return pm, tm, x, y


def _optimizers(kind, pm, tm):
    if kind == "adam":
        return plast.optim.Adam(pm.parameters(), lr=0.01), torch.optim.Adam(tm.parameters(), lr=0.01)
    return (
        plast.optim.SGD(pm.parameters(), lr=0.05, momentum=0.9),
        torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9),
    )


def _torch_run(kind, clip, fp16=False):
    _, tm, x, y = _models()
    _, topt = _optimizers(kind, plast.nn.Linear(1, 1), tm)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    x, y = torch.tensor(x), torch.tensor(y)
    out = []
    for i in range(STEPS):
        topt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16, enabled=fp16):
            loss = torch.nn.functional.mse_loss(tm(x), y) * BAD.get(i, 1.0)
        scaler.scale(loss).backward()
        if clip:
            scaler.unscale_(topt)
            torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.5)
        scaler.step(topt)
        scaler.update()
        params = [p.detach().numpy().copy() for p in tm.parameters()]
        out.append((params, scaler.get_scale(), scaler._get_growth_tracker()))
    return out


def _plast_run(kind, clip, jit, fp16=False):
    pm, tm, x, y = _models()
    popt, _ = _optimizers(kind, pm, tm)
    scaler = plast.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)

    def step(x, y, bad):
        popt.zero_grad()
        with plast.autocast("cpu", dtype=plast.float16, enabled=fp16):
            loss = F.mse_loss(pm(x), y) * bad
        scaler.scale(loss).backward()
        if clip:
            scaler.unscale_(popt)
            plast.nn.utils.clip_grad_norm_(pm.parameters(), 0.5)
        scaler.step(popt)
        scaler.update()
        return loss

    fn = plast.jit(step) if jit else step
    x, y = plast.tensor(x), plast.tensor(y)
    out = []
    for i in range(STEPS):
        fn(x, y, plast.tensor(BAD.get(i, 1.0)))
        params = [p.detach().numpy().copy() for p in pm.parameters()]
        out.append((params, scaler.get_scale(), scaler._get_growth_tracker()))
    return out, fn


@pytest.mark.parametrize("clip", [False, True], ids=["plain", "unscale_clip"])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("kind", ["adam", "sgd_momentum"])
def test_grad_scaler_steps_as_torch(kind, jit, clip):
    want = _torch_run(kind, clip)
    got, fn = _plast_run(kind, clip, jit)
    prev_p = prev_t = None
    for i, ((pp, ps, pg), (tp, ts, tg)) in enumerate(zip(got, want)):
        assert (ps, pg) == (ts, tg), (i, ps, pg, ts, tg)
        for a, b in zip(pp, tp):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"step {i}")
        if prev_p is not None:  # a skipped step leaves every parameter exactly as it was, in both
            skipped = all(np.array_equal(a, b) for a, b in zip(pp, prev_p))
            assert skipped == all(np.array_equal(a, b) for a, b in zip(tp, prev_t)) == (i in BAD), i
        prev_p, prev_t = pp, tp
    scales = [s for _, s, _ in got]
    assert any(b > a for a, b in zip(scales, scales[1:])) and any(b < a for a, b in zip(scales, scales[1:]))
    if jit:
        assert fn.traces == 1


def test_optimizer_without_data_skip_is_refused_under_jit():
    """RAdam's update is tensor ops without a found_inf input: GradScaler branches in Python eagerly (as
    torch), and a jitted step, where it cannot, says so."""
    w = plast.nn.Parameter(plast.ones(3))
    opt = plast.optim.RAdam([w], lr=0.1)
    scaler = plast.amp.GradScaler()

    def step(bad):
        opt.zero_grad()
        scaler.scale((w * w).sum() * bad).backward()
        scaler.step(opt)
        scaler.update()

    step(plast.tensor(float("inf")))  # eager: skipped
    assert w.tolist() == [1.0, 1.0, 1.0] and scaler.get_scale() == 2.0**15
    step(plast.tensor(1.0))
    assert w.tolist() != [1.0, 1.0, 1.0]
    with pytest.raises(NotImplementedError, match="_step_supports_amp_scaling"):
        plast.jit(step)(plast.tensor(1.0))


def test_state_dict_round_trip_and_torch_keys():
    scaler = plast.amp.GradScaler(init_scale=8.0, growth_interval=5)
    t = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=5)
    assert scaler.state_dict() == {
        k: (v.item() if hasattr(v, "item") else v) for k, v in t.state_dict().items()
    }
    other = plast.amp.GradScaler()
    other.load_state_dict({**scaler.state_dict(), "_growth_tracker": 2, "scale": torch.tensor(4.0)})
    assert other.get_scale() == 4.0 and other.state_dict()["_growth_tracker"] == 2


@pytest.mark.parametrize("kind", ["adam", "sgd_momentum"])
def test_float16_autocast_jitted_step_as_torch(kind):
    """The same under float16 autocast (products in float16, as torch's CPU autocast): the same skipped steps,
    scales and trackers; parameters to float16 accuracy."""
    want = _torch_run(kind, True, fp16=True)
    got, fn = _plast_run(kind, True, True, fp16=True)
    for i, ((pp, ps, pg), (tp, ts, tg)) in enumerate(zip(got, want)):
        assert (ps, pg) == (ts, tg), (i, ps, pg, ts, tg)
        for a, b in zip(pp, tp):
            np.testing.assert_allclose(a, b, rtol=1e-2, atol=2e-3, err_msg=f"step {i}")
    assert fn.traces == 1


@pytest.mark.skipif(plast.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_scaler_without_cuda_disables_itself_as_torch():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        s = plast.amp.GradScaler("cuda")
    assert not s.is_enabled() and s.get_scale() == 1.0
