"""The DESIGN §6 standard workloads in plast, eager or under ``@plast.jit``: the plast side of bench/run.py.

Same definitions, parameter names and module structure as bench/workloads_torch.py, so a torch state dict (as
numpy arrays) loads here unchanged and both frameworks start from the same weights and batch. Models are built
from ``plast.nn`` and trained with ``plast.optim``; when something a workload needs is not there yet (a module,
an optimizer, an op), building it raises ``Skip`` with the reason, and the harness reports it instead of failing.

    >>> w = build_train("xor", spec, jit=True)   # spec: run.py's workload dict, "seed" merged in
    >>> w.step(read=True)                         # one training step, then reset_transient_arenas(); the loss
"""

from __future__ import annotations

import inspect
import math

import numpy as np

import plast


class Skip(Exception):
    """A workload cannot run yet: something it needs is missing from plast."""


def _nn():
    try:
        import plast.nn as nn
    except ImportError as e:
        raise Skip(f"plast.nn is not importable ({e})") from None
    return nn


def _optimizer(name):
    try:
        import plast.optim as optim
    except ImportError as e:
        raise Skip(f"plast.optim is not importable ({e})") from None
    cls = getattr(optim, name, None)
    if cls is None:
        raise Skip(f"plast.optim.{name} does not exist yet")
    return cls


def _need(*names, where=plast):
    missing = [n for n in names if not hasattr(where, n)]
    if missing:
        raise Skip(f"{where.__name__} lacks {', '.join(missing)}")


def _load(model, state, strict=True):
    """Copy numpy arrays into the model's parameters (all of them, when strict) and buffers (those in `state`),
    by name: torch's names."""
    params = dict(model.named_parameters())
    if strict:
        missing = [k for k in params if k not in state]
        if missing:
            raise KeyError(f"no initial value for {missing[:5]}")
    with plast.no_grad():
        for k, t in list(params.items()) + list(model.named_buffers()):
            if k not in state:
                continue
            src = np.ascontiguousarray(state[k])
            if tuple(t.shape) != src.shape:
                raise ValueError(f"{k}: shape {tuple(t.shape)} here, {src.shape} in the state")
            t.copy_(plast.tensor(src, dtype=t.dtype))


# --- models ---------------------------------------------------------------------------------------------------


def mlp_model(dims):
    """Linear-ReLU-...-Linear as ``net`` (torch's default init from plast.nn.Linear)."""
    nn = _nn()
    _need("Sequential", "Linear", "ReLU", where=nn)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            layers = []
            for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
                layers.append(nn.Linear(a, b))
                if i < len(dims) - 2:
                    layers.append(nn.ReLU())
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)

    return MLP()


