"""torch.nn's Transformer family (TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder,
TransformerDecoder, Transformer) against torch: torch's state dict loads strictly, and outputs and every
parameter's and input's gradient agree, in train mode with dropout 0 and in eval mode, with bool and float
masks, padding masks, causal hints, pre-/post-LN and each activation."""

import numpy as np
import pytest
import torch

import plast
import plast.nn as nn

TOL = dict(rtol=2e-4, atol=2e-5)


def _close(a, b):
    a, b = a.detach().numpy(), b.detach().numpy()
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, **TOL)


def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _load(pm, tm):
    with torch.no_grad():  # non-trivial norms and biases so their gradients mean something
        for name, p in tm.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(torch.randn(p.shape) * 0.1)
    missing, unexpected = pm.load_state_dict(
        {k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}, strict=True
    )
    assert not missing and not unexpected
    assert list(pm.state_dict()) == list(tm.state_dict())


def _pair(x):
    return plast.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


def _mask_pair(m):
    if m is None:
        return None, None
    return plast.tensor(m), torch.tensor(m)


def _backward_and_compare(pm, tm, pout, tout, inputs):
    _close(pout, tout)
    w = np.random.default_rng(5).uniform(0.5, 1.5, tuple(tout.shape)).astype(np.float32)
    (pout * plast.tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    tparams = dict(tm.named_parameters())
    assert [n for n, _ in pm.named_parameters()] == list(tparams)
    for name, p in pm.named_parameters():
        _close(p.grad, tparams[name].grad)
    for a, b in inputs:
        _close(a.grad, b.grad)


def _causal_bool(n):
    return np.triu(np.ones((n, n), dtype=bool), k=1)


def _pad_mask(n, s, lengths):
    return np.arange(s)[None, :] >= np.asarray(lengths)[:, None]


ACTS = {"relu": ("relu", "relu"), "gelu": ("gelu", "gelu"), "callable": (plast.tanh, torch.tanh)}


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("mask", [None, "bool", "float", "causal_hint"])
@pytest.mark.parametrize("padding", [False, True])
def test_encoder_layer_matches_torch(norm_first, batch_first, act, mask, padding):
    pa, ta = ACTS[act]
    kw = dict(dim_feedforward=24, dropout=0.0, batch_first=batch_first, norm_first=norm_first)
    tm = torch.nn.TransformerEncoderLayer(16, 4, activation=ta, **kw)
    pm = nn.TransformerEncoderLayer(16, 4, activation=pa, **kw)
    _load(pm, tm)
    S, N = 5, 3
    x = _randn(N, S, 16, seed=1) if batch_first else _randn(S, N, 16, seed=1)
    px, tx = _pair(x)
    m = None
    if mask == "bool":
        m = np.random.default_rng(2).uniform(size=(S, S)) < 0.3
        np.fill_diagonal(m, False)
    elif mask in ("float", "causal_hint"):
        m = np.where(_causal_bool(S), -np.inf, 0.0).astype(np.float32)
        if mask == "float":
            m = m + _randn(S, S, seed=3) * 0.1
    pmask, tmask = _mask_pair(m)
    kpm = _pad_mask(N, S, [5, 3, 4]) if padding else None
    pk, tk = _mask_pair(kpm)
    fkw = dict(is_causal=True) if mask == "causal_hint" else {}
    pout = pm(px, src_mask=pmask, src_key_padding_mask=pk, **fkw)
    tout = tm(tx, src_mask=tmask, src_key_padding_mask=tk, **fkw)
    _backward_and_compare(pm, tm, pout, tout, [(px, tx)])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("masks", [False, True])
def test_decoder_layer_matches_torch(norm_first, batch_first, masks):
    kw = dict(dim_feedforward=20, dropout=0.0, batch_first=batch_first, norm_first=norm_first)
    tm = torch.nn.TransformerDecoderLayer(8, 2, activation="gelu", **kw)
    pm = nn.TransformerDecoderLayer(8, 2, activation="gelu", **kw)
    _load(pm, tm)
    T, S, N = 4, 6, 2
    shape_t, shape_s = ((N, T, 8), (N, S, 8)) if batch_first else ((T, N, 8), (S, N, 8))
    (pt, tt), (pmem, tmem) = _pair(_randn(*shape_t, seed=4)), _pair(_randn(*shape_s, seed=5))
    fkw_p, fkw_t = {}, {}
    if masks:
        tgt_mask = np.where(_causal_bool(T), -np.inf, 0.0).astype(np.float32)
        mem_mask = np.random.default_rng(6).uniform(size=(T, S)) < 0.3
        mem_mask[:, 0] = False
        for d, conv in ((fkw_p, plast.tensor), (fkw_t, torch.tensor)):
            d.update(
                tgt_mask=conv(tgt_mask),
                memory_mask=conv(mem_mask),
                tgt_key_padding_mask=conv(_pad_mask(N, T, [4, 3])),
                memory_key_padding_mask=conv(_pad_mask(N, S, [6, 2])),
                tgt_is_causal=True,
            )
    pout = pm(pt, pmem, **fkw_p)
    tout = tm(tt, tmem, **fkw_t)
    _backward_and_compare(pm, tm, pout, tout, [(pt, tt), (pmem, tmem)])


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack_matches_torch(train, norm_first):
    # word_language_model's use: a post-LN stack on (S, N, E) with the square subsequent mask
    layer_t = torch.nn.TransformerEncoderLayer(
        16, 2, 32, dropout=0.0 if train else 0.3, norm_first=norm_first
    )
    tm = torch.nn.TransformerEncoder(layer_t, 3, norm=torch.nn.LayerNorm(16), enable_nested_tensor=False)
    layer_p = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0 if train else 0.3, norm_first=norm_first)
    pm = nn.TransformerEncoder(layer_p, 3, norm=nn.LayerNorm(16), enable_nested_tensor=False)
    assert len(pm.layers) == 3 and pm.layers[0] is not pm.layers[1] and pm.layers[0] is not layer_p
    _load(pm, tm)
    pm.train(train)
    tm.train(train)
    S, N = 7, 2
    px, tx = _pair(_randn(S, N, 16, seed=7))
    pmask = nn.Transformer.generate_square_subsequent_mask(S)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(S)
    np.testing.assert_array_equal(pmask.numpy(), tmask.numpy())
    pk, tk = _mask_pair(_pad_mask(N, S, [7, 5]))
    pout = pm(px, mask=pmask, src_key_padding_mask=pk)
    tout = tm(tx, mask=tmask, src_key_padding_mask=tk)
    _backward_and_compare(pm, tm, pout, tout, [(px, tx)])


