"""plast's own Transformer blocks (batch first, pre-LayerNorm): causal_mask, positional encodings,
TransformerBlock, TransformerBlockStack, TransformerLM (torch.nn's Transformer family is in torch_transformer.py).

Mask conventions. ``causal_mask(n)`` is a bool (n, n) matrix with True where a query may attend (the lower
triangle, diagonal included): the convention of ``F.scaled_dot_product_attention`` and of nanoGPT's ``tril``
buffer. ``MultiheadAttention`` and the blocks here take torch.nn.MultiheadAttention's masks, where a bool True
means "masked out"; pass ``~causal_mask(n)`` there, or the float form ``causal_mask(n, dtype=plast.float32)``
(0 where allowed, -inf elsewhere, like torch's ``nn.Transformer.generate_square_subsequent_mask``), which means
the same to both.
"""

import math

import numpy as np

import plast
from plast.errors import ShapeError

from . import functional as F
from . import init
from .activation import GELU, ReLU, SiLU
from .attention import MultiheadAttention
from .containers import ModuleList, Sequential
from .dropout import Dropout
from .linear import Linear, _factory_dtype
from .module import Module
from .normalization import LayerNorm
from .parameter import Parameter
from .sparse import Embedding


def causal_mask(n, dtype=None, device=None):
    """The (n, n) causal mask: bool with True where query i may attend key j (j <= i), as
    ``F.scaled_dot_product_attention`` reads a bool mask; with a float ``dtype``, the additive form (0 where
    allowed, -inf elsewhere), which MultiheadAttention and scaled_dot_product_attention both read the same way.

    >>> plast.nn.causal_mask(3).tolist()
    [[True, False, False], [True, True, False], [True, True, True]]
    >>> plast.nn.causal_mask(2, dtype=plast.float32).tolist()
    [[0.0, -inf], [0.0, 0.0]]
    """
    m = np.tril(np.ones((n, n), dtype=bool))
    if dtype is None or dtype == plast.bool:
        return plast.tensor(m, device=device)
    dt = plast.as_dtype(dtype)
    if not dt.is_floating_point:
        raise TypeError(f"causal_mask: dtype must be bool or floating point, got {dt}")
    return plast.tensor(np.where(m, 0.0, -np.inf).astype(dt.np), device=device)


