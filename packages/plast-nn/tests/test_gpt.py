"""plast.nn.GPT against a small GPT-2 style torch model with nanoGPT's parameter names (written here): state
dicts load (as tensors and from a safetensors file), logits, loss and gradients agree; K/V-cache decoding gives
the same per-step logits and tokens as full recomputation; a tiny GPT learns a repeated phrase."""

import math
import os
import time

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


# ---- a GPT-2 style reference in torch, with nanoGPT's module names ----


class TorchSelfAttention(torch.nn.Module):
    def __init__(self, cfg, legacy_mask=False):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = torch.nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = torch.nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        if legacy_mask:  # older nanoGPT keeps its causal mask as a persistent buffer named "bias"
            bs = cfg.block_size
            self.register_buffer("bias", torch.tril(torch.ones(bs, bs)).view(1, 1, bs, bs))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        y = scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class TorchMLP(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = torch.nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = torch.nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.approximate = cfg.gelu_approximate

    def forward(self, x):
        return self.c_proj(torch.nn.functional.gelu(self.c_fc(x), approximate=self.approximate))


class TorchBlock(torch.nn.Module):
    def __init__(self, cfg, legacy_mask=False):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = TorchSelfAttention(cfg, legacy_mask)
        self.ln_2 = torch.nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = TorchMLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TorchGPT(torch.nn.Module):
    def __init__(self, cfg, legacy_mask=False):
        super().__init__()
        self.cfg = cfg
        self.transformer = torch.nn.ModuleDict(
            dict(
                wte=torch.nn.Embedding(cfg.vocab_size, cfg.n_embd),
                wpe=torch.nn.Embedding(cfg.block_size, cfg.n_embd),
                h=torch.nn.ModuleList(TorchBlock(cfg, legacy_mask) for _ in range(cfg.n_layer)),
                ln_f=torch.nn.LayerNorm(cfg.n_embd, bias=cfg.bias),
            )
        )
        self.lm_head = torch.nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        with torch.no_grad():  # random, non-trivial everywhere (LayerNorm and biases included)
            for name, p in self.named_parameters():
                p.copy_(
                    torch.randn(p.shape) * (0.3 if p.ndim > 1 else 0.2)
                    + (1.0 if "ln" in name and name.endswith("weight") else 0.0)
                )

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for blk in self.transformer.h:
            x = blk(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits[:, -1:, :], None
        loss = torch.nn.functional.cross_entropy(
            logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-1
        )
        return logits, loss

    @torch.no_grad()
    def greedy(self, idx, n):
        for _ in range(n):
            logits, _ = self(idx[:, -self.cfg.block_size :])
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return idx


def _cfg(**kw):
    base = dict(block_size=16, vocab_size=23, n_layer=2, n_head=2, n_embd=16, dropout=0.0, bias=True)
    base.update(kw)
    return nn.GPTConfig(**base)


def _state(tm):
    return {k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}


def _pair(**kw):
    cfg = _cfg(**kw)
    torch.manual_seed(0)
    tm = TorchGPT(cfg)
    pm = nn.GPT(cfg)
    res = pm.load_state_dict(_state(tm))
    assert not res.missing_keys and not res.unexpected_keys
    return pm, tm


# ---- structure, init, optimizer groups ----


def test_parameter_names_tying_and_nanogpt_init():
    cfg = _cfg(n_layer=3, n_embd=64, vocab_size=300, block_size=64)
    plast.manual_seed(0)
    pm = nn.GPT(cfg)
    tm = TorchGPT(cfg)
    assert list(pm.state_dict()) == list(tm.state_dict())
    assert pm.lm_head.weight is pm.transformer.wte.weight
    names = [n for n, _ in pm.named_parameters()]
    assert names[0] == "transformer.wte.weight" and "lm_head.weight" not in names
    sd = pm.state_dict()
    for name, t in sd.items():
        a = t.numpy()
        if name.endswith("c_proj.weight"):
            assert abs(a.std() - 0.02 / math.sqrt(2 * cfg.n_layer)) < 0.1 * 0.02 / math.sqrt(6), name
        elif "ln" in name:
            assert np.all(a == (1.0 if name.endswith("weight") else 0.0)), name
        elif name.endswith("bias"):
            assert not np.any(a), name
        else:
            assert abs(a.std() - 0.02) < 0.002, name
    assert pm.get_num_params() == sum(p.numel() for p in tm.parameters()) - 64 * 64
    assert nn.GPTConfig() == nn.GPTConfig(1024, 50304, 12, 12, 12 * 64, 0.0, True, "none")


def test_configure_optimizers_groups():
    pm = nn.GPT(_cfg())
    opt = pm.configure_optimizers(weight_decay=0.1, learning_rate=6e-4, betas=(0.9, 0.95), device_type="cpu")
    assert isinstance(opt, plast.optim.AdamW)
    decay, nodecay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and nodecay["weight_decay"] == 0.0
    assert all(p.ndim >= 2 for p in decay["params"]) and all(p.ndim < 2 for p in nodecay["params"])
    assert len(decay["params"]) + len(nodecay["params"]) == len(list(pm.parameters()))
    assert opt.defaults["lr"] == 6e-4 and opt.defaults["betas"] == (0.9, 0.95)
    ids = {id(p) for p in decay["params"]}
    assert id(pm.transformer.wte.weight) in ids and id(pm.transformer.wpe.weight) in ids


# ---- torch state dicts and numerics ----


@pytest.mark.parametrize("gelu", ["none", "tanh"])
@pytest.mark.parametrize("bias", [True, False])
def test_torch_state_dict_loads_and_logits_loss_grads_match(gelu, bias):
    pm, tm = _pair(gelu_approximate=gelu, bias=bias)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 23, (3, 11))
    tgt = rng.integers(0, 23, (3, 11))
    tgt[0, :2] = -1  # ignored positions, as nanoGPT's ignore_index=-1
    pl, pnone = pm(plast.tensor(idx))
    tl, _ = tm(torch.tensor(idx))
    assert pnone is None and tuple(pl.shape) == (3, 1, 23)
    _close(pl, tl)
    pl, ploss = pm(plast.tensor(idx), plast.tensor(tgt))
    tl, tloss = tm(torch.tensor(idx), torch.tensor(tgt))
    _close(pl, tl)
    _close(ploss, tloss)
    ploss.backward()
    tloss.backward()
    tparams = dict(tm.named_parameters())
    for name, p in pm.named_parameters():
        _close(p.grad, tparams[name].grad)


def test_legacy_mask_buffer_is_ignored_and_bad_state_dicts_raise():
    cfg = _cfg()
    tm = TorchGPT(cfg, legacy_mask=True)
    assert "transformer.h.0.attn.bias" in tm.state_dict()
    pm = nn.GPT(cfg)
    res = pm.load_state_dict(_state(tm))
    assert not res.missing_keys and not res.unexpected_keys
    idx = torch.tensor([[1, 2, 3]])
    _close(pm(plast.tensor(idx.numpy()))[0], tm(idx)[0])
    sd = _state(tm)
    sd["transformer.wpe.weight"] = plast.zeros(8, 16)
    del sd["transformer.ln_f.weight"]
    sd["transformer.h.9.ln_1.weight"] = plast.zeros(16)
    with pytest.raises(plast.CheckpointError) as ei:
        pm.load_state_dict(sd)
    msg = str(ei.value)
    assert (
        "transformer.ln_f.weight" in msg and "transformer.h.9.ln_1.weight" in msg and "size mismatch" in msg
    )


@pytest.mark.skipif(not hasattr(plast, "load"), reason="plast.load is not in plast-core yet")
def test_safetensors_file_written_by_torch_loads(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    pm, tm = _pair()
    fresh = nn.GPT(_cfg())
    path = tmp_path / "gpt.safetensors"
    # tied tensors share memory, which save_file refuses: store each name's own copy, as exporters do
    safetensors_torch.save_file(
        {k: v.detach().clone().contiguous() for k, v in tm.state_dict().items()}, str(path)
    )
    res = fresh.load_state_dict(plast.load(str(path)))
    assert not res.missing_keys and not res.unexpected_keys
    idx = np.random.default_rng(1).integers(0, 23, (2, 9))
    _close(fresh(plast.tensor(idx))[0], tm(torch.tensor(idx))[0])
    assert fresh.lm_head.weight is fresh.transformer.wte.weight
    # and plast's own round trip is bit for bit
    plast.save(fresh.state_dict(), str(tmp_path / "p.safetensors"))
    again = nn.GPT(_cfg())
    again.load_state_dict(plast.load(str(tmp_path / "p.safetensors")))
    assert np.array_equal(
        again(plast.tensor(idx))[0].detach().numpy(), fresh(plast.tensor(idx))[0].detach().numpy()
    )


# ---- generation ----


@pytest.mark.parametrize("batch,prompt_len", [(1, 1), (2, 3), (1, 16)])
def test_cache_decoding_matches_recomputation_and_torch(batch, prompt_len):
    pm, tm = _pair()
    pm.eval()
    prompt = np.random.default_rng(2).integers(0, 23, (batch, prompt_len))
    n = 24  # runs past block_size=16, where both paths crop and recompute
    a, la = pm.generate(plast.tensor(prompt), n, greedy=True, use_cache=True, return_logits=True)
    b, lb = pm.generate(plast.tensor(prompt), n, greedy=True, use_cache=False, return_logits=True)
    assert a.tolist() == b.tolist()
    assert len(la) == len(lb) == n
    for x, y in zip(la, lb):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-5)
    assert a.tolist() == tm.greedy(torch.tensor(prompt), n).tolist()
    # one traced plan, replayed for every later decode step that fits in the cache
    decodes = max(0, 16 - prompt_len)
    if decodes:
        assert pm._decode_jit.traces == 1 and pm._decode_jit.replays == decodes - 1
    else:
        assert pm._decode_jit is None


def test_sampling_options():
    pm, _ = _pair()
    prompt = plast.tensor([[1, 2, 3]])
    greedy = pm.generate(prompt, 8, greedy=True).tolist()
    assert pm.generate(prompt, 8, top_k=1).tolist() == greedy
    assert pm.generate(prompt, 8, temperature=0).tolist() == greedy
    assert pm.generate(prompt, 8, top_p=1e-6).tolist() == greedy
    runs = []
    for use_cache in (True, False, True):
        g = plast.Generator().manual_seed(123)
        runs.append(
            pm.generate(
                prompt, 12, temperature=1.5, top_k=10, top_p=0.9, use_cache=use_cache, generator=g
            ).tolist()
        )
    assert runs[0] == runs[1] == runs[2]
    g = plast.Generator().manual_seed(124)
    other = pm.generate(prompt, 12, temperature=1.5, generator=g).tolist()
    assert other != runs[0]
    # top_k=3 only ever picks one of the 3 most likely tokens
    out, logits = pm.generate(
        prompt, 6, top_k=3, return_logits=True, generator=plast.Generator().manual_seed(5)
    )
    for step, lg in enumerate(logits):
        top3 = np.argsort(-lg.numpy()[0])[:3]
        assert out.tolist()[0][3 + step] in top3
    for kw, pat in [
        (dict(temperature=-1.0), "temperature"),
        (dict(top_k=0), "top_k"),
        (dict(top_p=1.5), "top_p"),
    ]:
        with pytest.raises(ValueError, match=pat):
            pm.generate(prompt, 2, **kw)
    with pytest.raises(plast.ShapeError, match=r"GPT.generate: expected int64 token ids of shape \(B, T\)"):
        pm.generate(plast.tensor([1, 2]), 2)


def test_bad_input_shapes():
    pm = nn.GPT(_cfg())
    with pytest.raises(
        plast.ShapeError, match=r"GPT: expected token ids of shape \(B, T\) with T <= block_size=16"
    ):
        pm(plast.zeros(1, 17, dtype=plast.int64))
    with pytest.raises(plast.ShapeError, match=r"GPT: expected token ids of shape \(B, T\)"):
        pm(plast.zeros(5, dtype=plast.int64))
    with pytest.raises(ValueError, match="divisible"):
        nn.GPTConfig(n_embd=10, n_head=3)
    with pytest.raises(ValueError, match="gelu_approximate"):
        nn.GPTConfig(gelu_approximate="fast")


def test_tiny_gpt_learns_a_repeated_phrase():
    t0 = time.perf_counter()
    phrase = "hello plast, small and fast! "
    chars = sorted(set(phrase))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in phrase * 4])
    cfg = nn.GPTConfig(block_size=32, vocab_size=len(chars), n_layer=2, n_head=2, n_embd=32)
    plast.manual_seed(0)
    model = nn.GPT(cfg)
    opt = model.configure_optimizers(weight_decay=0.0, learning_rate=1e-2, betas=(0.9, 0.99))
    # every rotation of the phrase, so the model can continue from any character at any position
    starts = np.arange(len(phrase))
    x = plast.tensor(np.stack([data[s : s + cfg.block_size] for s in starts]))
    y = plast.tensor(np.stack([data[s + 1 : s + 1 + cfg.block_size] for s in starts]))

    @plast.jit
    def step(x, y):
        opt.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    for _ in range(200):
        loss = step(x, y).item()
        plast.reset_transient_arenas()
        # 0.029 is the floor here (a window's first characters are ambiguous); at 0.05 the model may still mix
        # up the phrase's "," and "!" (seen with the AVX2 kernels)
        if loss < 0.035:
            break
    model.eval()
    prompt = plast.tensor([[stoi["h"]]])
    n = 2 * len(phrase) - 1  # past block_size: the cached decode, then the cropped recomputation
    out = model.generate(prompt, n, greedy=True, use_cache=True)
    text = "".join(chars[i] for i in out.tolist()[0])
    assert text == (phrase * 2)[: n + 1], (text, loss)
    assert model.generate(prompt, n, greedy=True, use_cache=False).tolist() == out.tolist()
    if os.getloadavg()[0] < (os.cpu_count() or 1):  # on an oversubscribed machine thread spinning dominates
        assert time.perf_counter() - t0 < 20
