"""The DESIGN §6 standard workloads in PyTorch (eager, CPU): the reference side of bench/run.py.

Written to the definitions in ../shared/bench/workloads.json (bench/run.py loads them, or its built-in copy), so
figures compare with ../shared/bench/anchors_torch.py. The GPT uses nanoGPT's parameter names
(``transformer.wte``, ``transformer.h.0.attn.c_attn``, ...) so its state dict loads into plast's models as is.

    >>> from bench.workloads_torch import build_train
    >>> w = build_train("xor", spec)          # spec: run.py's workload dict, "common" merged in
    >>> w.step(read=True)                      # one zero_grad/forward/backward/update; the loss as a float
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# --- models ---------------------------------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, dims):
        super().__init__()
        layers = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(dims) - 2:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class CausalSelfAttention(nn.Module):
    def __init__(self, c, sdpa):
        super().__init__()
        self.n_head, self.n_embd, self.sdpa = c["n_head"], c["n_embd"], sdpa
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"], bias=c["bias"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"], bias=c["bias"])
        bs = c["block_size"]
        # True above the diagonal: the positions a query must not see
        self.register_buffer("future", torch.ones(bs, bs, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        nh, hs = self.n_head, C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, nh, hs).transpose(1, 2)
        v = v.view(B, T, nh, hs).transpose(1, 2)
        if cache is not None:  # a dict, empty before the prompt
            if cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        Tk = k.shape[2]
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=T == Tk and T > 1)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, Tk)
            if T > 1:
                att = att.masked_fill(self.future[Tk - T : Tk, :Tk], float("-inf"))
            y = F.softmax(att, dim=-1) @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLPBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=c["bias"])
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=c["bias"])

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c, sdpa):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"], eps=1e-5, bias=c["bias"])
        self.attn = CausalSelfAttention(c, sdpa)
        self.ln_2 = nn.LayerNorm(c["n_embd"], eps=1e-5, bias=c["bias"])
        self.mlp = MLPBlock(c)

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT-2 style, pre-LayerNorm, learned positions, head tied to ``wte``; init as the workload says."""

    def __init__(self, c, sdpa=False):
        super().__init__()
        self.c = c
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
                wpe=nn.Embedding(c["block_size"], c["n_embd"]),
                h=nn.ModuleList([Block(c, sdpa) for _ in range(c["n_layer"])]),
                ln_f=nn.LayerNorm(c["n_embd"], eps=1e-5, bias=c["bias"]),
            )
        )
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
        std = 0.02 / math.sqrt(2 * c["n_layer"])
        for blk in self.transformer.h:
            nn.init.normal_(blk.attn.c_proj.weight, 0.0, std)
            nn.init.normal_(blk.mlp.c_proj.weight, 0.0, std)

    def forward(self, idx, caches=None, pos0=0):
        B, T = idx.shape
        tr = self.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(pos0, pos0 + T, dtype=torch.long))  # (B, T, C)
        for i, blk in enumerate(tr.h):
            x = blk(x, None if caches is None else caches[i])
        return tr.ln_f(x) @ tr.wte.weight.t()  # (B, T, V)


# --- training workloads ---------------------------------------------------------------------------------------


class TrainWorkload:
    """One model, optimizer and fixed batch; ``step()`` is one full training step (eager, so computed on return)."""

    label = "torch"

    def __init__(self, model, opt, lossfn, x, y):
        self.model, self.opt, self.lossfn, self.x, self.y = model, opt, lossfn, x, y
        self.params = sum(p.numel() for p in model.parameters())

    def step(self, read=False):
        self.opt.zero_grad(set_to_none=True)
        loss = self.lossfn(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        return float(loss.detach()) if read else None

    def state(self):
        """Initial weights and the batch as numpy arrays, for plast to start from the same point."""
        sd = {k: v.detach().numpy().copy() for k, v in self.model.state_dict().items()}
        return sd, (self.x.numpy().copy(), self.y.numpy().copy())


def _gpt_loss(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def build_train(name, spec):
    """The training workload `name` (xor, mlp, gpt, gpt_sdpa); `spec` is its dict with "seed" merged in."""
    torch.manual_seed(spec["seed"])
    o = spec["optim"]
    if name == "xor":
        model = MLP(spec["layers"])
        opt = torch.optim.SGD(model.parameters(), lr=o["lr"], momentum=o.get("momentum", 0.0))
        x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
        y = torch.tensor([[0.0], [1.0], [1.0], [0.0]])
        return TrainWorkload(model, opt, F.mse_loss, x, y)
    if name == "mlp":
        model = MLP(spec["layers"])
        opt = torch.optim.Adam(
            model.parameters(),
            lr=o["lr"],
            betas=tuple(o["betas"]),
            eps=o["eps"],
            weight_decay=o["weight_decay"],
        )
        x = torch.randn(spec["batch"], spec["layers"][0])
        y = torch.randint(0, spec["layers"][-1], (spec["batch"],))
        return TrainWorkload(model, opt, F.cross_entropy, x, y)
    if name in ("gpt", "gpt_sdpa"):
        model = GPT(spec, sdpa=name == "gpt_sdpa")
        opt = torch.optim.AdamW(
            model.parameters(),
            lr=o["lr"],
            betas=tuple(o["betas"]),
            eps=o["eps"],
            weight_decay=o["weight_decay"],
        )
        shape = (spec["batch"], spec["block_size"])
        x = torch.randint(0, spec["vocab_size"], shape)
        y = torch.randint(0, spec["vocab_size"], shape)
        return TrainWorkload(model, opt, _gpt_loss, x, y)
    raise ValueError(f"unknown training workload {name!r}")


# --- generation -----------------------------------------------------------------------------------------------


class GenWorkload:
    """Greedy decoding of `new_tokens` from `prompt` with the gpt model at block_size 256, with or without a
    K/V cache (torch.cat append); ``run()`` returns the generated ids."""

    label = "torch"

    def __init__(self, gpt_spec, gen_spec, block_size, use_cache):
        torch.manual_seed(gpt_spec["seed"])
        self.c = dict(gpt_spec, block_size=block_size)
        self.model = GPT(self.c).eval()
        self.prompt, self.new_tokens = list(gen_spec["prompt"]), gen_spec["new_tokens"]
        self.use_cache = use_cache

    def state(self):
        return {k: v.detach().numpy().copy() for k, v in self.model.state_dict().items()}

    @torch.inference_mode()
    def run(self):
        idx = torch.tensor([self.prompt], dtype=torch.long)
        bs = self.c["block_size"]
        if not self.use_cache:
            for _ in range(self.new_tokens):
                logits = self.model(idx[:, -bs:])
                idx = torch.cat([idx, logits[:, -1, :].argmax(-1, keepdim=True)], dim=1)
            return idx[0].tolist()
        caches = [{} for _ in range(self.c["n_layer"])]
        logits = self.model(idx, caches, 0)
        for i in range(self.new_tokens):
            nxt = logits[:, -1, :].argmax(-1, keepdim=True)
            idx = torch.cat([idx, nxt], dim=1)
            if i < self.new_tokens - 1:
                logits = self.model(nxt, caches, idx.shape[1] - 1)
        return idx[0].tolist()


def set_threads(n):
    torch.set_num_threads(n)


def version():
    return torch.__version__
