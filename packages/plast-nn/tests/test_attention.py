"""MultiheadAttention against torch.nn.MultiheadAttention (masks, key_padding_mask, need_weights, layouts,
kdim/vdim, bias_kv, zero_attn), and plast's Transformer blocks against the same blocks written in torch."""

import math

import numpy as np
import pytest
import torch

import plast
import plast.nn as nn

TOL = dict(rtol=1e-4, atol=1e-5)


def _close(a, b, tol=TOL, rel=1e-5):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, **tol)
    if a.size and np.linalg.norm(b) > 0:
        assert np.linalg.norm(a - b) / np.linalg.norm(b) <= rel


def _load(pm, tm):
    missing, unexpected = pm.load_state_dict(
        {k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}
    )
    assert not missing and not unexpected


def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _pair(x, grad=True):
    return plast.tensor(x, requires_grad=grad), torch.tensor(x, requires_grad=grad)


def _mha_pair(E, H, **kw):
    tm = torch.nn.MultiheadAttention(E, H, **kw)
    with torch.no_grad():  # non-zero biases so their gradients mean something
        for name, p in tm.named_parameters():
            if "bias" in name:
                p.copy_(torch.randn(p.shape) * 0.1)
    pm = nn.MultiheadAttention(E, H, **kw)
    _load(pm, tm)
    return pm, tm


def _check_mha(pm, tm, q, k, v, self_attn=False, **fkw):
    (pq, tq), (pk, tk), (pv, tv) = _pair(q), _pair(k), _pair(v)
    if self_attn:
        pk = pv = pq
        tk = tv = tq
    po, pw = pm(pq, pk, pv, **fkw)
    to, tw = tm(tq, tk, tv, **fkw)
    _close(po, to)
    if tw is None:
        assert pw is None
    else:
        _close(pw, tw)
    up = np.random.default_rng(9).uniform(0.5, 1.5, tuple(to.shape)).astype(np.float32)
    loss_p = (po * plast.tensor(up)).sum() + (pw.sum() if pw is not None else 0)
    loss_t = (to * torch.tensor(up)).sum() + (tw.sum() if tw is not None else 0)
    loss_p.backward()
    loss_t.backward()
    _close(pq.grad, tq.grad)
    if not self_attn:
        _close(pk.grad, tk.grad)
        _close(pv.grad, tv.grad)
    tparams = dict(tm.named_parameters())
    for name, p in pm.named_parameters():
        _close(p.grad, tparams[name].grad)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_mha_self_attention_matches_torch(batch_first, need_weights, average):
    pm, tm = _mha_pair(16, 4, batch_first=batch_first)
    x = _randn(3, 5, 16) if batch_first else _randn(5, 3, 16)
    _check_mha(pm, tm, x, x, x, self_attn=True, need_weights=need_weights, average_attn_weights=average)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("mask_kind", ["bool2d", "float2d", "bool3d", "float3d"])
