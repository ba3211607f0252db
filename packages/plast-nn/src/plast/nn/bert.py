"""BERT encoder with Hugging Face transformers' module tree and parameter names, so a BERT ``model.safetensors``
loads with ``load_state_dict(strict=True)``.

Names: ``embeddings.{word,position,token_type}_embeddings``, ``embeddings.LayerNorm``, ``embeddings.position_ids``
(a buffer; older checkpoints carry it, newer ones do not: both load), ``encoder.layer.{i}.attention.self.{query,
key,value}``, ``.attention.output.{dense,LayerNorm}``, ``.intermediate.dense``, ``.output.{dense,LayerNorm}``,
``pooler.dense``. Post-LN layers (``LayerNorm(x + sublayer(x))``), absolute positions, padding mask through
``plast.nn.functional.scaled_dot_product_attention`` as a (B, 1, 1, T) bool mask, which core runs in its fused
attention kernel (``flash_attention_masked``: only the visible keys are packed, no T x T scores).

>>> cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
>>> out = BertModel(cfg)(plast.tensor([[1, 2, 3]]))
>>> tuple(out.last_hidden_state.shape), tuple(out.pooler_output.shape)
((1, 3, 16), (1, 16))
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from typing import NamedTuple

import plast
from plast.errors import ShapeError

from . import functional as F
from . import init
from .containers import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm
from .sparse import Embedding

_ACTIVATIONS = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "relu": None}


@dataclass
class BertConfig:
    """The fields of a Hugging Face BERT ``config.json`` that shape the model (defaults: bert-base-uncased).

    >>> BertConfig(hidden_size=384, num_attention_heads=12).hidden_size
    384
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    position_embedding_type: str = "absolute"

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig: hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads})"
            )
        if self.hidden_act not in _ACTIVATIONS:
            raise NotImplementedError(
                f"BertConfig: hidden_act {self.hidden_act!r} is not supported (supported: {sorted(_ACTIVATIONS)})"
            )
        if self.position_embedding_type != "absolute":
            raise NotImplementedError(
                f"BertConfig: position_embedding_type {self.position_embedding_type!r} is not supported "
                "(only 'absolute')"
            )

    @classmethod
    def from_dict(cls, d: dict) -> BertConfig:
        """From a ``config.json`` dict; keys this model does not use are ignored, a non-BERT model_type raises."""
        kind = d.get("model_type", "bert")
        if kind != "bert":
            raise NotImplementedError(f"BertConfig: model_type {kind!r} is not BERT")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> BertConfig:
        """From a ``config.json`` file."""
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))


class BertModelOutput(NamedTuple):
    """What ``BertModel`` returns: ``last_hidden_state`` (B, T, H) and ``pooler_output`` (B, H) (None without
    the pooler); indexable as transformers' ``return_dict=False`` tuple."""

    last_hidden_state: plast.Tensor
    pooler_output: plast.Tensor | None


