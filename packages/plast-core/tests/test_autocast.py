"""plast.autocast against torch.autocast on the CPU: the op lists op by op, regions, the weight-cast cache, and a
training run that ends where float32 does."""

import numpy as np
import pytest
import torch

import plast
from plast._core import autocast_state
from plast.ops import autocast as lists

rng = np.random.default_rng(0)


def arr(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def both(a, dtype="float32"):
    return plast.tensor(a, dtype=dtype), torch.tensor(a).to(getattr(torch, dtype))


def _targets(n, classes):
    t = rng.integers(0, classes, n)
    return plast.tensor(t), torch.tensor(t)


# op name -> (plast call, torch call, argument builder(dtype) -> (plast args, torch args))
def _args(*arrays, dtype):
    ps, ts = zip(*[both(a, dtype) for a in arrays])
    return list(ps), list(ts)


def _with_target(builder, classes):
    def make(dtype):
        ps, ts = builder(dtype)
        p, t = _targets(ps[0].shape[0], classes)
        return ps + [p], ts + [t]

    return make


TF = torch.nn.functional
CASES = {
    "matmul": (plast.matmul, torch.matmul, lambda d: _args(arr(4, 3), arr(3, 2), dtype=d)),
    "addmm": (plast.addmm, torch.addmm, lambda d: _args(arr(2), arr(4, 3), arr(3, 2), dtype=d)),
    "linear": (plast.linear, TF.linear, lambda d: _args(arr(4, 3), arr(2, 3), arr(2), dtype=d)),
    "conv2d": (plast.conv2d, TF.conv2d, lambda d: _args(arr(1, 2, 5, 5), arr(3, 2, 3, 3), dtype=d)),
    "scaled_dot_product_attention": (
        plast.scaled_dot_product_attention,
        TF.scaled_dot_product_attention,
        lambda d: _args(arr(1, 2, 4, 8), arr(1, 2, 4, 8), arr(1, 2, 4, 8), dtype=d),
    ),
    "prod": (plast.prod, torch.prod, lambda d: _args(arr(3, 4, lo=0.5, hi=1.5), dtype=d)),
    "mse_loss": (plast.mse_loss, TF.mse_loss, lambda d: _args(arr(4, 3), arr(4, 3), dtype=d)),
    "l1_loss": (plast.l1_loss, TF.l1_loss, lambda d: _args(arr(4, 3), arr(4, 3), dtype=d)),
    "smooth_l1_loss": (
        plast.smooth_l1_loss,
        TF.smooth_l1_loss,
        lambda d: _args(arr(4, 3), arr(4, 3), dtype=d),
    ),
    "cross_entropy": (
        plast.cross_entropy,
        TF.cross_entropy,
        _with_target(lambda d: _args(arr(4, 5), dtype=d), 5),
    ),
    "nll_loss": (
        plast.nll_loss,
        TF.nll_loss,
        _with_target(lambda d: _args(arr(4, 5, lo=-3, hi=-0.1), dtype=d), 5),
    ),
    "binary_cross_entropy": (
        plast.binary_cross_entropy,
        TF.binary_cross_entropy,
        lambda d: _args(arr(4, 3, lo=0.1, hi=0.9), arr(4, 3, lo=0, hi=1), dtype=d),
    ),
    "binary_cross_entropy_with_logits": (
        plast.binary_cross_entropy_with_logits,
        TF.binary_cross_entropy_with_logits,
        lambda d: _args(arr(4, 3), arr(4, 3, lo=0, hi=1), dtype=d),
    ),
    # not listed: they follow their inputs (torch's CPU lists leave them out)
    "softmax": (
        lambda x: plast.softmax(x, -1),
        lambda x: torch.softmax(x, -1),
        lambda d: _args(arr(4, 3), dtype=d),
    ),
    "layer_norm": (
        lambda x: plast.layer_norm(x, (3,)),
        lambda x: TF.layer_norm(x, (3,)),
        lambda d: _args(arr(4, 3), dtype=d),
    ),
    "relu": (plast.relu, torch.relu, lambda d: _args(arr(4, 3), dtype=d)),
    "sum": (plast.sum, torch.sum, lambda d: _args(arr(4, 3), dtype=d)),
    "add": (plast.add, torch.add, lambda d: _args(arr(4, 3), arr(4, 3), dtype=d)),
}


def _run(name, dtype):
    pf, tf, build = CASES[name]
    ps, ts = build(dtype)
    with plast.autocast("cpu"):
        p = pf(*ps)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = tf(*ts)
    return p, t


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_each_op_casts_as_torch_does(name, dtype):
    p, t = _run(name, dtype)
    assert p.dtype.name == str(t.dtype).removeprefix("torch."), (name, dtype, p.dtype, t.dtype)
    np.testing.assert_allclose(p.float().numpy(), t.float().detach().numpy(), rtol=2**-6, atol=2**-6)


def test_the_lists_are_covered_by_the_cases():
    assert set(lists.LOWER) | set(lists.FP32) <= set(CASES)
    for name in lists.LOWER:
        assert _run(name, "float32")[1].dtype is torch.bfloat16, name  # torch runs it in bfloat16 too
    for name in lists.FP32:
        assert _run(name, "bfloat16")[1].dtype is torch.float32, name  # ... and this one in float32


@pytest.mark.parametrize("join", [plast.cat, plast.stack])
def test_joins_promote_to_the_widest(join):
    a, b = plast.ones(2, dtype="bfloat16"), plast.ones(2)
    with plast.autocast("cpu"):
        assert join([a, b]).dtype is plast.float32
        assert join([a, a]).dtype is plast.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tj = getattr(torch, join.__name__)
        assert tj([torch.ones(2, dtype=torch.bfloat16), torch.ones(2)]).dtype is torch.float32


def test_regions_nest_disable_and_restore():
    x, w = plast.ones(2, 3), plast.ones(3, 2)
    assert not plast.is_autocast_enabled("cpu")
    with plast.autocast("cpu"):
        assert plast.is_autocast_enabled() and (x @ w).dtype is plast.bfloat16
        with plast.autocast("cpu", enabled=False):
            assert not plast.is_autocast_enabled() and (x @ w).dtype is plast.float32
        with plast.autocast("cpu", dtype=plast.float16):
            assert (x @ w).dtype is plast.float16 and plast.get_autocast_dtype("cpu") is plast.float16
        assert (x @ w).dtype is plast.bfloat16
    assert (x @ w).dtype is plast.float32 and not plast.is_autocast_enabled()
    assert autocast_state.depth == 0 and not autocast_state.cache

    @plast.autocast("cpu")
    def f(a, b):
        return a @ b

    assert f(x, w).dtype is plast.bfloat16 and (x @ w).dtype is plast.float32
    with pytest.raises(ValueError, match="bfloat16 or plast.float16"):
        plast.autocast("cpu", dtype=plast.float64)
    with pytest.raises(NotImplementedError, match="no 16-bit kernels"), plast.cuda.amp.autocast():
        pass
    with pytest.raises(ZeroDivisionError), plast.autocast("cpu"):
        raise ZeroDivisionError
    assert not plast.is_autocast_enabled() and autocast_state.depth == 0  # an exception closes the region


def test_float64_is_never_cast():
    with plast.autocast("cpu"):
        assert (plast.ones(2, 3, dtype="float64") @ plast.ones(3, 2, dtype="float64")).dtype is plast.float64


def test_a_parameter_is_cast_once_per_region_and_its_gradient_adds_up():
    a = arr(3, 4)
    w, tw = plast.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    xa, xb = arr(2, 3), arr(5, 3)
    with plast.autocast("cpu"):
        y1 = plast.tensor(xa) @ w
        (cast,) = [c for leaf, c in autocast_state.cache.values() if leaf is w]
        y2 = plast.tensor(xb) @ w
        assert [c for leaf, c in autocast_state.cache.values() if leaf is w] == [cast]  # reused
        loss = (y1.float().sum() + (y2.float() ** 2).sum()) * 0.5
    assert not autocast_state.cache
    loss.backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tl = ((torch.tensor(xa) @ tw).float().sum() + ((torch.tensor(xb) @ tw).float() ** 2).sum()) * 0.5
    tl.backward()
    assert w.grad.dtype is plast.float32
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=2**-6, atol=2**-6)