@pytest.mark.parametrize("kpm_kind", [None, "bool", "float"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_masks_match_torch(mask_kind, kpm_kind, need_weights):
    E, H, N, L, S = 8, 2, 3, 4, 6
    pm, tm = _mha_pair(E, H, batch_first=True)
    rng = np.random.default_rng(1)
    q, k, v = _randn(N, L, E, seed=1), _randn(N, S, E, seed=2), _randn(N, S, E, seed=3)
    shape = (L, S) if mask_kind.endswith("2d") else (N * H, L, S)
    banned = rng.random(shape) < 0.3
    banned[..., 0] = False  # every query keeps at least one key (torch gives NaN rows otherwise)
    if mask_kind.startswith("bool"):
        pmask, tmask = plast.tensor(banned), torch.tensor(banned)
    else:
        fm = np.where(banned, -np.inf, rng.standard_normal(shape)).astype(np.float32)
        pmask, tmask = plast.tensor(fm), torch.tensor(fm)
    pk = tk = None
    if kpm_kind is not None:
        kb = rng.random((N, S)) < 0.3
        kb[:, 0] = False
        if kpm_kind == "bool":
            pk, tk = plast.tensor(kb), torch.tensor(kb)
        else:
            kf = np.where(kb, -np.inf, 0.0).astype(np.float32)
            if mask_kind.startswith("bool"):  # torch requires matching mask types
                pmask, tmask = (
                    plast.tensor(np.where(banned, -np.inf, 0.0).astype(np.float32)),
                    torch.tensor(np.where(banned, -np.inf, 0.0).astype(np.float32)),
                )
            pk, tk = plast.tensor(kf), torch.tensor(kf)
    (pq, tq), (pkk, tkk), (pv, tv) = _pair(q), _pair(k), _pair(v)
    po, pw = pm(pq, pkk, pv, attn_mask=pmask, key_padding_mask=pk, need_weights=need_weights)
    to, tw = tm(tq, tkk, tv, attn_mask=tmask, key_padding_mask=tk, need_weights=need_weights)
    _close(po, to)
    if need_weights:
        _close(pw, tw)
    po.sum().backward()
    to.sum().backward()
    _close(pq.grad, tq.grad)
    _close(pkk.grad, tkk.grad)
    _close(pm.in_proj_weight.grad, tm.in_proj_weight.grad)


def test_mha_is_causal_hint_and_unbatched():
    E, H, L = 8, 2, 5
    pm, tm = _mha_pair(E, H)
    causal_t = torch.nn.Transformer.generate_square_subsequent_mask(L)
    causal_p = nn.causal_mask(L, dtype=plast.float32)
    assert causal_p.tolist() == causal_t.tolist()
    assert (~nn.causal_mask(L)).tolist() == (causal_t == -math.inf).tolist()
    x = _randn(L, 2, E)
    for need_weights in (False, True):
        po, _ = pm(*[plast.tensor(x)] * 3, attn_mask=causal_p, is_causal=True, need_weights=need_weights)
        to, _ = tm(*[torch.tensor(x)] * 3, attn_mask=causal_t, is_causal=True, need_weights=need_weights)
        _close(po, to)
    # a bool mask (True = masked out) means the same
    po, _ = pm(*[plast.tensor(x)] * 3, attn_mask=~nn.causal_mask(L))
    _close(po, to)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        pm(*[plast.tensor(x)] * 3, is_causal=True)
    # unbatched (L, E), with a (S,) key padding mask
    xu = _randn(L, E, seed=4)
    kpm = np.array([False, False, True, False, True])
    po, pw = pm(*[plast.tensor(xu)] * 3, key_padding_mask=plast.tensor(kpm))
    to, tw = tm(*[torch.tensor(xu)] * 3, key_padding_mask=torch.tensor(kpm))
    _close(po, to)
    _close(pw, tw)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kdim=5, vdim=7),
        dict(bias=False),
        dict(add_bias_kv=True),
        dict(add_zero_attn=True),
        dict(add_bias_kv=True, add_zero_attn=True, kdim=6, vdim=6),
    ],
    ids=["kdim-vdim", "no-bias", "bias-kv", "zero-attn", "all"],
)
def test_mha_options_match_torch(kw):
    E, H, N, L, S = 8, 2, 2, 3, 4
    pm, tm = _mha_pair(E, H, **kw)
    assert list(pm.state_dict()) == list(tm.state_dict())
    q = _randn(L, N, E, seed=5)
    k = _randn(S, N, kw.get("kdim", E), seed=6)
    v = _randn(S, N, kw.get("vdim", E), seed=7)
    kpm = np.zeros((N, S), bool)
    kpm[1, 2] = True
    _check_mha(pm, tm, q, k, v)
    po, _ = pm(plast.tensor(q), plast.tensor(k), plast.tensor(v), key_padding_mask=plast.tensor(kpm))
    to, _ = tm(torch.tensor(q), torch.tensor(k), torch.tensor(v), key_padding_mask=torch.tensor(kpm))
    _close(po, to)