def gpt_model(c, sdpa=False):
    """GPT-2 style model of the gpt workload, with plast.nn's layers where they exist (Embedding and LayerNorm fall
    back to thin modules over plast.embedding / plast.layer_norm) and explicit or fused attention."""
    nn = _nn()
    _need("Module", "ModuleDict", "ModuleList", "Linear", "Parameter", where=nn)
    _need("embedding", "layer_norm", "gelu", "softmax", "masked_fill", "cross_entropy", "arange")
    if sdpa:
        _need("scaled_dot_product_attention")
    init = nn.init

    if hasattr(nn, "Embedding"):
        Embedding = nn.Embedding
    else:

        class Embedding(nn.Module):
            def __init__(self, num, dim):
                super().__init__()
                self.weight = nn.Parameter(plast.empty(num, dim))

            def forward(self, idx):
                return plast.embedding(idx, self.weight)

    if hasattr(nn, "LayerNorm"):
        LayerNorm = nn.LayerNorm
    else:

        class LayerNorm(nn.Module):
            def __init__(self, dim, eps=1e-5, bias=True):
                super().__init__()
                self.dim, self.eps = dim, eps
                self.weight = nn.Parameter(plast.ones(dim))
                self.bias = nn.Parameter(plast.zeros(dim)) if bias else None

            def forward(self, x):
                return plast.layer_norm(x, (self.dim,), self.weight, self.bias, self.eps)

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            C, bs = c["n_embd"], c["block_size"]
            self.n_head = c["n_head"]
            self.c_attn = nn.Linear(C, 3 * C, bias=c["bias"])
            self.c_proj = nn.Linear(C, C, bias=c["bias"])
            # True above the diagonal: the positions a query must not see
            future = plast.tensor(np.triu(np.ones((bs, bs), dtype=bool), 1))
            self.register_buffer("future", future, persistent=False)

        def forward(self, x):
            B, T, C = x.shape
            nh, hs = self.n_head, C // self.n_head
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
            k = k.view(B, T, nh, hs).transpose(1, 2)
            v = v.view(B, T, nh, hs).transpose(1, 2)
            if sdpa:
                y = plast.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
                mask = self.future if T == self.future.shape[0] else self.future[:T, :T]
                att = plast.masked_fill(att, mask, float("-inf"))
                y = plast.softmax(att, dim=-1) @ v  # (B, nh, T, hs)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLPBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=c["bias"])
            self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=c["bias"])

        def forward(self, x):
            return self.c_proj(plast.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = LayerNorm(c["n_embd"], eps=1e-5, bias=c["bias"])
            self.attn = CausalSelfAttention()
            self.ln_2 = LayerNorm(c["n_embd"], eps=1e-5, bias=c["bias"])
            self.mlp = MLPBlock()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(
                dict(
                    wte=Embedding(c["vocab_size"], c["n_embd"]),
                    wpe=Embedding(c["block_size"], c["n_embd"]),
                    h=nn.ModuleList([Block() for _ in range(c["n_layer"])]),
                    ln_f=LayerNorm(c["n_embd"], eps=1e-5, bias=c["bias"]),
                )
            )
            for m in self.modules():
                if isinstance(m, (nn.Linear, Embedding)):
                    init.normal_(m.weight, 0.0, 0.02)
                    if getattr(m, "bias", None) is not None:
                        init.zeros_(m.bias)
            std = 0.02 / math.sqrt(2 * c["n_layer"])
            for blk in self.transformer.h:
                init.normal_(blk.attn.c_proj.weight, 0.0, std)
                init.normal_(blk.mlp.c_proj.weight, 0.0, std)

        def forward(self, idx):
            B, T = idx.shape
            tr = self.transformer
            x = tr.wte(idx) + tr.wpe(plast.arange(T, dtype=plast.int64))  # (B, T, C)
            for blk in tr.h:
                x = blk(x)
            return tr.ln_f(x) @ tr.wte.weight.transpose(0, 1)  # (B, T, V)

    return GPT()


# --- training workloads ---------------------------------------------------------------------------------------


class TrainWorkload:
    """One model, optimizer and fixed batch. ``step()`` is one full training step, computed before it returns
    (backward and the optimizer's update realize it), then ``plast.reset_transient_arenas()``. With ``jit`` the
    whole step is one ``@plast.jit`` function, traced on the first call and replayed afterwards."""

    def __init__(self, model, opt, lossfn, x, y, jit):
        self.model, self.opt, self.lossfn, self.x, self.y = model, opt, lossfn, x, y
        self.params = sum(p.numel() for p in model.parameters())
        self.label = "plast.jit" if jit else "plast"
        self._fn = plast.jit(self._step) if jit else self._step

    def _step(self, x, y):
        self.opt.zero_grad()
        loss = self.lossfn(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss

    def step(self, read=False):
        loss = self._fn(self.x, self.y)
        value = loss.item() if read else None
        plast.reset_transient_arenas()
        return value


def _gpt_loss(logits, targets):
    return plast.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def build_train(name, spec, state=None, data=None, jit=False):
    """The training workload `name` (xor, mlp, gpt, gpt_sdpa). `state` (parameter name -> numpy array) and
    `data` ((x, y) numpy arrays) start it where torch's starts; without them plast's own init and RNG are used."""
    nn = _nn()
    if jit:
        _need("jit")
    o = spec["optim"]
    plast.manual_seed(spec["seed"])
    if name == "xor":
        Opt = _optimizer("SGD")
        _need("MSELoss", where=nn)
        model = mlp_model(spec["layers"])
        opt_args = dict(lr=o["lr"], momentum=o.get("momentum", 0.0))
        lossfn = nn.MSELoss()
        if data is None:
            data = (
                np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32),
                np.array([[0], [1], [1], [0]], np.float32),
            )
    elif name == "mlp":
        Opt = _optimizer("Adam")
        _need("cross_entropy")
        model = mlp_model(spec["layers"])
        opt_args = dict(lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], weight_decay=o["weight_decay"])
        lossfn = plast.cross_entropy
        if data is None:
            rng = np.random.default_rng(spec["seed"])
            data = (
                rng.standard_normal((spec["batch"], spec["layers"][0]), dtype=np.float32),
                rng.integers(0, spec["layers"][-1], spec["batch"], dtype=np.int64),
            )
    elif name in ("gpt", "gpt_sdpa"):
        Opt = _optimizer("AdamW")
        model = gpt_model(spec, sdpa=name == "gpt_sdpa")
        opt_args = dict(lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], weight_decay=o["weight_decay"])
        lossfn = _gpt_loss
        if data is None:
            rng = np.random.default_rng(spec["seed"])
            shape = (spec["batch"], spec["block_size"])
            data = tuple(rng.integers(0, spec["vocab_size"], shape, dtype=np.int64) for _ in range(2))
    else:
        raise ValueError(f"unknown training workload {name!r}")
    if state is not None:
        _load(model, state)
    opt = Opt(model.parameters(), **opt_args)
    x, y = (plast.tensor(np.ascontiguousarray(a)) for a in data)
    return TrainWorkload(model, opt, lossfn, x, y, jit)


