"""Eager training loops of real models with and without backward replays (plast.autograd.backward_replay): the
replayed backward must leave exactly what the ordinary one leaves, step after step, bit for bit — through
dropout's fresh masks, embeddings, attention, layer norm, cross-entropy, gradient accumulation and eval
passes in between."""

import numpy as np
import pytest

import plast
import plast.nn as nn
from plast.autograd import backward_replay
from plast.graph import realize

pytestmark = pytest.mark.skipif(
    not realize._cache_enabled(), reason="replays are off with the plan cache (PLAST_PLAN_CACHE=0)"
)


def _train(make, steps, replay, accumulate=1, eval_every=0):
    """Build a model and optimizer with a fixed seed and train them `steps` steps; returns per-step losses,
    the final parameters and how many backward calls were replayed."""
    plast.manual_seed(0)
    model, opt, batches, loss_fn = make()
    before = backward_replay.stats()["replays"]
    losses = []
    ctx = backward_replay.disabled() if not replay else _null()
    with ctx:
        for step in range(steps):
            opt.zero_grad()
            for k in range(accumulate):
                x, y = batches[(step * accumulate + k) % len(batches)]
                loss = loss_fn(model, x, y) / accumulate
                loss.backward()
                losses.append(loss.item())
            opt.step()
            if eval_every and step % eval_every == 0:
                model.eval()
                with plast.no_grad():
                    losses.append(loss_fn(model, *batches[0]).item())
                model.train()
            plast.reset_transient_arenas()
    params = [p.detach().numpy().copy() for p in model.parameters()]
    return losses, params, backward_replay.stats()["replays"] - before


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _same(make, steps=6, min_replays=1, **kw):
    la, pa, ra = _train(make, steps, replay=False, **kw)
    lb, pb, rb = _train(make, steps, replay=True, **kw)
    assert ra == 0 and rb >= min_replays
    assert la == lb
    for a, b in zip(pa, pb):
        np.testing.assert_array_equal(a, b)


def _gpt(dropout):
    def make():
        cfg = nn.GPTConfig(
            block_size=8, vocab_size=17, n_layer=2, n_head=2, n_embd=16, dropout=dropout, bias=True
        )
        model = nn.GPT(cfg)
        opt = plast.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
        rng = np.random.default_rng(1)
        batches = [tuple(plast.tensor(rng.integers(0, 17, (3, 8))) for _ in range(2)) for _ in range(3)]

        def loss_fn(model, x, y):
            return model(x, y)[1]  # (logits, loss): the model computes the cross-entropy over every position

        return model, opt, batches, loss_fn

    return make


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_gpt_training_is_the_same_with_replays(dropout):
    _same(_gpt(dropout), steps=6, min_replays=3)


def _mlp(opt_name):
    def make():
        model = nn.Sequential(nn.Linear(5, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
        opt = getattr(plast.optim, opt_name)(model.parameters(), lr=0.05)
        rng = np.random.default_rng(2)
        batches = [
            (
                plast.tensor(rng.standard_normal((7, 5)).astype(np.float32)),
                plast.tensor(rng.integers(0, 3, 7)),
            )
            for _ in range(4)
        ]
        ce = nn.CrossEntropyLoss(label_smoothing=0.1)
        return model, opt, batches, lambda model, x, y: ce(model(x), y)

    return make


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "RMSprop"])
def test_mlp_training_is_the_same_with_replays(opt_name):
    _same(_mlp(opt_name), steps=8, min_replays=4)


def test_gradient_accumulation_and_eval_passes_are_the_same_with_replays():
    # two backward calls per step: the second accumulates into .grad (another key than the first)
    _same(_mlp("SGD"), steps=8, min_replays=4, accumulate=2, eval_every=3)
