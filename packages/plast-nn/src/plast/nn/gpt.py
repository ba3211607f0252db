"""GPT-2 style language model with nanoGPT's structure and parameter names (STYLE.md item 15), so a nanoGPT
state dict loads unchanged, and generation with a preallocated K/V cache.

Parameter names: ``transformer.wte``, ``transformer.wpe``, ``transformer.h.{i}.ln_1``, ``.attn.c_attn``,
``.attn.c_proj``, ``.ln_2``, ``.mlp.c_fc``, ``.mlp.c_proj``, ``transformer.ln_f``, and ``lm_head`` whose weight
is ``transformer.wte.weight`` (tied). A state dict from nanoGPT's older non-flash attention also holds the causal
mask buffer ``transformer.h.{i}.attn.bias``; it is accepted and ignored.

K/V cache: ``generate(use_cache=True)`` preallocates per layer a value tensor of shape
(B, n_head, block_size, head_size) and a key tensor stored transposed, (B, n_head, head_size, block_size), so the
scores ``q @ k^T`` read it row-major with no transposed operand to pack; once per batch size, dtype and device,
kept by the model between calls (``clear_kv_cache()`` frees them). The prompt is run once (prefill, eager) and
writes its keys and values into positions 0..T-1. Each later token is one call of a ``@plast.jit`` function of fixed shapes whose runtime inputs are
the token and its position ``pos`` (a (1,) int64 tensor): the new key and value are written into row ``pos``
of the caches in place, and attention runs over the whole preallocated cache with an additive mask that hides
the rows after ``pos``. Every decode step therefore replays the same plan. Once the sequence is longer
than ``block_size``, generation crops the context to the last ``block_size`` tokens and recomputes the whole
window each step, as nanoGPT does (positions shift, so cached keys would be stale).
"""

import math
from dataclasses import dataclass

import plast
from plast.errors import ShapeError

from . import functional as F
from . import init
from .activation import GELU
from .containers import ModuleDict, ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm
from .sparse import Embedding


@dataclass
class GPTConfig:
    """nanoGPT's GPTConfig defaults (GPT-2 124M with the vocabulary padded to 50304) plus
    ``gelu_approximate``: "none" (exact GELU, nanoGPT's) or "tanh" (GPT-2's original).

    >>> plast.nn.GPTConfig(n_layer=2).n_embd
    768
    """

    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True
    gelu_approximate: str = "none"

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if self.gelu_approximate not in ("none", "tanh"):
            raise ValueError(
                f"GPTConfig: gelu_approximate must be 'none' or 'tanh', got {self.gelu_approximate!r}"
            )
        for name in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd"):
            if getattr(self, name) <= 0:
                raise ValueError(f"GPTConfig: {name} must be positive, got {getattr(self, name)}")
        if not 0.0 <= self.dropout <= 1.0:
            raise ValueError(f"GPTConfig: dropout must be in [0, 1], got {self.dropout}")


