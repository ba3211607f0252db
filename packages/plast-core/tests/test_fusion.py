"""Fusion rules fire where they should, never where an intermediate is shared, and change no result."""

import numpy as np
import pytest

import plast
from plast.graph.realize import scheduler_stats


def fused(fn):
    """Run fn() with a fresh count; return (result as numpy, names of the rules that fired)."""
    from plast.graph.realize import watch_fusions

    with watch_fusions() as fired:
        out = fn()
    return out, list(fired)


@pytest.fixture
def data():
    plast.manual_seed(0)
    return plast.randn(8, 5), plast.randn(5, 6), plast.randn(6)


def test_matmul_bias_relu_fires(data):
    x, w, b = data
    out, fired = fused(lambda: (x @ w + b).relu().numpy())
    assert fired == ["matmul_bias_relu"]
    np.testing.assert_allclose(out, np.maximum(x.numpy() @ w.numpy() + b.numpy(), 0), rtol=1e-5, atol=1e-6)


def test_matmul_bias_and_addmm_relu_fire(data):
    x, w, b = data
    _, fired = fused(lambda: (x @ w + b).numpy())
    assert fired == ["matmul_bias"]
    if hasattr(plast, "addmm"):
        _, fired = fused(lambda: plast.addmm(b, x, w).relu().numpy())
        assert fired == ["addmm_relu"]


def test_no_fusion_when_intermediate_is_shared(data):
    x, w, b = data
    h = x @ w  # the user holds the matmul's result
    _, fired = fused(lambda: (h + b).relu().numpy())
    assert not {"matmul_bias_relu", "matmul_bias"} & set(fired)  # add+relu may still run as one chain
    assert h.numpy().shape == (8, 6)
    # a second consumer inside the graph also blocks it
    h2 = x @ w
    s = h2 + b
    _, fired = fused(lambda: plast.forward(s.relu() + s).numpy())
    assert "matmul_bias_relu" not in fired


@pytest.mark.skipif(not hasattr(plast, "nll_loss"), reason="nll_loss not built yet")
def test_log_softmax_nll_fires_and_agrees():
    plast.manual_seed(1)
    x = plast.randn(6, 4)
    t = plast.randint(0, 4, (6,))
    out, fired = fused(lambda: plast.nll_loss(plast.log_softmax(x, 1), t).item())
    assert fired == ["log_softmax_nll"]
    assert abs(out - plast.cross_entropy(x, t).item()) < 1e-6


def test_fusion_on_off_agree_in_training(monkeypatch, data):
    x, w, b = data

    def run():
        wp = w.detach().clone().requires_grad_()
        bp = b.detach().clone().requires_grad_()
        loss = ((x @ wp + bp).relu() * 1.5).sum()
        loss.backward()
        return loss.item(), wp.grad.numpy(), bp.grad.numpy()

    on, fired = fused(run)
    assert "matmul_bias_relu" in fired
    monkeypatch.setenv("PLAST_FUSION", "0")
    off, fired_off = fused(run)
    assert fired_off == []
    assert on[0] == pytest.approx(off[0], rel=1e-6)
    np.testing.assert_allclose(on[1], off[1], rtol=1e-6)
    np.testing.assert_allclose(on[2], off[2], rtol=1e-6)


def test_plan_cache_hits_and_switch(monkeypatch, data):
    x, w, b = data
    (x @ w + b).relu().numpy()
    before = scheduler_stats()
    for _ in range(5):
        (x @ w + b).relu().numpy()
    after = scheduler_stats()
    assert after["hits"] - before["hits"] == 5
    assert after["misses"] == before["misses"]
    monkeypatch.setenv("PLAST_PLAN_CACHE", "0")
    (x @ w + b).relu().numpy()
    assert scheduler_stats()["hits"] == after["hits"]


def test_debug_prints_hits_and_misses(data):
    import subprocess
    import sys

    code = (
        "import plast\n"
        "x, w, b = plast.randn(4, 3), plast.randn(3, 2), plast.randn(2)\n"
        "for _ in range(2): (x @ w + b).relu().numpy()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PLAST_DEBUG": "1"},
        check=True,
    ).stdout
    assert "plan cache miss" in out and "plan cache hit" in out


