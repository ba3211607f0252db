"""torch.nn's Transformer family with its signatures, submodule names and masks, so torch state dicts load:
TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder, TransformerDecoder, Transformer.

Masks are MultiheadAttention's (bool True = may NOT attend, or an additive float mask, e.g.
``Transformer.generate_square_subsequent_mask(n)``). ``is_causal`` / ``tgt_is_causal`` are hints that the mask
given is causal, as torch's; left at None, the stacks do not inspect the mask's values (torch compares it with
a causal mask to choose a kernel: the result is the same either way, and reading values would force a
computation and break ``@plast.jit``), so the mask is applied as given.

``enable_nested_tensor`` and ``mask_check`` are accepted and have no effect: plast has no nested tensors. One
visible difference follows: in eval mode torch's nested-tensor fast path (batch_first, a src_key_padding_mask)
returns zeros at padded positions, where plast returns the values computed there (rows that the padding mask
does not hide from anything else, so every non-padded position agrees).
"""

import copy

import numpy as np

import plast
from plast.errors import ShapeError

from . import functional as F
from . import init
from .attention import MultiheadAttention
from .containers import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm


def _activation(activation):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise TypeError(f"activation must be 'relu', 'gelu' or a callable, got {type(activation).__name__}")
    return activation


def _clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoderLayer(Module):
    """Self-attention and feed-forward block (torch.nn.TransformerEncoderLayer): submodules ``self_attn``,
    ``linear1``, ``dropout``, ``linear2``, ``norm1``, ``norm2``, ``dropout1``, ``dropout2``; post-LN by
    default, pre-LN with ``norm_first=True``; ``activation`` 'relu', 'gelu' or a callable.

    >>> layer = plast.nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True)
    >>> layer(plast.randn(2, 5, 16)).shape
    plast.Size([2, 5, 16])
    """

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """src (S, N, E) ((N, S, E) with batch_first, (S, E) unbatched) -> the same shape."""
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=bool(is_causal),
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention over ``memory`` and feed-forward (torch.nn.TransformerDecoderLayer):
    submodules ``self_attn``, ``multihead_attn``, ``linear1``, ``dropout``, ``linear2``, ``norm1``..``norm3``,
    ``dropout1``..``dropout3``.

    >>> layer = plast.nn.TransformerDecoderLayer(16, 4, dim_feedforward=32)
    >>> layer(plast.randn(5, 2, 16), plast.randn(7, 2, 16)).shape
    plast.Size([5, 2, 16])
    """

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **kw
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=False,
        memory_is_causal=False,
    ):
        """tgt (T, N, E) and memory (S, N, E) (batch first with batch_first) -> (T, N, E)."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(
                self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal
            )
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(
                x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            )
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=bool(is_causal),
            need_weights=False,
        )[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(
            x,
            mem,
            mem,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=bool(is_causal),
            need_weights=False,
        )[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` (``self.layers``), then the optional ``norm``
    (torch.nn.TransformerEncoder). ``enable_nested_tensor`` and ``mask_check`` are accepted and have no effect
    (module docstring).

    plast's own pre-LN stack of TransformerBlocks, which had this name before, is ``TransformerBlockStack``.

    >>> layer = plast.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32)
    >>> enc = plast.nn.TransformerEncoder(layer, num_layers=2)
    >>> enc(plast.randn(5, 2, 16)).shape
    plast.Size([5, 2, 16])
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(
                "TransformerEncoder(encoder_layer, num_layers, norm=None) takes an encoder layer module as "
                f"torch's does, got {type(encoder_layer).__name__}; plast's own pre-LN stack built from sizes is "
                "plast.nn.TransformerBlockStack(num_layers, d_model, n_heads, ...)"
            )
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for mod in self.layers:
            out = mod(
                out, src_mask=mask, is_causal=bool(is_causal), src_key_padding_mask=src_key_padding_mask
            )
        if self.norm is not None:
            out = self.norm(out)
        return out


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` (``self.layers``), then the optional ``norm``
    (torch.nn.TransformerDecoder).

    >>> dec = plast.nn.TransformerDecoder(plast.nn.TransformerDecoderLayer(16, 4, 32), num_layers=2)
    >>> dec(plast.randn(5, 2, 16), plast.randn(3, 2, 16)).shape
    plast.Size([5, 2, 16])
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        if not isinstance(decoder_layer, Module):
            raise TypeError(
                "TransformerDecoder(decoder_layer, num_layers, norm=None) takes a decoder layer module, got "
                f"{type(decoder_layer).__name__}"
            )
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        out = tgt
        for mod in self.layers:
            out = mod(
                out,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal),
                memory_is_causal=memory_is_causal,
            )
        if self.norm is not None:
            out = self.norm(out)
        return out


def generate_square_subsequent_mask(sz, device=None, dtype=None):
    """The (sz, sz) float causal mask: 0 on and below the diagonal, -inf above (torch's).

    >>> plast.nn.Transformer.generate_square_subsequent_mask(2).tolist()
    [[0.0, -inf], [0.0, 0.0]]
    """
    dt = plast.get_default_dtype() if dtype is None else plast.as_dtype(dtype)
    m = np.triu(np.full((sz, sz), -np.inf), k=1).astype(dt.np)
    return plast.tensor(m, device=device)


class Transformer(Module):
    """The encoder-decoder Transformer (torch.nn.Transformer): ``encoder`` (TransformerEncoder with a final
    LayerNorm) and ``decoder`` (TransformerDecoder with one), or ``custom_encoder`` / ``custom_decoder``;
    every weight matrix xavier_uniform_-initialised, as torch's.

    >>> model = plast.nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
    ...                              dim_feedforward=32)
    >>> model(plast.randn(6, 2, 16), plast.randn(4, 2, 16)).shape
    plast.Size([4, 2, 16])
    """

    def __init__(
        self,
        d_model=512,
        nhead=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        custom_encoder=None,
        custom_decoder=None,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        layer_kw = dict(
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=batch_first,
            norm_first=norm_first,
            bias=bias,
            **kw,
        )
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(d_model, nhead, **layer_kw),
                num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw),
            )
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(d_model, nhead, **layer_kw),
                num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw),
            )
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self):
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(
        self,
        src,
        tgt,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        src_key_padding_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        src_is_causal=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        """src (S, N, E), tgt (T, N, E) (batch first with batch_first; unbatched (S, E), (T, E)) -> (T, N, E)."""
        is_batched = src.ndim == 3
        if not self.batch_first and src.shape[1] != tgt.shape[1] and is_batched:
            raise RuntimeError(
                f"the batch number of src and tgt must be equal, got src {tuple(src.shape)} and tgt "
                f"{tuple(tgt.shape)} (batch dim 1; batch_first=False)"
            )
        if self.batch_first and src.shape[0] != tgt.shape[0] and is_batched:
            raise RuntimeError(
                f"the batch number of src and tgt must be equal, got src {tuple(src.shape)} and tgt "
                f"{tuple(tgt.shape)} (batch dim 0; batch_first=True)"
            )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(
                f"the feature number of src and tgt must be equal to d_model ({self.d_model}), got src "
                f"{tuple(src.shape)} and tgt {tuple(tgt.shape)}"
            )
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    generate_square_subsequent_mask = staticmethod(generate_square_subsequent_mask)