def test_mha_parameters_init_and_errors():
    plast.manual_seed(0)
    m = nn.MultiheadAttention(64, 8)
    t = torch.nn.MultiheadAttention(64, 8)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in t.named_parameters()
    ]
    bound = math.sqrt(6 / (64 + 192))  # xavier_uniform over the [3E, E] matrix, as torch
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and w.max() > 0.98 * bound
    assert not np.any(m.in_proj_bias.detach().numpy()) and not np.any(m.out_proj.bias.detach().numpy())
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(10, 3)
    x = plast.ones(4, 2, 64)
    for args, kw, pat in [
        ((plast.ones(4, 2, 63),) * 3, {}, r"MultiheadAttention.*expected query of shape \(L, N, 64\)"),
        ((x, plast.ones(5, 3, 64), plast.ones(5, 3, 64)), {}, "same batch size"),
        ((x, plast.ones(5, 2, 64), plast.ones(6, 2, 64)), {}, "same sequence"),
        (
            (x, x, x),
            dict(key_padding_mask=plast.ones(2, 3, dtype=plast.bool)),
            r"key_padding_mask of shape \(2, 4\)",
        ),
        (
            (x, x, x),
            dict(attn_mask=plast.ones(4, 5, dtype=plast.bool)),
            r"attn_mask of shape \(4, 4\) or \(16, 4, 4\)",
        ),
        ((plast.ones(2, 2, 2, 64),) * 3, {}, "expected query of shape"),
    ]:
        with pytest.raises(plast.ShapeError, match=pat):
            m(*args, **kw)


def test_mha_inside_jit():
    pm, tm = _mha_pair(8, 2, batch_first=True)

    @plast.jit
    def f(x):
        out, w = pm(x, x, x)
        return out, w

    for seed in range(3):
        x = _randn(2, 3, 8, seed=seed)
        po, pw = f(plast.tensor(x))
        to, tw = tm(*[torch.tensor(x)] * 3)
        _close(po, to)
        _close(pw, tw)
        plast.reset_transient_arenas()
    assert f.replays == 2


# ---- plast's blocks against the same blocks in torch ----


class TorchBlock(torch.nn.Module):
    """The pre-LN block of plast.nn.TransformerBlock, written with torch modules under the same names."""

    def __init__(self, d, h, d_ff, causal):
        super().__init__()
        self.causal = causal
        self.ln_1 = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, h, batch_first=True)
        self.ln_2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(d, d_ff), torch.nn.GELU(), torch.nn.Linear(d_ff, d), torch.nn.Dropout(0.0)
        )

    def forward(self, x, key_padding_mask=None):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1]) if self.causal else None
        h = self.ln_1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, key_padding_mask=key_padding_mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln_2(x))


class TorchEncoder(torch.nn.Module):
    def __init__(self, n, d, h, d_ff, causal):
        super().__init__()
        self.layers = torch.nn.ModuleList(TorchBlock(d, h, d_ff, causal) for _ in range(n))
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x, key_padding_mask=None):
        for layer in self.layers:
            x = layer(x, key_padding_mask)
        return self.norm(x)


def _randomize(tm):
    with torch.no_grad():
        for name, p in tm.named_parameters():
            if "ln" in name or "norm" in name or "bias" in name:
                p.copy_(torch.randn(p.shape) * 0.2 + (1.0 if name.endswith("weight") else 0.0))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kpm", [False, True])