class SinusoidalPositionalEncoding(Module):
    """Adds the fixed sine/cosine position code of "Attention Is All You Need" to a (N, T, d_model) input:
    ``pe[t, 2i] = sin(t / 10000^(2i/d_model))``, ``pe[t, 2i+1] = cos(...)``; then dropout. ``offset`` shifts
    the positions (decoding one token at position ``offset``). The table is a non-persistent buffer.

    >>> pe = plast.nn.SinusoidalPositionalEncoding(4, max_len=16)
    >>> [round(v, 4) for v in pe(plast.zeros(1, 2, 4))[0, 1].tolist()]
    [0.8415, 0.5403, 0.01, 0.9999]
    """

    def __init__(self, d_model, max_len=5000, dropout=0.0, dtype=None):
        super().__init__()
        dt = _factory_dtype(None, dtype)
        self.d_model = d_model
        self.max_len = max_len
        pos = np.arange(max_len, dtype=np.float64)[:, None]
        div = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))
        pe = np.zeros((max_len, d_model), dtype=np.float64)
        pe[:, 0::2] = np.sin(pos * div)
        pe[:, 1::2] = np.cos(pos * div[: d_model // 2])
        self.register_buffer("pe", plast.tensor(pe.astype(dt.np)), persistent=False)
        self.dropout = Dropout(dropout)

    def forward(self, x, offset=0):
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ShapeError(
                f"SinusoidalPositionalEncoding(d_model={self.d_model}, max_len={self.max_len}): expected an input of shape (N, T, {self.d_model}), got {tuple(x.shape)}"
            )
        t = x.shape[1]
        if offset + t > self.max_len:
            raise ShapeError(
                f"SinusoidalPositionalEncoding(d_model={self.d_model}, max_len={self.max_len}): positions {offset}..{offset + t - 1} exceed max_len={self.max_len}"
            )
        return self.dropout(x + self.pe[offset : offset + t])

    def extra_repr(self):
        return f"d_model={self.d_model}, max_len={self.max_len}"


class LearnedPositionalEmbedding(Module):
    """Adds a learned position embedding (``weight``: (max_len, d_model), init N(0, 0.02) as GPT-2) to a
    (N, T, d_model) input; ``offset`` shifts the positions.

    >>> plast.nn.LearnedPositionalEmbedding(16, 4)(plast.zeros(2, 3, 4)).shape
    plast.Size([2, 3, 4])
    """

    def __init__(self, max_len, d_model, dtype=None):
        super().__init__()
        dt = _factory_dtype(None, dtype)
        self.max_len = max_len
        self.d_model = d_model
        self.weight = Parameter(plast.empty(max_len, d_model, dtype=dt))
        init.normal_(self.weight, 0.0, 0.02)

    def forward(self, x, offset=0):
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ShapeError(
                f"{self!r}: expected an input of shape (N, T, {self.d_model}), got {tuple(x.shape)}"
            )
        t = x.shape[1]
        if offset + t > self.max_len:
            raise ShapeError(f"{self!r}: positions {offset}..{offset + t - 1} exceed max_len={self.max_len}")
        pos = plast.arange(offset, offset + t, device=x.device)
        return x + F.embedding(pos, self.weight)

    def extra_repr(self):
        return f"{self.max_len}, {self.d_model}"


_ACTIVATIONS = {"gelu": lambda: GELU(), "gelu_tanh": lambda: GELU("tanh"), "relu": ReLU, "silu": SiLU}


class TransformerBlock(Module):
    """Pre-LN Transformer block on (N, T, d_model): ``x = x + drop(attn(ln_1(x)))``, then
    ``x = x + mlp(ln_2(x))`` with ``mlp = Linear(d_model, d_ff) -> activation -> Linear(d_ff, d_model) ->
    Dropout``. ``causal=True`` masks future positions; ``attn_mask`` / ``key_padding_mask`` follow
    MultiheadAttention (bool True = masked out, or additive float).

    >>> blk = plast.nn.TransformerBlock(16, 4, causal=True)
    >>> blk(plast.randn(2, 5, 16)).shape
    plast.Size([2, 5, 16])
    """

    def __init__(
        self,
        d_model,
        n_heads,
        d_ff=None,
        dropout=0.0,
        activation="gelu",
        bias=True,
        causal=False,
        norm_eps=1e-5,
        dtype=None,
    ):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"TransformerBlock: activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}"
            )
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.d_model = d_model
        self.causal = causal
        self.ln_1 = LayerNorm(d_model, eps=norm_eps, bias=bias, dtype=dtype)
        self.attn = MultiheadAttention(
            d_model, n_heads, dropout=dropout, bias=bias, batch_first=True, dtype=dtype
        )
        self.drop = Dropout(dropout)
        self.ln_2 = LayerNorm(d_model, eps=norm_eps, bias=bias, dtype=dtype)
        self.mlp = Sequential(
            Linear(d_model, d_ff, bias=bias, dtype=dtype),
            _ACTIVATIONS[activation](),
            Linear(d_ff, d_model, bias=bias, dtype=dtype),
            Dropout(dropout),
        )

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ShapeError(
                f"TransformerBlock(d_model={self.d_model}): expected an input of shape (N, T, {self.d_model}), got "
                f"{tuple(x.shape)}"
            )
        is_causal = False
        if self.causal:
            dt = x.dtype if x.dtype.is_floating_point else plast.get_default_dtype()
            cm = causal_mask(x.shape[1], dtype=dt, device=x.device)
            if attn_mask is None:
                attn_mask, is_causal = cm, True
            else:
                attn_mask = cm + _as_additive(attn_mask, cm.dtype)
        h = self.ln_1(x)
        a, _ = self.attn(
            h,
            h,
            h,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            attn_mask=attn_mask,
            is_causal=is_causal,
        )
        x = x + self.drop(a)
        return x + self.mlp(self.ln_2(x))


def _as_additive(mask, dt):
    if mask.dtype == plast.bool:
        return plast.where(mask, float("-inf"), 0.0).to(dt)
    return mask.to(dt)


class TransformerBlockStack(Module):
    """A stack of ``num_layers`` TransformerBlocks (``self.layers``) and, with ``final_norm`` (default), a
    final LayerNorm (``self.norm``), as pre-LN models need.

    >>> enc = plast.nn.TransformerBlockStack(2, 16, 4, causal=True)
    >>> enc(plast.randn(2, 5, 16)).shape
    plast.Size([2, 5, 16])
    """

    def __init__(
        self,
        num_layers,
        d_model,
        n_heads,
        d_ff=None,
        dropout=0.0,
        activation="gelu",
        bias=True,
        causal=False,
        final_norm=True,
        norm_eps=1e-5,
        dtype=None,
    ):
        super().__init__()
        self.layers = ModuleList(
            TransformerBlock(d_model, n_heads, d_ff, dropout, activation, bias, causal, norm_eps, dtype)
            for _ in range(num_layers)
        )
        self.norm = LayerNorm(d_model, eps=norm_eps, bias=bias, dtype=dtype) if final_norm else None

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        for layer in self.layers:
            x = layer(x, attn_mask=attn_mask, key_padding_mask=key_padding_mask)
        return x if self.norm is None else self.norm(x)


class TransformerLM(Module):
    """A causal language model: token embedding (``tok_emb``) + positions (``pos``: learned or sinusoidal) +
    dropout + causal TransformerBlockStack (``encoder``, with its final LayerNorm) + linear head (``head``, tied to
    the token embedding by default). ``forward(idx, targets=None)`` returns ``(logits (N, T, vocab), loss)``;
    loss is the mean cross-entropy when targets are given (ignore_index -1), else None.

    >>> lm = plast.nn.TransformerLM(vocab_size=11, d_model=16, n_heads=2, num_layers=1, max_len=8)
    >>> logits, loss = lm(plast.tensor([[1, 2, 3]]))
    >>> logits.shape, loss
    (plast.Size([1, 3, 11]), None)
    """

    def __init__(
        self,
        vocab_size,
        d_model,
        n_heads,
        num_layers,
        max_len,
        d_ff=None,
        dropout=0.0,
        activation="gelu",
        bias=True,
        positional="learned",
        tie_weights=True,
        dtype=None,
    ):
        super().__init__()
        if positional not in ("learned", "sinusoidal"):
            raise ValueError(
                f"TransformerLM: positional must be 'learned' or 'sinusoidal', got {positional!r}"
            )
        self.vocab_size = vocab_size
        self.max_len = max_len
        self.tok_emb = Embedding(vocab_size, d_model, dtype=dtype)
        init.normal_(self.tok_emb.weight, 0.0, 0.02)
        if positional == "learned":
            self.pos = LearnedPositionalEmbedding(max_len, d_model, dtype=dtype)
        else:
            self.pos = SinusoidalPositionalEncoding(d_model, max_len, dtype=dtype)
        self.drop = Dropout(dropout)
        self.encoder = TransformerBlockStack(
            num_layers, d_model, n_heads, d_ff, dropout, activation, bias, causal=True, dtype=dtype
        )
        self.head = Linear(d_model, vocab_size, bias=False, dtype=dtype)
        if tie_weights:
            self.head.weight = self.tok_emb.weight

    def forward(self, idx, targets=None):
        if idx.ndim != 2:
            raise ShapeError(f"TransformerLM: expected token ids of shape (N, T), got {tuple(idx.shape)}")
        if idx.shape[1] > self.max_len:
            raise ShapeError(
                f"TransformerLM: expected token ids of shape (N, T) with T <= max_len={self.max_len}, got "
                f"{tuple(idx.shape)}"
            )
        x = self.drop(self.pos(self.tok_emb(idx)))
        logits = self.head(self.encoder(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, self.vocab_size), targets.reshape(-1), ignore_index=-1)
        return logits, loss
