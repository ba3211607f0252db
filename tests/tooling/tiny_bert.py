"""A tiny random sentence-transformers model directory, laid out as all-MiniLM-L6-v2's, for tests that must not
need the 83 MB model package (plast-nn's and plast-experiment's tests share it)."""

import json
from pathlib import Path

import numpy as np

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "python",
    "list",
    "dict",
    "function",
    "import",
    "is",
    "of",
]


def write_tiny_model(d, *, hidden=16, layers=2, heads=2, pooling="mean", normalize=True, seed=0):
    """Write config.json, vocab.txt, tokenizer_config.json, model.safetensors (random), modules.json,
    sentence_bert_config.json and 1_Pooling/config.json into ``d``; return ``d`` as a Path."""
    from safetensors.numpy import save_file

    d = Path(d)
    (d / "1_Pooling").mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *".,!?'", *WORDS, "##s", "##ing", "##ed"]
    vocab += [chr(c) for c in range(ord("a"), ord("z") + 1)] + [
        "##" + chr(c) for c in range(ord("a"), ord("z") + 1)
    ]
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (d / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    cfg = {
        "model_type": "bert",
        "vocab_size": len(vocab),
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * hidden,
        "hidden_act": "gelu",
        "max_position_embeddings": 64,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
    }
    (d / "config.json").write_text(json.dumps(cfg))
    rng = np.random.default_rng(seed)

    def rand(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    h, f = hidden, 4 * hidden
    w = {
        "embeddings.word_embeddings.weight": rand(len(vocab), h),
        "embeddings.position_embeddings.weight": rand(64, h),
        "embeddings.token_type_embeddings.weight": rand(2, h),
        "embeddings.LayerNorm.weight": 1 + rand(h, scale=0.1),
        "embeddings.LayerNorm.bias": rand(h, scale=0.1),
        "embeddings.position_ids": np.arange(64, dtype=np.int64).reshape(1, 64),
        "pooler.dense.weight": rand(h, h),
        "pooler.dense.bias": rand(h),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            w[p + f"attention.self.{name}.weight"], w[p + f"attention.self.{name}.bias"] = rand(h, h), rand(h)
        w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"] = rand(h, h), rand(h)
        w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"] = rand(f, h), rand(f)
        w[p + "output.dense.weight"], w[p + "output.dense.bias"] = rand(h, f), rand(h)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + ln + ".weight"], w[p + ln + ".bias"] = 1 + rand(h, scale=0.1), rand(h, scale=0.1)
    save_file(w, str(d / "model.safetensors"))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append(
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        )
    (d / "modules.json").write_text(json.dumps(modules))
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32, "do_lower_case": False}))
    modes = [pooling] if isinstance(pooling, str) else list(pooling)
    pool = {
        "word_embedding_dimension": h,
        "pooling_mode_cls_token": "cls" in modes,
        "pooling_mode_mean_tokens": "mean" in modes,
        "pooling_mode_max_tokens": "max" in modes,
        "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len" in modes,
    }
    (d / "1_Pooling" / "config.json").write_text(json.dumps(pool))
    return d