def test_training_under_autocast_ends_near_float32():
    """A 2-layer MLP on a regression task, 150 SGD steps: bfloat16 autocast ends within 5% of float32's loss (the
    loss, 0.019, is near the noise that bfloat16's 8-bit products leave in this fit; the GPT of plast-nn's
    test_autocast_gpt is held to 2%)."""
    data = np.random.default_rng(1)
    x = data.uniform(-1, 1, (64, 16)).astype(np.float32)
    y = np.sin(x @ data.uniform(-1, 1, (16, 1))).astype(np.float32)
    init = [data.uniform(-0.3, 0.3, s).astype(np.float32) for s in ((32, 16), (32,), (1, 32), (1,))]

    def train(autocast):
        params = [plast.tensor(p, requires_grad=True) for p in init]
        xt, yt = plast.tensor(x), plast.tensor(y)
        for _ in range(150):
            with plast.autocast("cpu", enabled=autocast):
                h = plast.linear(xt, params[0], params[1]).relu()
                loss = plast.mse_loss(plast.linear(h, params[2], params[3]), yt)
            for p in params:
                p.grad = None
            loss.backward()
            with plast.no_grad():
                for p in params:
                    p -= 0.1 * p.grad
        return loss.item()

    f32, bf16 = train(False), train(True)
    assert f32 < 0.05
    assert abs(bf16 - f32) <= 0.05 * f32, (f32, bf16)