def test_eager_plan_puts_intermediates_in_one_reused_block(monkeypatch):
    from plast.graph import realize as R

    monkeypatch.setenv("PLAST_FUSION", "0")  # with fusion the chain below is one pass with no intermediates

    x = plast.randn(64, 32)
    expected = (np.exp(x.numpy() * 2 + 1) * 3 - x.numpy()).sum()
    R._PLANS.clear()
    got = ((x * 2 + 1).exp() * 3 - x).sum().item()
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    (plan,) = R._PLANS.values()
    sizes = 64 * 32 * 4
    assert len(plan.layout) >= 4  # every elementwise intermediate is planned
    assert plan.block_bytes <= 2 * sizes + 128  # ... in two reused slots, not one allocation each
    kept = x * 2 + 1  # held by the caller: it leaves the plan and gets its own block
    got2 = ((kept.exp() * 3) - x).sum().item()
    np.testing.assert_allclose(got2, expected, rtol=1e-5)
    np.testing.assert_allclose(kept.numpy(), x.numpy() * 2 + 1, rtol=1e-6)
    assert kept._storage.arena is not None  # not a slice of a planned block


def test_elementwise_chain_is_one_pass_and_agrees(monkeypatch):
    plast.manual_seed(3)
    x = plast.randn(33, 17)
    b = plast.randn(17)

    def f():
        return ((x * 2 + b).tanh() * 3 - x).relu().numpy()

    out, fired = fused(f)
    assert fired == ["elementwise_chain"]
    ref = np.maximum(np.tanh(x.numpy() * 2 + b.numpy()) * 3 - x.numpy(), 0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    monkeypatch.setenv("PLAST_FUSION", "0")
    off, fired_off = fused(f)
    assert fired_off == []
    np.testing.assert_allclose(out, off, rtol=1e-5, atol=1e-6)


def test_chain_stops_at_a_held_intermediate():
    x = plast.randn(8, 8)
    h = x * 2 + 1  # held
    out, fired = fused(lambda: (h.exp() * 3).numpy())
    np.testing.assert_allclose(out, np.exp(x.numpy() * 2 + 1) * 3, rtol=1e-5)
    np.testing.assert_allclose(h.numpy(), x.numpy() * 2 + 1, rtol=1e-6)


def test_chain_gradients_match_unfused(monkeypatch):
    def run():
        plast.manual_seed(5)
        w = plast.randn(6, 4).requires_grad_()
        x = plast.randn(6, 4)
        loss = ((x * w + 1).tanh() * (w - x).sigmoid()).sum()
        loss.backward()
        return loss.item(), w.grad.numpy()

    on = run()
    monkeypatch.setenv("PLAST_FUSION", "0")
    off = run()
    assert on[0] == pytest.approx(off[0], rel=1e-5)
    np.testing.assert_allclose(on[1], off[1], rtol=1e-5, atol=1e-6)


def test_cached_chain_plan_with_different_input_aliasing():
    x = plast.randn(4, 5)
    y = plast.randn(4, 5)
    for a, b in [(x, y), (x, x), (y, x), (y, y)]:
        got = ((a * 2.0 + b * 3.0).tanh() - b).numpy()
        ref = np.tanh(a.numpy() * 2 + b.numpy() * 3) - b.numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pieces", [2, 3])
def test_split_backward_sums_its_scatters_in_one_pass(monkeypatch, pieces):
    """The gradient of x.split(...) taken side by side (a qkv split) is one scatter_sum kernel, not a full-size
    strided_scatter per piece plus the adds; equal to torch's, on a non-contiguous input, jitted too."""
    import torch

    rng = np.random.default_rng(pieces)
    a = rng.standard_normal((3, 5, 4 * pieces)).astype(np.float32)
    ws = [rng.standard_normal((3, 5, 4)).astype(np.float32) for _ in range(pieces)]

    def loss(lib, x):
        parts = x.split(4, dim=2)
        return sum(((p * lib.tensor(w)) ** 2).sum() for p, w in zip(parts, ws))

    tx = torch.tensor(a, requires_grad=True)
    loss(torch, tx).backward()

    def run():
        base = plast.tensor(a.transpose(1, 0, 2).copy()).transpose(0, 1)  # non-contiguous
        x = base.detach().requires_grad_()
        loss(plast, x).backward()
        return x.grad.numpy()

    g, fired = fused(run)
    assert f"scatter_sum{pieces}" in fired
    np.testing.assert_allclose(g, tx.grad.numpy(), rtol=1e-6, atol=1e-6)
    monkeypatch.setenv("PLAST_FUSION", "0")
    g_off, fired_off = fused(run)
    assert fired_off == []
    np.testing.assert_array_equal(g, g_off)
    monkeypatch.delenv("PLAST_FUSION")

    w_param = plast.tensor(a, requires_grad=True)

    @plast.jit
    def step(scale):
        w_param.grad = None
        (loss(plast, w_param) * scale).backward()
        return w_param.grad * 1.0

    for s in (1.0, 2.0, 0.5):
        got = step(plast.tensor(s)).numpy()
        np.testing.assert_allclose(got, tx.grad.numpy() * s, rtol=1e-5, atol=1e-5)
    assert step.traces == 1


def test_scatter_sum_does_not_fire_on_other_adds():
    """A scatter added to a tensor that is no scatter (one piece of a split used, and x itself) stays unfused;
    with a third plain term the two scatters still fuse, and the gradient is right either way."""
    y = plast.randn(4, 3)
    x = plast.randn(4, 6, requires_grad=True)
    a, _ = x.split(3, dim=1)
    _, fired = fused(lambda: ((a * y).sum() + (x * 0.5).sum()).backward() or x.grad.numpy())
    assert not {"scatter_sum2", "scatter_sum3"} & set(fired)
    np.testing.assert_allclose(
        x.grad.numpy(), np.concatenate([y.numpy(), np.zeros((4, 3))], 1) + 0.5, rtol=1e-6
    )
    x.grad = None
    a, b = x.split(3, dim=1)
    _, fired = fused(lambda: ((a * y).sum() + (b * 2).sum() + (x * 0.5).sum()).backward() or x.grad.numpy())
    assert "scatter_sum2" in fired
    np.testing.assert_allclose(
        x.grad.numpy(), np.concatenate([y.numpy(), np.full((4, 3), 2.0)], 1) + 0.5, rtol=1e-6
    )


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_linear_gelu_runs_as_one_gemm_with_its_epilogue_when_no_gradient_is_kept(data, approximate):
    """gelu(x @ w + b) and gelu(addmm(b, x, w)) are one GEMM with a GELU epilogue under no_grad (generation); in
    training gelu's backward needs its input, so the GEMM's output is kept and the rule does not fire."""
    import torch

    x, w, b = data
    act = "gelu" if approximate == "none" else "gelu_tanh"
    want = torch.nn.functional.gelu(
        torch.tensor(x.numpy()) @ torch.tensor(w.numpy()) + torch.tensor(b.numpy()), approximate=approximate
    ).numpy()
    with plast.no_grad():
        out, fired = fused(lambda: plast.gelu(x @ w + b, approximate=approximate).numpy())
        assert fired == [f"matmul_bias_{act}"]
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
        out, fired = fused(lambda: plast.gelu(plast.addmm(b, x, w), approximate=approximate).numpy())
        assert fired == [f"addmm_{act}"]
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    wp = w.detach().clone().requires_grad_()
    out, fired = fused(lambda: plast.gelu(x @ wp + b, approximate=approximate).sum().item())
    assert f"matmul_bias_{act}" not in fired
    assert out == pytest.approx(float(want.sum()), rel=1e-5)


def test_scatter_sum_of_overlapping_windows_adds_them():
    """Two narrow views that overlap (x[:, :4] and x[:, 2:]) do not tile x: the fused kernel starts from zeros and
    adds, and the overlap gets both gradients, as torch's."""
    import torch

    a = np.random.default_rng(5).standard_normal((3, 6)).astype(np.float32)

    def loss(x):
        return (x[:, :4] * 2.0).sum() + (x[:, 2:] ** 2).sum()

    tx = torch.tensor(a, requires_grad=True)
    loss(tx).backward()
    x = plast.tensor(a, requires_grad=True)
    g, fired = fused(lambda: loss(x).backward() or x.grad.numpy())
    assert "scatter_sum2" in fired
    np.testing.assert_allclose(g, tx.grad.numpy(), rtol=1e-6)
