"""The seed quick start (XOR), run eagerly: the same program as the README's, without ``@p.jit`` (the jit lands
with engine II; the jitted version becomes its own test then)."""

import time

import plast as p
import plast.nn as nn
import plast.optim as optim


def _quickstart(epochs=1001):
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.MSELoss()

    x_data = p.tensor([[0, 0], [0, 1], [1, 0], [1, 1]])
    y_data = p.tensor([[0], [1], [1], [0]])

    def train_step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    losses = []
    t0 = time.perf_counter()
    for epoch in range(epochs):
        loss = train_step(x_data, y_data)
        if epoch % 100 == 0:
            losses.append(loss.item())
        p.reset_transient_arenas()
    elapsed = time.perf_counter() - t0
    return model, losses, elapsed / epochs


def test_xor_quickstart_converges_eagerly():
    p.manual_seed(p.Generator().initial_seed())  # the default seed, as in a fresh process
    model, losses, step_s = _quickstart()
    print(f"\neager XOR step: {step_s * 1e3:.3f} ms; loss every 100 epochs: {losses}")
    assert losses[-1] < 0.01
    out = model(p.tensor([[0, 0], [0, 1], [1, 0], [1, 1]])).detach()
    assert [round(v[0]) for v in out.tolist()] == [0, 1, 1, 0]


def test_xor_quickstart_converges_for_several_seeds():
    """Not a lucky draw: with torch's init XOR trains from most seeds. This tiny net sometimes starts with
    ReLUs that never recover, in torch too: over seeds 0-59, plast stalled on 2 (0 and 27) and torch on 2."""
    ok = 0
    for seed in range(6):
        p.manual_seed(seed)
        _, losses, _ = _quickstart(epochs=1001)
        ok += losses[-1] < 0.01
    assert ok >= 5


def test_parameters_survive_resets():
    model = nn.Linear(2, 1)
    w = model.weight.tolist()
    model(p.ones(3, 2)).sum().backward()
    p.reset_transient_arenas()
    assert model.weight.tolist() == w and model.weight.grad.tolist()[0] == [3.0, 3.0]