def test_encoder_eval_fast_path_agrees_on_unpadded_positions():
    # torch's nested-tensor fast path (eval, batch_first, padding mask) zeroes padded rows; plast does not
    tm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2).eval()
    pm = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2).eval()
    _load(pm, tm)
    x = _randn(2, 5, 8, seed=8)
    kpm = _pad_mask(2, 5, [5, 3])
    with torch.no_grad():
        tout = tm(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm)).numpy()
    pout = pm(plast.tensor(x), src_key_padding_mask=plast.tensor(kpm)).detach().numpy()
    keep = ~kpm
    np.testing.assert_allclose(pout[keep], tout[keep], **TOL)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("train", [True, False])
def test_transformer_matches_torch(batch_first, train):
    kw = dict(
        d_model=8,
        nhead=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=16,
        dropout=0.0 if train else 0.2,
        batch_first=batch_first,
    )
    tm, pm = torch.nn.Transformer(**kw), nn.Transformer(**kw)
    _load(pm, tm)
    pm.train(train)
    tm.train(train)
    S, T, N = 6, 4, 3
    shp = (lambda L: (N, L, 8)) if batch_first else (lambda L: (L, N, 8))
    (ps, ts), (pt, tt) = _pair(_randn(*shp(S), seed=9)), _pair(_randn(*shp(T), seed=10))
    tgt_mask_p = nn.Transformer.generate_square_subsequent_mask(T)
    tgt_mask_t = torch.nn.Transformer.generate_square_subsequent_mask(T)
    pk, tk = _mask_pair(_pad_mask(N, S, [6, 6, 2]))
    pout = pm(ps, pt, tgt_mask=tgt_mask_p, src_key_padding_mask=pk, memory_key_padding_mask=pk)
    tout = tm(ts, tt, tgt_mask=tgt_mask_t, src_key_padding_mask=tk, memory_key_padding_mask=tk)
    _backward_and_compare(pm, tm, pout, tout, [(ps, ts), (pt, tt)])


def test_transformer_init_names_and_errors():
    pm = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)
    tm = torch.nn.Transformer(
        d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16
    )
    assert [(n, tuple(p.shape)) for n, p in pm.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in tm.named_parameters()
    ]
    # every matrix is xavier_uniform_: within sqrt(6 / (fan_in + fan_out))
    w = pm.encoder.layers[0].linear1.weight.detach().numpy()
    assert np.abs(w).max() <= np.sqrt(6 / (8 + 16)) and w.std() > 0.1
    with pytest.raises(RuntimeError, match="batch number"):
        pm(plast.zeros(5, 2, 8), plast.zeros(4, 3, 8))
    with pytest.raises(ValueError, match="d_model"):
        pm(plast.zeros(5, 2, 7), plast.zeros(4, 2, 7))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    with pytest.raises(TypeError, match="TransformerBlockStack"):
        nn.TransformerEncoder(2, 16)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        nn.TransformerEncoderLayer(8, 2)(plast.zeros(3, 1, 8), is_causal=True)


def test_unbatched_encoder_layer():
    tm = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    pm = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    _load(pm, tm)
    px, tx = _pair(_randn(5, 8, seed=11))
    _backward_and_compare(pm, tm, pm(px), tm(tx), [(px, tx)])