def test_transformer_block_and_encoder_match_torch(causal, kpm):
    x = _randn(2, 5, 16, seed=11)
    mask = np.zeros((2, 5), bool)
    mask[1, 3:] = True
    for pm, tm in [
        (nn.TransformerBlock(16, 4, d_ff=24, causal=causal), TorchBlock(16, 4, 24, causal)),
        (nn.TransformerBlockStack(2, 16, 4, d_ff=24, causal=causal), TorchEncoder(2, 16, 4, 24, causal)),
    ]:
        _randomize(tm)
        _load(pm, tm)
        px, tx = _pair(x)
        po = pm(px, key_padding_mask=plast.tensor(mask) if kpm else None)
        to = tm(tx, torch.tensor(mask) if kpm else None)
        _close(po, to)
        up = np.random.default_rng(3).uniform(0.5, 1.5, x.shape).astype(np.float32)
        po.backward(plast.tensor(up))
        to.backward(torch.tensor(up))
        _close(px.grad, tx.grad)
        tparams = dict(tm.named_parameters())
        for name, p in pm.named_parameters():
            _close(p.grad, tparams[name].grad)


def test_causal_block_ignores_the_future():
    blk = nn.TransformerBlock(8, 2, causal=True)
    x = _randn(1, 6, 8, seed=12)
    y = x.copy()
    y[:, 4:] += 5.0
    a, b = blk(plast.tensor(x)).detach().numpy(), blk(plast.tensor(y)).detach().numpy()
    np.testing.assert_allclose(a[:, :4], b[:, :4], rtol=1e-5, atol=1e-6)
    assert not np.allclose(a[:, 4:], b[:, 4:])


def test_positional_encodings():
    pe = nn.SinusoidalPositionalEncoding(6, max_len=10)
    assert "pe" not in pe.state_dict()  # a fixed table, not state
    out = pe(plast.zeros(2, 4, 6), offset=3).numpy()
    pos = np.arange(3, 7)[:, None]
    i = np.arange(3)[None, :]
    ang = pos / 10000 ** (2 * i / 6)
    ref = np.zeros((4, 6))
    ref[:, 0::2], ref[:, 1::2] = np.sin(ang), np.cos(ang)
    np.testing.assert_allclose(out[0], ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], ref, rtol=1e-5, atol=1e-6)
    lp = nn.LearnedPositionalEmbedding(10, 6)
    x = plast.zeros(1, 3, 6)
    np.testing.assert_allclose(lp(x, offset=2).detach().numpy()[0], lp.weight.detach().numpy()[2:5])
    assert 0.015 < lp.weight.detach().numpy().std() < 0.025
    with pytest.raises(plast.ShapeError, match=r"exceed max_len=10"):
        pe(plast.zeros(1, 11, 6))
    with pytest.raises(plast.ShapeError, match=r"LearnedPositionalEmbedding.*\(N, T, 6\)"):
        lp(plast.zeros(3, 6))
    with pytest.raises(plast.ShapeError, match=r"TransformerBlock.*\(N, T, 8\)"):
        nn.TransformerBlock(8, 2)(plast.zeros(2, 3, 7))


def test_transformer_lm_learns_and_ties_weights():
    plast.manual_seed(0)
    lm = nn.TransformerLM(vocab_size=12, d_model=32, n_heads=4, num_layers=2, max_len=16)
    assert lm.head.weight is lm.tok_emb.weight
    names = [n for n, _ in lm.named_parameters()]
    assert "head.weight" not in names and "tok_emb.weight" in names
    seq = plast.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 2, 3, 4, 5]])
    opt = plast.optim.AdamW(lm.parameters(), lr=3e-3, weight_decay=0.0)
    first = None
    for _ in range(60):
        _, loss = lm(seq[:, :-1], seq[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        last = loss.item()
        first = last if first is None else first
        plast.reset_transient_arenas()
    assert last < 0.2 * first
    logits, none = lm(seq)
    assert none is None and logits.shape == (1, 16, 12)
    with pytest.raises(plast.ShapeError, match=r"T <= max_len=16"):
        lm(plast.zeros(1, 17, dtype=plast.int64))
    sin = nn.TransformerLM(
        vocab_size=12, d_model=8, n_heads=2, num_layers=1, max_len=8, positional="sinusoidal"
    )
    assert sin(plast.tensor([[1, 2]]))[0].shape == (1, 2, 12)