class BertEmbeddings(Module):
    """word + absolute position + token type embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.position_embeddings = Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids", plast.arange(config.max_position_embeddings).reshape(1, -1))

    def _load_from_state_dict(self, state_dict, prefix, missing_keys, unexpected_keys, error_msgs):
        # NOTE: transformers >= 4.31 no longer saves position_ids (it is always arange); accept both kinds of file
        key = prefix + "position_ids"
        if key not in state_dict:
            state_dict = {**state_dict, key: self.position_ids}
        super()._load_from_state_dict(state_dict, prefix, missing_keys, unexpected_keys, error_msgs)

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        T = input_ids.shape[1]
        if position_ids is None:
            position_ids = self.position_ids[:, :T]
        x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(Module):
    """Multi-head scaled dot-product attention with separate ``query``, ``key``, ``value`` projections."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.query = Linear(config.hidden_size, config.hidden_size)
        self.key = Linear(config.hidden_size, config.hidden_size)
        self.value = Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x, mask=None):
        B, T, H = x.shape
        nh, hs = self.num_attention_heads, self.attention_head_size
        q = self.query(x).reshape(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.key(x).reshape(B, T, nh, hs).transpose(1, 2)
        v = self.value(x).reshape(B, T, nh, hs).transpose(1, 2)
        p = self.dropout_p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        return y.transpose(1, 2).reshape(B, T, H)


class BertSelfOutput(Module):
    """``LayerNorm(x + dropout(dense(attention)))``."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, hidden, residual):
        return self.LayerNorm(self.dropout(self.dense(hidden)) + residual)


class BertAttention(Module):
    """Self-attention and its output block."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, x, mask=None):
        return self.output(self.self(x, mask), x)


class BertIntermediate(Module):
    """``act(dense(x))``, hidden -> intermediate."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = Linear(config.hidden_size, config.intermediate_size)
        self.approximate = _ACTIVATIONS[config.hidden_act]

    def forward(self, x):
        x = self.dense(x)
        if self.approximate is None:
            return F.relu(x)
        if self.approximate == "none":
            return _gelu_erf(x)
        return F.gelu(x, approximate=self.approximate)


_SQRT_HALF = 0.7071067811865476


def _gelu_erf(x):
    """Exact GELU, ``x * (1 + erf(x / sqrt(2))) / 2``, written out in elementwise ops.

    NOTE: F.gelu after a Linear fuses into core's addmm+gelu kernel, whose erf epilogue was slower than this
    composite (all-MiniLM-L6-v2's forward: 871 ms vs 727 ms at batch 32 x 40 tokens, 1 thread); same values
    (within 5e-7 of torch's). Measured again with bench/bench_embed.py's 1,024 lines (1 thread, AMD EPYC with
    AVX-512): this composite 2.01 s, F.gelu 1.94-1.98 s, no GELU at all 1.86-2.11 s: the GELU is within the
    noise, the GEMMs are 92% of the kernel time."""
    return x * 0.5 * (1.0 + plast.erf(x * _SQRT_HALF))


class BertOutput(Module):
    """``LayerNorm(residual + dropout(dense(x)))``, intermediate -> hidden."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, hidden, residual):
        return self.LayerNorm(self.dropout(self.dense(hidden)) + residual)


class BertLayer(Module):
    """One post-LN encoder layer: attention block, then feed-forward block."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, x, mask=None):
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class BertEncoder(Module):
    """``num_hidden_layers`` BertLayers in ``layer``."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x, mask=None):
        for layer in self.layer:
            x = layer(x, mask)
        return x


class BertPooler(Module):
    """``tanh(dense(h[:, 0]))``: the [CLS] position's hidden state."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden):
        return plast.tanh(self.dense(hidden[:, 0]))


class BertModel(Module):
    """BERT encoder (transformers' ``BertModel``): ``forward(input_ids, attention_mask=None,
    token_type_ids=None, position_ids=None)`` with (B, T) int64 ids and a (B, T) mask of 1 (attend) / 0
    (padding), returning ``BertModelOutput(last_hidden_state, pooler_output)``.

    Weights start as transformers initializes them (normal(0, initializer_range), zero biases, unit LayerNorm,
    zero padding row; ``init_weights=False`` skips that, for a checkpoint loaded over it); ``from_pretrained(dir)`` loads a directory's ``config.json`` and ``model.safetensors``.

    >>> cfg = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
    >>> BertModel(cfg)(plast.tensor([[2, 5, 0]]), attention_mask=plast.tensor([[1, 1, 0]]))[0].shape
    plast.Size([1, 3, 8])
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True, *, init_weights: bool = True):
        super().__init__()
        if not isinstance(config, BertConfig):
            raise TypeError(f"BertModel takes a BertConfig, got {type(config).__name__}")
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        if init_weights:
            self._init_weights()

    def _init_weights(self):
        std = self.config.initializer_range
        for m in self.modules():
            if isinstance(m, (Linear, Embedding)):
                init.normal_(m.weight, 0.0, std)
                if isinstance(m, Linear) and m.bias is not None:
                    init.zeros_(m.bias)
            elif isinstance(m, LayerNorm):
                init.ones_(m.weight)
                init.zeros_(m.bias)
        with plast.no_grad():
            pad = self.config.pad_token_id
            if pad is not None and 0 <= pad < self.config.vocab_size:
                self.embeddings.word_embeddings.weight[pad] = 0.0

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, add_pooling_layer: bool = True) -> BertModel:
        """A BertModel from a Hugging Face model directory (``config.json`` + ``model.safetensors``), loaded
        with ``strict=True`` (a checkpoint without the pooler loads into ``add_pooling_layer=False``)."""
        directory = os.fspath(directory)
        config = BertConfig.from_json_file(os.path.join(directory, "config.json"))
        weights = os.path.join(directory, "model.safetensors")
        if not os.path.isfile(weights):
            raise FileNotFoundError(
                f"{directory} has no model.safetensors (only safetensors weights are read; convert a "
                "pytorch_model.bin with safetensors.torch.save_file)"
            )
        state = plast.load(weights, map_location="cpu")
        state = {k[5:] if k.startswith("bert.") else k: v for k, v in state.items()}
        has_pooler = any(k.startswith("pooler.") for k in state)
        model = cls(config, add_pooling_layer=add_pooling_layer and has_pooler, init_weights=False)
        model.load_state_dict(state, strict=True)
        return model.eval()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        if input_ids.ndim != 2:
            raise ShapeError(
                f"BertModel: input_ids must be (batch, seq_len), got shape {tuple(input_ids.shape)}"
            )
        B, T = input_ids.shape
        if T > self.config.max_position_embeddings:
            raise ShapeError(
                f"BertModel: sequence length {T} exceeds max_position_embeddings "
                f"({self.config.max_position_embeddings}); truncate the input"
            )
        mask = None
        if attention_mask is not None:
            if tuple(attention_mask.shape) != (B, T):
                raise ShapeError(
                    f"BertModel: attention_mask must have the shape of input_ids {(B, T)}, "
                    f"got {tuple(attention_mask.shape)}"
                )
            # bool, True = may attend (scaled_dot_product_attention's convention), broadcast over heads and queries
            mask = (attention_mask != 0).reshape(B, 1, 1, T)
        x = self.embeddings(input_ids, token_type_ids, position_ids)
        x = self.encoder(x, mask)
        pooled = self.pooler(x) if self.pooler is not None else None
        return BertModelOutput(x, pooled)