class CausalSelfAttention(Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = Dropout(config.dropout)
        self.resid_dropout = Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def _qkv(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hs = C // self.n_head
        q = q.reshape(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.reshape(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.reshape(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        return q, k, v

    def _out(self, y, B, T, C):
        y = y.transpose(1, 2).reshape(B, T, C)  # re-assemble all head outputs side by side
        return self.resid_dropout(self.c_proj(y))

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q, k, v = self._qkv(x)
        if cache is not None:  # prefill: keys and values of positions 0..T-1 go into the cache
            kc, vc = cache  # kc is stored transposed: (B, nh, hs, block_size)
            kc[:, :, :, :T] = k.transpose(-2, -1)
            vc[:, :, :T] = v
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, nh, T, hs)
        return self._out(y, B, T, C)

    def decode(self, x, kc, vc, pos, mask):
        """One new token per sequence, x: (B, C) (2-D, so the projections are single addmm kernels): write its
        key and value into cache row `pos` (a (1,) int64 tensor), attend over the whole cache with the additive
        `mask` (block_size,) that hides the rows past `pos`."""
        B, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=1)
        q = q.reshape(B, self.n_head, 1, hs)  # (B, nh, 1, hs)
        kc[:, :, :, pos] = k.reshape(B, self.n_head, hs, 1)  # kc: (B, nh, hs, block_size)
        vc[:, :, pos] = v.reshape(B, self.n_head, 1, hs)
        p = self.dropout if self.training else 0.0
        # kc.transpose is a view; attention transposes it back, so the scores' matmul reads kc as stored
        y = F.scaled_dot_product_attention(q, kc.transpose(-2, -1), vc, attn_mask=mask, dropout_p=p)
        return self.resid_dropout(self.c_proj(y.reshape(B, C)))

    def _load_from_state_dict(self, state_dict, prefix, missing_keys, unexpected_keys, error_msgs):
        # nanoGPT without flash attention saves its causal mask as a buffer named "bias"; it is not state
        if prefix + "bias" in state_dict:
            state_dict = {k: v for k, v in state_dict.items() if k != prefix + "bias"}
        super()._load_from_state_dict(state_dict, prefix, missing_keys, unexpected_keys, error_msgs)


class MLP(Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = GELU(approximate=config.gelu_approximate)
        self.c_proj = Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))

    def decode(self, x, kc, vc, pos, mask):
        x = x + self.attn.decode(self.ln_1(x), kc, vc, pos, mask)
        return x + self.mlp(self.ln_2(x))


def _sample(logits, temperature, top_k, top_p, greedy, generator):
    """Next token ids (B, 1) from last-position logits (B, V)."""
    if greedy or temperature == 0:
        return plast.argmax(logits, dim=-1, keepdim=True)
    logits = logits / temperature
    V = logits.shape[-1]
    if top_k is not None:
        v, _ = plast.topk(logits, min(top_k, V))
        logits = plast.masked_fill(logits, logits < v[:, [-1]], float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, sorted_idx = plast.sort(logits, dim=-1, descending=True)
        probs = F.softmax(sorted_logits, dim=-1)
        # drop a token when the tokens ranked above it already hold top_p of the mass (the first always stays)
        remove = (plast.cumsum(probs, dim=-1) - probs) > top_p
        unsorted = plast.zeros(logits.shape, dtype=plast.bool, device=logits.device)
        remove = plast.scatter(unsorted, -1, sorted_idx, src=remove)
        logits = plast.masked_fill(logits, remove, float("-inf"))
    probs = F.softmax(logits, dim=-1)
    if probs.device.type != "cpu":
        # NOTE: plast draws random numbers on the host (one stream for every device) and has no CUDA multinomial
        # kernel: (B, V) probabilities come down, (B, 1) ids go back, and the tokens match a CPU run's
        return plast.multinomial(probs.cpu(), 1, generator=generator).to(probs.device)
    return plast.multinomial(probs, 1, generator=generator)


class GPT(Module):
    """GPT-2 style decoder (nanoGPT's model): token + learned position embeddings, ``n_layer`` pre-LN blocks of
    causal self-attention and a GELU MLP, final LayerNorm, and a head tied to the token embedding. Init as
    nanoGPT: weights N(0, 0.02), ``c_proj`` weights N(0, 0.02 / sqrt(2 * n_layer)), zero biases.

    ``forward(idx, targets=None)`` returns ``(logits, loss)``: with targets, logits for every position
    (B, T, vocab) and the mean cross-entropy (ignore_index -1); without, logits for the last position only
    (B, 1, vocab) and None.

    >>> model = plast.nn.GPT(plast.nn.GPTConfig(block_size=8, vocab_size=11, n_layer=1, n_head=2, n_embd=8))
    >>> logits, loss = model(plast.tensor([[1, 2, 3]]))
    >>> logits.shape, loss
    (plast.Size([1, 1, 11]), None)
    """

    def __init__(self, config):
        super().__init__()
        if config.vocab_size is None or config.block_size is None:
            raise ValueError("GPT: config needs vocab_size and block_size")
        self.config = config
        self.transformer = ModuleDict(
            dict(
                wte=Embedding(config.vocab_size, config.n_embd),
                wpe=Embedding(config.block_size, config.n_embd),
                drop=Dropout(config.dropout),
                h=ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        # weight tying: one Parameter, reachable as transformer.wte.weight and lm_head.weight
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        std = 0.02 / math.sqrt(2 * config.n_layer)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                init.normal_(p, 0.0, std)
        self._decode_jit = None
        self._kv_caches = {}

    @classmethod
    def from_pretrained(cls, model_type, override_args=None):
        """nanoGPT downloads GPT-2 weights through the transformers package; plast has no network access.
        Build ``GPT(GPTConfig(...))`` and load a local state dict instead (``plast.load`` reads a safetensors
        file written by torch)."""
        raise NotImplementedError(
            "GPT.from_pretrained needs to download weights, which plast does not do: build GPT(GPTConfig(...)) "
            "and call load_state_dict(plast.load('model.safetensors'))"
        )

    @staticmethod
    def _init_weights(module):
        if isinstance(module, Linear):
            init.normal_(module.weight, 0.0, 0.02)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, Embedding):
            init.normal_(module.weight, 0.0, 0.02)

    def get_num_params(self, non_embedding=True):
        """Number of parameters (tied weights once); without the position embedding by default, as nanoGPT.

        >>> plast.nn.GPT(plast.nn.GPTConfig(block_size=4, vocab_size=5, n_layer=1, n_head=1, n_embd=2)).get_num_params()
        88
        """
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.transformer.wpe.weight.numel()
        return n

    def _check_idx(self, idx):
        bs = self.config.block_size
        if idx.ndim != 2 or idx.shape[1] > bs:
            raise ShapeError(
                f"{self._get_name()}: expected token ids of shape (B, T) with T <= block_size={bs}, got {tuple(idx.shape)}"
            )

    def forward(self, idx, targets=None):
        self._check_idx(idx)
        b, t = idx.shape
        pos = plast.arange(0, t, dtype=plast.int64, device=idx.device)  # (t,)
        tok_emb = self.transformer.wte(idx)  # (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # (t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])  # the last position only (a list keeps the time dim)
            loss = None
        return logits, loss

    def crop_block_size(self, block_size):
        """Shrink the model's block size (keeps the first `block_size` position embeddings), as nanoGPT."""
        if block_size > self.config.block_size:
            raise ValueError(
                f"crop_block_size: {block_size} is larger than the current {self.config.block_size}"
            )
        from .parameter import Parameter

        self.config.block_size = block_size
        with plast.no_grad():
            self.transformer.wpe.weight = Parameter(self.transformer.wpe.weight[:block_size].clone())
        self.transformer.wpe.num_embeddings = block_size

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type=None):
        """AdamW with two groups, as nanoGPT: every parameter of 2 or more dims (matmul weights, embeddings)
        decays, the others (biases, LayerNorm weights) don't.

        >>> m = plast.nn.GPT(plast.nn.GPTConfig(block_size=4, vocab_size=5, n_layer=1, n_head=1, n_embd=2))
        >>> opt = m.configure_optimizers(0.1, 1e-3, (0.9, 0.95))
        >>> [g["weight_decay"] for g in opt.param_groups]
        [0.1, 0.0]
        """
        from plast.optim import AdamW

        params = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay = [p for p in params.values() if p.ndim >= 2]
        nodecay = [p for p in params.values() if p.ndim < 2]
        groups = [
            {"params": decay, "weight_decay": weight_decay},
            {"params": nodecay, "weight_decay": 0.0},
        ]
        return AdamW(groups, lr=learning_rate, betas=betas)

    # ---- generation ----
    def _prefill(self, idx, caches):
        """Run the prompt (B, T) with T <= block_size, filling cache rows 0..T-1; logits of the last position."""
        b, t = idx.shape
        pos = plast.arange(0, t, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block, cache in zip(self.transformer.h, caches):
            x = block(x, cache)
        x = self.transformer.ln_f(x)
        return self.lm_head(x[:, -1, :])  # (B, V)

    def _decode_step(self, tok, pos, *flat_caches):
        """The jitted decode step: tok (B,) at position pos ((1,) int64) -> logits (B, V)."""
        # NOTE: a traced plan keeps views of the parameters (weight transposes) as they were at trace time, so
        # rebinding a parameter's memory (``model.to(dtype)``) must retrace. Every parameter is read through a
        # submodule call here (wte, wpe, ln_*, c_attn, c_proj, c_fc, lm_head), and each call notes its module's
        # parameters and their storage (Module._jit_key): no model-wide walk of parameters() per token.
        S = self.config.block_size
        dt = self.lm_head.weight.dtype
        # additive mask over the cache rows: 0 for rows 0..pos, -inf after
        dev = pos.device
        mask = plast.masked_fill(
            plast.zeros(S, dtype=dt, device=dev),
            plast.arange(0, S, dtype=plast.int64, device=dev) > pos,
            float("-inf"),
        )
        x = self.transformer.wte(tok) + self.transformer.wpe(pos)  # (B, C)
        x = self.transformer.drop(x)
        for i, block in enumerate(self.transformer.h):
            x = block.decode(x, flat_caches[2 * i], flat_caches[2 * i + 1], pos, mask)
        return self.lm_head(self.transformer.ln_f(x))

    def _caches(self, b, dtype, device):
        """The K/V caches for batch size b, made on first use and kept: a replayed decode plan holds views of
        the caches it was traced with, so each (batch, dtype, device) keeps its own for the model's lifetime."""
        key = (b, dtype, device)
        flat = self._kv_caches.get(key)
        if flat is None:
            c = self.config
            hs = c.n_embd // c.n_head
            k_shape = (b, c.n_head, hs, c.block_size)  # keys transposed (see the module docstring)
            v_shape = (b, c.n_head, c.block_size, hs)
            flat = [
                plast.zeros(k_shape if i % 2 == 0 else v_shape, dtype=dtype, device=device)
                for i in range(2 * c.n_layer)
            ]
            self._kv_caches[key] = flat
        return flat

    def __getstate__(self):
        # copies and pickles don't carry generation state (caches, traced plans bound to this model)
        state = self.__dict__.copy()
        state["_decode_jit"], state["_kv_caches"] = None, {}
        return state

    def clear_kv_cache(self):
        """Free the K/V caches and the decode plans that generate(use_cache=True) keeps between calls."""
        self._kv_caches = {}
        self._decode_jit = None

    def generate(
        self,
        idx,
        max_new_tokens,
        temperature=1.0,
        top_k=None,
        top_p=None,
        greedy=False,
        use_cache=True,
        generator=None,
        return_logits=False,
    ):
        """Append `max_new_tokens` tokens to idx (B, T) and return the (B, T + max_new_tokens) ids.

        Each step samples from ``softmax(logits / temperature)`` restricted to the ``top_k`` most likely
        tokens and/or the smallest set holding ``top_p`` of the probability (nucleus), with
        ``plast.multinomial`` and `generator`; ``greedy=True`` (or ``temperature=0``) takes the argmax.
        ``use_cache`` decodes with the K/V cache (see the module docstring); tokens and logits are the same as
        without it. The context is cropped to the last ``block_size`` tokens, as nanoGPT. Runs under no_grad.
        ``return_logits=True`` (a plast extension) also returns the list of each step's logits (B, vocab).

        >>> m = plast.nn.GPT(plast.nn.GPTConfig(block_size=8, vocab_size=11, n_layer=1, n_head=2, n_embd=8))
        >>> m.generate(plast.tensor([[1, 2]]), 3, greedy=True).shape
        plast.Size([1, 5])
        """
        if idx.ndim != 2 or idx.dtype not in (plast.int64, plast.int32):
            raise ShapeError(
                f"{self._get_name()}.generate: expected int64 token ids of shape (B, T), got {idx.dtype} {tuple(idx.shape)}"
            )
        if idx.shape[1] == 0:
            raise ShapeError(
                f"{self._get_name()}.generate: the prompt needs at least one token, got {tuple(idx.shape)}"
            )
        if temperature < 0:
            raise ValueError(f"generate: temperature must be >= 0, got {temperature}")
        if top_k is not None and top_k <= 0:
            raise ValueError(f"generate: top_k must be positive, got {top_k}")
        if top_p is not None and not 0.0 < top_p <= 1.0:
            raise ValueError(f"generate: top_p must be in (0, 1], got {top_p}")
        bs = self.config.block_size
        idx = idx.to(plast.int64)
        B = idx.shape[0]
        step_logits = []
        pieces, L = [idx], idx.shape[1]  # the sequence so far, concatenated only when needed
        with plast.no_grad():
            caches = flat = nxt = None
            for _ in range(max_new_tokens):
                if use_cache and L <= bs:
                    if caches is None:
                        w = self.lm_head.weight
                        flat = self._caches(B, w.dtype, w.device)
                        caches = list(zip(flat[0::2], flat[1::2]))
                        logits = self._prefill(plast.cat(pieces, dim=1), caches)
                    else:
                        if self._decode_jit is None:
                            self._decode_jit = plast.jit(self._decode_step)
                        # runtime inputs: the last token and its position (cache rows 0..L-2 are filled). NOTE:
                        # the token is reshaped out here: a view taken inside a traced function would keep the
                        # trace-time argument's memory on replay
                        pos = plast.tensor([L - 1], dtype=plast.int64, device=idx.device)
                        logits = self._decode_jit(nxt.reshape(B), pos, *flat)
                else:
                    pieces = [plast.cat(pieces, dim=1)] if len(pieces) > 1 else pieces
                    logits, _ = self(pieces[0] if L <= bs else pieces[0][:, -bs:])
                    logits = logits[:, -1, :]
                if return_logits:
                    step_logits.append(logits)
                nxt = _sample(logits, temperature, top_k, top_p, greedy, generator).to(plast.int64)
                # compute each step now: left lazy, 200 steps become one graph that grows quadratically to build
                plast.forward(nxt)
                pieces.append(nxt)
                L += 1
        idx = plast.cat(pieces, dim=1) if len(pieces) > 1 else pieces[0]
        return (idx, step_logits) if return_logits else idx
