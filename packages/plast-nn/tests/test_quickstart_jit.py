"""The seed README's quick start, verbatim, with @p.jit: final loss < 0.01, also with fusion and the plan cache
off; and jitted training equal to eager training."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import plast

QUICKSTART = """
import plast as p
p.init_arenas(device=p.Device.CPU)
model = p.nn.Sequential(p.nn.Linear(2, 8), p.nn.ReLU(), p.nn.Linear(8, 1))
loss_fn = p.nn.MSELoss()
optimizer = p.optim.Adam(model.parameters(), lr=0.01)
x_data = p.tensor([[0, 0], [0, 1], [1, 0], [1, 1]])
y_data = p.tensor([[0], [1], [1], [0]])

@p.jit
def train_step(x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss

for epoch in range(1001):
    loss = train_step(x_data, y_data)
    p.reset_transient_arenas()
    if epoch % 200 == 0:
        print(f"Epoch {epoch:4d} | Loss: {loss.item():.6f}")
"""


def _run_quickstart(extra_env):
    env = {**os.environ, **extra_env}
    out = subprocess.run(
        [sys.executable, "-c", QUICKSTART], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("Epoch")]
    assert len(lines) == 6, out.stdout
    return [float(ln.rsplit(":", 1)[1]) for ln in lines]


@pytest.mark.parametrize(
    "env",
    [{}, {"PLAST_FUSION": "0"}, {"PLAST_PLAN_CACHE": "0"}],
    ids=["default", "no-fusion", "no-plan-cache"],
)
def test_seed_quickstart_converges(env):
    losses = _run_quickstart(env)
    assert losses[-1] < 0.01, losses
    assert losses[-1] < losses[0]


def test_quickstart_example_is_the_readme_text():
    example = Path(__file__).resolve().parents[3] / "examples" / "xor.py"
    if not example.exists():
        pytest.skip("examples/xor.py not in this checkout")
    body = example.read_text()
    for line in QUICKSTART.strip().splitlines():
        assert line in body, line


def _mlp_run(use_jit, steps=100):
    plast.manual_seed(0)
    model = plast.nn.Sequential(plast.nn.Linear(20, 32), plast.nn.ReLU(), plast.nn.Linear(32, 5))
    opt = plast.optim.Adam(model.parameters(), lr=0.01)
    sched = plast.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    x = plast.randn(16, 20)
    y = plast.randint(0, 5, (16,))

    def step(x, y):
        opt.zero_grad()
        loss = plast.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = plast.jit(step) if use_jit else step
    losses = []
    for _ in range(steps):
        losses.append(fn(x, y).item())
        sched.step()
        plast.reset_transient_arenas()
    return losses, [p.detach().numpy().copy() for p in model.parameters()], fn


def test_jit_equals_eager_with_changing_learning_rate():
    eager, p_eager, _ = _mlp_run(False)
    jitted, p_jit, fn = _mlp_run(True)
    np.testing.assert_array_equal(jitted, eager)
    for a, b in zip(p_eager, p_jit):
        np.testing.assert_array_equal(a, b)
    assert fn.traces == 1 and fn.replays == 99


def test_jit_retraces_on_eval_and_batch_size():
    plast.manual_seed(0)
    model = (
        plast.nn.Sequential(plast.nn.Linear(4, 4), plast.nn.Dropout(0.5))
        if hasattr(plast.nn, "Dropout")
        else plast.nn.Sequential(plast.nn.Linear(4, 4))
    )

    @plast.jit
    def f(x):
        return model(x).sum()

    f(plast.ones(2, 4))
    f(plast.ones(2, 4))
    model.eval()
    f(plast.ones(2, 4))
    f(plast.ones(3, 4))
    assert f.traces == 3 and f.replays == 1


def test_kept_losses_cost_only_their_bytes():
    plast.manual_seed(0)
    model = plast.nn.Sequential(plast.nn.Linear(2, 8), plast.nn.ReLU(), plast.nn.Linear(8, 1))
    opt = plast.optim.SGD(model.parameters(), lr=0.1)
    x = plast.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = plast.tensor([[0.0], [1.0], [1.0], [0.0]])

    @plast.jit
    def step(x, y):
        opt.zero_grad()
        loss = plast.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    losses = [step(x, y) for _ in range(50)]
    before = plast.arena_stats()["cpu"]["persistent"]["in_use_bytes"]
    losses += [step(x, y) for _ in range(1000)]
    after = plast.arena_stats()["cpu"]["persistent"]["in_use_bytes"]
    plast.reset_transient_arenas()
    # each kept loss is one 64-byte block (the smallest size class); nothing else grows
    assert after - before == 1000 * 64
    assert all(np.isfinite(v.item()) for v in losses)


def _rss_kb():
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.mark.parametrize("resets", [True, False], ids=["with-resets", "without-resets"])
@pytest.mark.parametrize("use_jit", [True, False], ids=["jit", "eager"])
def test_training_memory_is_constant(resets, use_jit):
    plast.manual_seed(0)
    model = plast.nn.Sequential(plast.nn.Linear(32, 64), plast.nn.ReLU(), plast.nn.Linear(64, 4))
    opt = plast.optim.Adam(model.parameters(), lr=1e-3)
    x = plast.randn(16, 32)
    y = plast.randint(0, 4, (16,))

    def step(x, y):
        opt.zero_grad()
        loss = plast.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = plast.jit(step) if use_jit else step

    def run(n):
        for _ in range(n):
            v = fn(x, y).item() if not use_jit else fn(x, y)
            if resets:
                plast.reset_transient_arenas()
        return v

    run(200)
    before = _rss_kb()
    run(2000)
    growth = _rss_kb() - before
    assert growth < 1024, f"RSS grew by {growth} kB over 2,000 steps"
