"""plast.save(model, f) of whole modules (torch.save(model, f)) and their reload with safe_globals: plast's own
layers come back without an allow-list, a user's model class needs it; the reloaded model computes the same
outputs and trains."""

import io

import numpy as np
import pytest

import plast
import plast.nn as nn
from plast import serialization


class LanguageModel(nn.Module):
    """word_language_model's TransformerModel, small: an Embedding, a TransformerEncoder, a Linear decoder."""

    def __init__(self, ntoken=20, d=16):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, d)
        layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0)
        self.transformer = nn.TransformerEncoder(layer, 2)
        self.decoder = nn.Linear(d, ntoken)
        self.register_buffer("scale", plast.tensor(4.0))

    def forward(self, x):
        return self.decoder(self.transformer(self.encoder(x) * self.scale))


def _round_trip(model, allowed=()):
    buf = io.BytesIO()
    plast.save(model, buf)
    buf.seek(0)
    with serialization.safe_globals(list(allowed)):
        return plast.load(buf)


def test_user_model_round_trip_same_outputs_and_it_trains():
    model = LanguageModel().eval()
    x = plast.tensor(np.random.default_rng(0).integers(0, 20, (7, 3)))
    with pytest.raises(serialization.UnpicklingError, match="LanguageModel"):
        _round_trip(model)
    back = _round_trip(model, [LanguageModel])
    assert type(back) is LanguageModel and not back.training and not back.transformer.layers[1].training
    assert list(back.state_dict()) == list(model.state_dict())
    assert back.scale.item() == 4.0 and "scale" in dict(back.named_buffers())
    np.testing.assert_array_equal(back(x).detach().numpy(), model(x).detach().numpy())
    # its parameters are Parameters that require grad, and belong to it (not to the saved model)
    params = list(back.parameters())
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in params)
    assert not any(p is q for p in params for q in model.parameters())
    back.train()
    opt = plast.optim.AdamW(back.parameters(), lr=1e-2)
    before = back.decoder.weight.detach().numpy().copy()
    loss = back(x).square().mean()
    loss.backward()
    opt.step()
    assert not np.array_equal(back.decoder.weight.detach().numpy(), before)
    np.testing.assert_array_equal(model.decoder.weight.detach().numpy(), before)  # the original is untouched


@pytest.mark.parametrize(
    "make",
    [
        lambda: nn.LSTM(4, 6, 2, bidirectional=True, proj_size=3),
        lambda: nn.GRU(4, 5, batch_first=True),
        lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8, 2)),
        lambda: nn.GPT(nn.GPTConfig(block_size=8, vocab_size=11, n_layer=1, n_head=2, n_embd=8)),
    ],
    ids=["lstm", "gru", "sequential", "gpt"],
)
def test_plast_modules_need_no_allow_list(make):
    model = make()
    back = _round_trip(model)
    assert type(back) is type(model) and repr(back) == repr(model)
    for (n1, p1), (n2, p2) in zip(model.state_dict().items(), back.state_dict().items()):
        assert n1 == n2 and np.array_equal(p1.numpy(), p2.numpy())


def test_tied_weights_stay_tied():
    model = nn.GPT(nn.GPTConfig(block_size=8, vocab_size=11, n_layer=1, n_head=2, n_embd=8))
    assert model.lm_head.weight is model.transformer.wte.weight
    back = _round_trip(model)
    assert back.lm_head.weight is back.transformer.wte.weight