# --- generation -----------------------------------------------------------------------------------------------


class GenWorkload:
    """Greedy decoding with ``plast.nn.GPT.generate`` (block_size 256, with or without its K/V cache)."""

    label = "plast"

    def __init__(self, gpt_spec, gen_spec, block_size, use_cache, state=None):
        nn = _nn()
        if not hasattr(nn, "GPT") or not hasattr(nn, "GPTConfig"):
            raise Skip("plast.nn has no GPT / GPTConfig yet")
        if not hasattr(nn.GPT, "generate"):
            raise Skip("plast.nn.GPT has no generate() yet")
        params = inspect.signature(nn.GPTConfig).parameters
        cfg = dict(
            vocab_size=gpt_spec["vocab_size"],
            block_size=block_size,
            n_layer=gpt_spec["n_layer"],
            n_head=gpt_spec["n_head"],
            n_embd=gpt_spec["n_embd"],
            dropout=gpt_spec["dropout"],
            bias=gpt_spec["bias"],
        )
        if "gelu_approximate" not in params:
            raise Skip("plast.nn.GPTConfig has no gelu_approximate (the workload uses GELU's tanh form)")
        cfg["gelu_approximate"] = "tanh"
        plast.manual_seed(gpt_spec["seed"])
        self.model = nn.GPT(nn.GPTConfig(**cfg)).eval()
        if state is not None:
            state = dict(state)
            state.setdefault("lm_head.weight", state["transformer.wte.weight"])  # tied
            _load(self.model, state, strict=False)
        gen = inspect.signature(self.model.generate).parameters
        self.kwargs = {"use_cache": use_cache}
        if "greedy" in gen:
            self.kwargs["greedy"] = True
        elif "top_k" in gen:
            self.kwargs["top_k"] = 1
        else:
            raise Skip("plast.nn.GPT.generate has neither greedy= nor top_k=")
        self.prompt, self.new_tokens = list(gen_spec["prompt"]), gen_spec["new_tokens"]

    def run(self):
        with plast.no_grad():
            out = self.model.generate(
                plast.tensor([self.prompt], dtype=plast.int64), self.new_tokens, **self.kwargs
            )
            ids = out[0].tolist()
        plast.reset_transient_arenas()
        return ids


# --- helpers for the harness ----------------------------------------------------------------------------------


def count_recorded(fn):
    """Run fn() once and return the number of graph nodes it records (plast.graph._graph.recorded_count; the op
    layer is compiled and calls ``record`` in C, so no Python wrapper could count them). Backward runs the
    ordinary way for this call: a replayed backward (autograd/backward_replay.py) records none of the ops it runs,
    and they are ops of the step all the same."""
    import contextlib

    from plast.graph import _graph as graph

    if not hasattr(graph, "recorded_count"):
        raise RuntimeError("this plast has no plast.graph._graph.recorded_count")
    try:
        from plast.autograd.backward_replay import disabled
    except ImportError:
        disabled = contextlib.nullcontext
    with disabled():
        before = graph.recorded_count()
        fn()
        return graph.recorded_count() - before


def set_threads(n):
    plast.set_num_threads(n)


def version():
    try:
        from importlib.metadata import version as v

        return v("plast-core")
    except Exception:  # noqa: BLE001
        return getattr(plast, "__version__", "?")