class _SGD:
    """The least an optimizer is to GradScaler: param_groups and step()."""

    def __init__(self, params, lr):
        self.param_groups = [{"params": list(params), "lr": lr}]
        self.steps = 0

    def step(self):
        self.steps += 1
        with plast.no_grad():
            for p in self.param_groups[0]["params"]:
                p -= self.param_groups[0]["lr"] * p.grad


def test_grad_scaler_skips_inf_steps_and_follows_torchs_scale_sequence():
    """float16 autocast with a GradScaler (growth every 3 clean steps), infs injected into a gradient at steps 2,
    3 and 7: the scales, the skipped steps and the final weights are torch's."""
    a = [arr(8, 4), arr(8), arr(1, 8)]
    x, y = arr(16, 4), arr(16, 1)
    pp = [plast.tensor(v, requires_grad=True) for v in a]
    tp = [torch.tensor(v, requires_grad=True) for v in a]
    popt, topt = _SGD(pp, 0.05), torch.optim.SGD(tp, lr=0.05)
    ps = plast.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    ts = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    scales = []
    for step in range(10):
        for params, opt, scaler, lib, ac in (
            (pp, popt, ps, plast, plast.autocast("cpu", dtype=plast.float16)),
            (tp, topt, ts, torch, torch.autocast("cpu", dtype=torch.float16)),
        ):
            for p in params:
                p.grad = None
            with ac:
                F = lib if lib is plast else lib.nn.functional  # plast-core's tests run without plast-nn
                h = lib.relu(F.linear(lib.tensor(x), params[0], params[1]))
                loss = F.mse_loss(F.linear(h, params[2]), lib.tensor(y))
            scaler.scale(loss).backward()
            if step in (2, 3, 7):
                with lib.no_grad():
                    params[1].grad[3] = float("inf") if step != 3 else float("nan")
            scaler.step(opt)
            scaler.update()
        scales.append((ps.get_scale(), ts.get_scale()))
    assert [s for s, _ in scales] == [t for _, t in scales], scales
    assert popt.steps == 7  # three skipped
    for p, t in zip(pp, tp):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-2, atol=1e-3)
    assert ps.state_dict() == {k: (v.item() if hasattr(v, "item") else v) for k, v in ts.state_dict().items()}


def test_grad_scaler_unscale_clip_state_and_errors():
    p = plast.tensor([1.0, 2.0], requires_grad=True)
    opt = _SGD([p], 0.1)
    s = plast.amp.GradScaler(init_scale=8.0)
    s.scale((p * p).sum()).backward()
    assert p.grad.tolist() == [16.0, 32.0]
    s.unscale_(opt)
    assert p.grad.tolist() == [2.0, 4.0]  # unscaled before clipping, as torch
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    s.update()
    assert p.tolist() == pytest.approx([0.8, 1.6])
    state = s.state_dict()
    t = plast.amp.GradScaler()
    t.load_state_dict(state)
    assert t.state_dict() == state and t.get_scale() == 8.0
    with pytest.raises(KeyError, match="missing"):
        t.load_state_dict({"scale": 2.0})
    off = plast.amp.GradScaler(enabled=False)
    loss = (p * 3).sum()
    assert off.scale(loss) is loss and off.state_dict() == {} and off.get_scale() == 1.0
    assert plast.cuda.amp.GradScaler is plast.amp.GradScaler
    with pytest.raises(ValueError, match="growth_factor"):
        plast.amp.GradScaler(growth_factor=0.5)
