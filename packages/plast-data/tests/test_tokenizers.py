"""Tests for plast.data.tokenizers: BPE training (against a naive full recount), round trips, special tokens,
the model file (save/load and every kind of damage), decode errors, CharTokenizer."""

import doctest
import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from plast.data.corpora import python_docs
from plast.data.tokenizers import (
    GPT2_SPLIT_PATTERN,
    GPT4_SPLIT_PATTERN,
    BPETokenizer,
    CharTokenizer,
    Tokenizer,
    known_split_patterns,
    load,
    register_split_pattern,
)
from plast.data.tokenizers.bpe import bpe_heap, bpe_scan

EOT = "<|endoftext|>"
ONE_CHUNK = r"[\s\S]+"  # no pre-split: the whole text is one chunk
WORDS_AND_SPACES = r"\S+|\s+"
# tokenizer files may only use known patterns: these tests trust their own
register_split_pattern("test-one-chunk", ONE_CHUNK)
register_split_pattern("test-words-and-spaces", WORDS_AND_SPACES)


@pytest.fixture(scope="module")
def docs_tok():
    return BPETokenizer().train(python_docs(), 1024, special_tokens=[EOT])


@pytest.mark.parametrize("module", ["_base", "_format", "bpe", "char", "__init__"])
def test_docstring_examples_run(module):
    import importlib

    name = "plast.data.tokenizers" + ("" if module == "__init__" else "." + module)
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# ----- the naive oracle ---------------------------------------------------------------------------------------
def naive_merge(ids, pair, n):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(n)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def naive_train(text, pattern, num_merges):
    """Textbook BPE: every chunk occurrence kept (no dedup), all pair counts recounted before each merge,
    ties to the smallest pair. Returns (merges, final words)."""
    words = [list(c.encode("utf-8")) for c in regex.findall(pattern, text)]
    merges = []
    for k in range(num_merges):
        stats = Counter()
        for w in words:
            stats.update(zip(w, w[1:]))
        if not stats:
            break
        best = min(stats, key=lambda p: (-stats[p], p))
        words = [naive_merge(w, best, 256 + k) for w in words]
        merges.append(best)
    return merges, words


# ----- training -----------------------------------------------------------------------------------------------
def test_wikipedia_example_by_hand():
    # aaabdaaabac: aa (4) -> 256; then (256,97) and (97,98) tie at 2, the smaller pair (97,98) -> 257;
    # then (256,257) -> 258, leaving XdXac.
    tok = BPETokenizer().train("aaabdaaabac", 259, pattern=ONE_CHUNK)
    assert tok.merges == [(97, 97), (97, 98), (256, 257)]
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]
    assert tok.vocab[258] == b"aaab"


def test_weighted_chunks_by_hand():
    # chunks: 'hug' x1, ' pug' x10, ' pun' x10, ' bun' x10, ' hugs' x10, ' hug' x9, ' ' x1
    # ug 30 -> 256; ' p' 20, 'h'+256 20, 'un' 20 tie -> ' p' (32,112) 257; then (104,256) 258 beats (117,110);
    # then 'un' 259; ' '+258 (19) 260; then five pairs tie at 10 -> (32,98) 261.
    tok = BPETokenizer().train("hug pug pun bun hugs " * 10, 262)
    assert tok.merges == [(117, 103), (32, 112), (104, 256), (117, 110), (32, 258), (32, 98)]
    assert tok.encode("hug bun") == [258, 261, 259]


def test_overlapping_runs_by_hand():
    # 'aaaa' holds (97,97) three times but merges into two 256s; then (256,256) -> 257
    tok = BPETokenizer().train("aaaa", 258, pattern=ONE_CHUNK)
    assert tok.merges == [(97, 97), (256, 256)]
    assert tok.encode("aaaaa") == [257, 97]


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(alphabet="aab \n.1é", max_size=160),
    num_merges=st.integers(0, 40),
    pattern=st.sampled_from([GPT4_SPLIT_PATTERN, GPT2_SPLIT_PATTERN, ONE_CHUNK]),
)
@example(text="aaaaaaa ab ab ba", num_merges=10, pattern=ONE_CHUNK)
@example(text="abababab abab", num_merges=10, pattern=GPT4_SPLIT_PATTERN)
def test_incremental_training_equals_naive_recount(text, num_merges, pattern):
    expected, words = naive_train(text, pattern, num_merges)
    tok = BPETokenizer().train(text, 256 + num_merges, pattern=pattern)
    assert tok.merges == expected
    assert tok.vocab_size == 256 + len(expected)
    # encoding reproduces training's segmentation
    assert tok.encode(text) == [i for w in words for i in w]


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet="ab ", max_size=200), chunk=st.text(alphabet="ab ", max_size=600))
def test_heap_and_scan_encoders_agree(text, chunk):
    # encode uses bpe_heap (and bpe_scan first for long chunks); both must give training's segmentation
    tok = BPETokenizer().train(text, 300, pattern=ONE_CHUNK)
    ids = list(chunk.encode())
    scanned, finished = bpe_scan(ids, tok._ranks, tok._merges)
    assert finished
    assert bpe_heap(ids, tok._ranks) == scanned
    assert tok.encode(chunk) == naive_encode(tok.merges, chunk)


def naive_encode(merges, s):
    ids = list(s.encode())
    for k, pair in enumerate(merges):
        ids = naive_merge(ids, pair, 256 + k)
    return ids


def test_training_is_deterministic_across_hash_seeds():
    code = (
        "from plast.data.tokenizers import BPETokenizer\n"
        "t = ''.join(chr(0x61 + (i * 7919) % 5) + ' ' * (i % 3 == 0) for i in range(3000))\n"
        "print(BPETokenizer().train(t, 400).merges)\n"
    )
    outs = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        res = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        outs.add(res.stdout)
    assert len(outs) == 1


def test_training_stops_when_no_pairs_remain():
    tok = BPETokenizer().train("ab", 1000)
    assert tok.merges == [(97, 98)]
    assert tok.vocab_size == 257


def test_train_keeps_the_tokenizers_pattern_and_specials_by_default():
    tok = BPETokenizer(pattern=GPT2_SPLIT_PATTERN, special_tokens=[EOT]).train("a b c a b c", 300)
    assert tok.pattern == GPT2_SPLIT_PATTERN
    assert tok.special_tokens == {EOT: tok.vocab_size - 1}
    assert BPETokenizer().train("abc", 300).pattern == GPT4_SPLIT_PATTERN


def test_train_argument_errors():
    with pytest.raises(ValueError, match="vocab_size"):
        BPETokenizer().train("abc", 255)
    with pytest.raises(ValueError, match="vocab_size"):
        BPETokenizer().train("abc", 256, special_tokens=[EOT])
    with pytest.raises(ValueError, match="invalid split pattern"):
        BPETokenizer().train("abc", 300, pattern="(")
    with pytest.raises(TypeError):
        BPETokenizer().train(b"abc", 300)
    with pytest.raises(TypeError, match="list of strings"):
        BPETokenizer().train("abc", 300, special_tokens=EOT)
    tok = BPETokenizer().train("abcabc", 258, special_tokens=[EOT])
    for bad in ([""], [EOT, EOT], ["\ud800"]):
        with pytest.raises(ValueError):
            tok.train("xyxy", 300, special_tokens=bad)
    assert tok.merges == [(97, 98)] and tok.special_tokens == {EOT: 257}  # a failed train changes nothing


def test_special_tokens_are_cut_out_of_training_text():
    tok = BPETokenizer().train(f"x{EOT}y" * 50, 300, pattern=ONE_CHUNK, special_tokens=[EOT])
    assert tok.merges == [(121, 120)]  # only 'yx' spans the pieces; nothing of EOT was learned
    assert tok.special_tokens == {EOT: 257}
    assert tok.vocab_size == 258


def test_docs_training_and_round_trip(docs_tok):
    text = python_docs()
    assert docs_tok.vocab_size == 1024
    assert docs_tok.special_tokens == {EOT: 1023}
    ids = docs_tok.encode(text)
    assert len(ids) < len(text.encode("utf-8")) / 2.5  # about 2.9 bytes per token at vocab 1024
    assert docs_tok.decode(ids) == text
    assert docs_tok.encode(text) == ids  # cached encode agrees with the cold one


# ----- round trips --------------------------------------------------------------------------------------------
TRICKY = [
    "",
    " ",
    "\n\n\r\n\t ",
    "héllo wörld",
    "日本語のテキスト、中文文本。한국어",
    "emoji 👩‍👩‍👧‍👦 🇺🇳 👍🏽",
    "e\u0301 a\u0308\u0323 \u0915\u094d\u0937",  # combining marks, Devanagari conjunct
    "\u200b\ufeff\u00a0zero width",
    "\x00\x01\x7f\U0010ffff",
    "it's 12345678 don'T  ",
    EOT,
]


@pytest.mark.parametrize("s", TRICKY)
def test_round_trip_tricky(docs_tok, s):
    ids = docs_tok.encode(s, disallowed_special=())
    assert docs_tok.decode(ids, errors="strict") == s


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=st.text())
def test_round_trip_random_unicode(docs_tok, s):
    assert docs_tok.decode(docs_tok.encode(s, disallowed_special=()), errors="strict") == s


@settings(max_examples=50, deadline=None)
@given(s=st.text(max_size=300), extra=st.integers(0, 60))
def test_round_trip_tokenizer_trained_on_random_text(s, extra):
    tok = BPETokenizer().train(s, 256 + extra)
    assert tok.decode(tok.encode(s), errors="strict") == s


def test_huge_text_is_split_lazily_with_the_same_result(docs_tok, monkeypatch):
    from plast.data.tokenizers import bpe

    text = python_docs()[:50000]
    expected = docs_tok.encode(text)
    expected_merges = BPETokenizer().train(text, 400).merges
    monkeypatch.setattr(bpe, "_STREAM_CHARS", 1000)
    docs_tok._cache.clear()
    assert not isinstance(bpe.split_text(text, docs_tok._compiled), list)
    assert docs_tok.encode(text) == expected
    assert BPETokenizer().train(text, 400).merges == expected_merges


def test_pattern_with_gaps_still_round_trips():
    tok = BPETokenizer().train("ab cd ab cd !!", 270, pattern=r"\p{L}+")
    s = "ab  cd?! ab"
    assert tok.decode(tok.encode(s)) == s


def test_lone_surrogate_raises_clearly(docs_tok):
    with pytest.raises(UnicodeEncodeError, match="lone surrogate") as info:
        docs_tok.encode("abc \ud800 def")
    assert info.value.start == 4
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match="lone surrogate"):
        BPETokenizer().train("x\udfffy", 300)


def test_split_patterns():
    assert regex.findall(GPT4_SPLIT_PATTERN, "Hello world's 1234567") == [
        "Hello",
        " world",
        "'s",
        " ",
        "123",
        "456",
        "7",
    ]
    assert regex.findall(GPT2_SPLIT_PATTERN, "Hello world's 1234567") == ["Hello", " world", "'s", " 1234567"]


# ----- special tokens -----------------------------------------------------------------------------------------
def test_special_tokens_like_tiktoken(docs_tok):
    s = f"a{EOT}b"
    eot = docs_tok.special_tokens[EOT]
    with pytest.raises(ValueError, match="disallowed"):
        docs_tok.encode(s)
    assert docs_tok.encode(s, allowed_special="all") == docs_tok.encode("a") + [eot] + docs_tok.encode("b")
    assert docs_tok.encode(s, allowed_special={EOT}) == docs_tok.encode(s, allowed_special="all")
    as_text = docs_tok.encode(s, disallowed_special=())
    assert eot not in as_text
    assert as_text == docs_tok.encode_ordinary(s)
    assert docs_tok.decode(as_text) == s
    assert docs_tok.decode([eot]) == EOT
    with pytest.raises(ValueError, match="not special tokens"):
        docs_tok.encode("a", allowed_special={"<|nope|>"})
    with pytest.raises(TypeError):
        docs_tok.encode("a", allowed_special="<|endoftext|>")


def test_longest_special_token_wins():
    tok = BPETokenizer(special_tokens=["<a>", "<a><b>"])
    assert tok.special_tokens == {"<a>": 256, "<a><b>": 257}
    assert tok.encode("<a><b><a>", allowed_special="all") == [257, 256]
    assert tok.encode("<a><b>", allowed_special={"<a>"}, disallowed_special=()) == [256, *b"<b>"]


def test_encode_batch(docs_tok):
    texts = ["hello", f"x{EOT}", ""]
    assert docs_tok.encode_batch(texts, allowed_special="all") == [
        docs_tok.encode(t, allowed_special="all") for t in texts
    ]
    with pytest.raises(TypeError):
        docs_tok.encode_batch("hello")
    with pytest.raises(TypeError):
        docs_tok.encode(b"hello")


# ----- decode -------------------------------------------------------------------------------------------------
def test_decode_errors_modes():
    tok = BPETokenizer()
    bad = [0xE2, 0x82]  # a truncated 3-byte UTF-8 sequence
    with pytest.raises(UnicodeDecodeError):
        tok.decode(bad, errors="strict")
    assert tok.decode(bad) == "\ufffd"  # "replace" is the default
    assert tok.decode([104, *bad, 105], errors="ignore") == "hi"
    assert tok.decode(bad, errors="backslashreplace") == "\\xe2\\x82"
    assert tok.decode(bad, errors="surrogateescape") == "\udce2\udc82"
    assert tok.decode_bytes(bad) == b"\xe2\x82"
    with pytest.raises(LookupError):
        tok.decode([104], errors="no-such-handler")


def test_decode_bad_ids(docs_tok):
    with pytest.raises(IndexError, match="1024 at position 1"):
        docs_tok.decode([1, 1024])
    with pytest.raises(IndexError, match="-1"):
        docs_tok.decode([-1])
    with pytest.raises(TypeError, match="integers"):
        docs_tok.decode([1, "a"])
    with pytest.raises(TypeError):
        docs_tok.decode("abc")
    ids = docs_tok.encode("numpy ids")
    assert docs_tok.decode(np.array(ids, dtype=np.int64)) == "numpy ids"
    assert docs_tok.decode_batch(np.array([ids, ids])) == ["numpy ids"] * 2
    assert docs_tok.decode([]) == ""


# ----- save / load --------------------------------------------------------------------------------------------
def test_save_load_round_trip(docs_tok, tmp_path):
    path = tmp_path / "docs.tok"
    docs_tok.save(path)
    assert os.listdir(tmp_path) == ["docs.tok"]  # the temp file was renamed into place
    text = path.read_bytes().decode("ascii")
    assert text.startswith("plast-tokenizer 1\nkind bpe\npattern ")
    assert text.endswith("\nend\n")
    loaded = BPETokenizer.load(path)
    assert isinstance(loaded, BPETokenizer)
    assert loaded.merges == docs_tok.merges
    assert loaded.pattern == docs_tok.pattern
    assert loaded.special_tokens == docs_tok.special_tokens
    sample = python_docs()[:20000] + EOT + "日本 👍🏽"
    assert loaded.encode(sample, allowed_special="all") == docs_tok.encode(sample, allowed_special="all")
    assert type(load(path)) is BPETokenizer
    docs_tok.save(path)  # overwriting is atomic too
    assert BPETokenizer.load(path).merges == docs_tok.merges


def test_load_wrong_kind(tmp_path):
    CharTokenizer().train("abc").save(tmp_path / "c.tok")
    BPETokenizer().save(tmp_path / "b.tok")
    with pytest.raises(ValueError, match="CharTokenizer.load"):
        BPETokenizer.load(tmp_path / "c.tok")
    with pytest.raises(ValueError, match="BPETokenizer.load"):
        CharTokenizer.load(tmp_path / "b.tok")
    assert isinstance(Tokenizer.load(tmp_path / "c.tok"), CharTokenizer)


GOOD = 'plast-tokenizer 1\nkind bpe\npattern "\\\\S+|\\\\s+"\nmerges 2\n97 98\n256 99\nspecial 1\n"<eos>" 258\nend\n'


def test_good_model_file_loads(tmp_path):
    path = tmp_path / "m.tok"
    path.write_text(GOOD)
    tok = BPETokenizer.load(path)
    assert tok.merges == [(97, 98), (256, 99)]
    assert tok.pattern == r"\S+|\s+"
    assert tok.encode("abc abd<eos>", allowed_special="all") == [257, 32, 256, 100, 258]
    path.write_bytes(GOOD.replace("\n", "\r\n").encode())  # a checkout that converted line endings
    assert BPETokenizer.load(path).merges == tok.merges


CORRUPT = {
    "empty file": "",
    "wrong magic": GOOD.replace("plast-tokenizer 1", "minbpe v1"),
    "wrong version": GOOD.replace("plast-tokenizer 1", "plast-tokenizer 2"),
    "unknown kind": GOOD.replace("kind bpe", "kind wordpiece"),
    "missing kind": GOOD.replace("kind bpe\n", ""),
    "pattern not JSON": GOOD.replace('"\\\\S+|\\\\s+"', "\\S+|\\s+"),
    "pattern not a string": GOOD.replace('"\\\\S+|\\\\s+"', "[1]"),
    "pattern does not compile": GOOD.replace('"\\\\S+|\\\\s+"', '"(abc"'),
    "merge count not a number": GOOD.replace("merges 2", "merges two"),
    "merge line with one id": GOOD.replace("256 99", "256"),
    "merge line with three ids": GOOD.replace("256 99", "256 99 1"),
    "merge line not numbers": GOOD.replace("256 99", "256 x"),
    "merge with negative id": GOOD.replace("256 99", "-1 99"),
    "merge references a later id": GOOD.replace("97 98", "256 98"),
    "merge references its own id": GOOD.replace("256 99", "257 99"),
    "duplicate merge": GOOD.replace("256 99", "97 98"),
    "more merge lines than counted": GOOD.replace("merges 2", "merges 1"),
    "fewer merge lines than counted": GOOD.replace("merges 2", "merges 3"),
    "special id not the next free id": GOOD.replace('"<eos>" 258', '"<eos>" 300'),
    "special not JSON": GOOD.replace('"<eos>" 258', "<eos> 258"),
    "special empty": GOOD.replace('"<eos>" 258', '"" 258'),
    "special without id": GOOD.replace('"<eos>" 258', '"<eos>"'),
    "no end line": GOOD.replace("end\n", ""),
    "text after end": GOOD + "97 98\n",
    "not ASCII": GOOD.replace("<eos>", "<é>"),
    "stray carriage return": GOOD.replace("97 98", "97\r98"),
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_corrupt_file_raises_value_error(tmp_path, name):
    path = tmp_path / "bad.tok"
    path.write_bytes(CORRUPT[name].encode("utf-8"))
    with pytest.raises(ValueError, match="bad.tok"):
        BPETokenizer.load(path)


def test_every_truncation_raises_value_error(tmp_path):
    path = tmp_path / "cut.tok"
    BPETokenizer().train("the cat sat on the mat, the end", 280, special_tokens=[EOT]).save(path)
    full = path.read_bytes()
    for n in range(len(full) - 1):  # all but the final newline matter
        path.write_bytes(full[:n])
        with pytest.raises(ValueError):
            BPETokenizer.load(path)


def test_corrupt_char_files(tmp_path):
    path = tmp_path / "c.tok"
    for body in [
        'plast-tokenizer 1\nkind char\nchars 2\n"a"\n"bc"\nspecial 0\nend\n',
        'plast-tokenizer 1\nkind char\nchars 2\n"a"\n"a"\nspecial 0\nend\n',
        'plast-tokenizer 1\nkind char\nchars 2\n"a"\nspecial 0\nend\n',
    ]:
        path.write_text(body)
        with pytest.raises(ValueError, match="c.tok"):
            CharTokenizer.load(path)


# ----- CharTokenizer ------------------------------------------------------------------------------------------
def test_char_tokenizer(tmp_path):
    tok = CharTokenizer().train("hello world", special_tokens=["<eos>"])
    assert tok.chars == sorted(set("hello world"))
    assert tok.vocab_size == len(set("hello world")) + 1
    ids = tok.encode("hold<eos>", allowed_special="all")
    assert ids[-1] == tok.special_tokens["<eos>"] == tok.vocab_size - 1
    assert tok.decode(ids) == "hold<eos>"
    with pytest.raises(ValueError, match="'z'.*index 2"):
        tok.encode("hoz")
    with pytest.raises(ValueError, match="disallowed"):
        tok.encode("<eos>")
    with pytest.raises(IndexError):
        tok.decode([tok.vocab_size])
    path = tmp_path / "char.tok"
    tok.save(path)
    loaded = CharTokenizer.load(path)
    assert loaded.chars == tok.chars and loaded.special_tokens == tok.special_tokens
    assert loaded.encode("hold<eos>", allowed_special="all") == ids


@settings(max_examples=100, deadline=None)
@given(s=st.text(st.characters(), max_size=50))
def test_char_tokenizer_round_trip(s):
    tok = CharTokenizer().train(s)
    assert tok.decode(tok.encode(s)) == s


def test_char_tokenizer_keeps_surrogates(tmp_path):
    s = 'a\ud800b\n"\\'
    tok = CharTokenizer().train(s)
    tok.save(tmp_path / "s.tok")
    loaded = CharTokenizer.load(tmp_path / "s.tok")
    assert loaded.decode(loaded.encode(s)) == s


# ----- hostile files ------------------------------------------------------------------------------------------
HANGING_ENCODE = """
import sys
from plast.data.tokenizers import BPETokenizer
try:
    tok = BPETokenizer.load(sys.argv[1])
except ValueError as e:
    print("refused:", e)
    sys.exit(0)
tok.encode("a" * 40 + "b")  # (a|aa)+$ backtracks for ever on this
print("encoded")
"""


def test_a_file_cannot_bring_its_own_split_pattern(tmp_path):
    path = tmp_path / "evil.tok"
    path.write_text(GOOD.replace('"\\\\S+|\\\\s+"', '"(a|aa)+$"'))
    out = subprocess.run(
        [sys.executable, "-c", HANGING_ENCODE, str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused:") and "evil.tok line 3" in out.stdout
    assert "not a known pattern" in out.stdout and "register_split_pattern" in out.stdout
    # a pattern the code trusts, registered, loads; so do the built-in ones
    register_split_pattern("test-dangerous-but-trusted", "(a|aa)+$")
    assert BPETokenizer.load(path).pattern == "(a|aa)+$"
    assert {"gpt2", "gpt4", "test-dangerous-but-trusted"} <= set(known_split_patterns())
    for pattern in (GPT2_SPLIT_PATTERN, GPT4_SPLIT_PATTERN):
        BPETokenizer(pattern=pattern).save(tmp_path / "ok.tok")
        assert load(tmp_path / "ok.tok").pattern == pattern
    with pytest.raises(ValueError, match="already registered with another pattern"):
        register_split_pattern("gpt4", ONE_CHUNK)
    with pytest.raises(ValueError, match="invalid split pattern"):
        register_split_pattern("broken", "(")


DOUBLING = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a bare MemoryError rather than the OOM killer
from plast.data.tokenizers import load
try:
    load(sys.argv[1])
except ValueError as e:
    print("refused:", e)
"""


def test_merges_that_double_token_length_are_bounded(tmp_path):
    merges = ["97 97"] + [f"{256 + i} {256 + i}" for i in range(44)]  # token 256 + k has 2**(k + 1) bytes
    body = f"plast-tokenizer 1\nkind bpe\npattern {json.dumps(GPT4_SPLIT_PATTERN)}\n"
    body += f"merges {len(merges)}\n" + "\n".join(merges) + "\nspecial 0\nend\n"
    path = tmp_path / "doubling.tok"
    path.write_text(body)
    out = subprocess.run(
        [sys.executable, "-c", DOUBLING, str(path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("refused:") and "doubling.tok" in out.stdout and "MiB" in out.stdout
    with pytest.raises(ValueError, match="more than 256 MiB"):  # the same bound from code
        BPETokenizer(merges=[(97, 97)] + [(256 + i, 256 + i) for i in range(44)])
    ok = BPETokenizer(merges=[(97, 97)] + [(256 + i, 256 + i) for i in range(19)])  # a 1 MiB token is fine
    assert len(ok.token_bytes(ok.vocab_size - 1)) == 1 << 20


HOSTILE = {
    "deeply nested pattern": GOOD.replace('"\\\\S+|\\\\s+"', "[" * 100000 + "]" * 100000),
    "deeply nested special": GOOD.replace('"<eos>" 258', "[" * 100000 + " 258"),
    "a 5000-digit merge count": GOOD.replace("merges 2", "merges " + "9" * 5000),
    "a 5000-digit merge id": GOOD.replace("256 99", "256 " + "9" * 5000),
    "a 5000-digit special id": GOOD.replace('"<eos>" 258', '"<eos>" ' + "9" * 5000),
    "a huge merge count": GOOD.replace("merges 2", "merges 999999999999"),
    "a surrogate special": GOOD.replace('"<eos>"', '"\\ud800"'),
    "unknown pattern": GOOD.replace('"\\\\S+|\\\\s+"', '"\\\\w+"'),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_file_raises_value_error_naming_it(tmp_path, name):
    path = tmp_path / "hostile.tok"
    path.write_text(HOSTILE[name])
    with pytest.raises(ValueError, match="hostile.tok"):
        load(path)


def test_only_regular_files_are_read(tmp_path):
    fifo = tmp_path / "fifo.tok"
    os.mkfifo(fifo)  # opening it for reading would block until a writer came
    with pytest.raises(ValueError, match="fifo.tok: not a plast tokenizer file \\(not a regular file"):
        load(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        load("/dev/zero")  # would read for ever
    with pytest.raises(ValueError, match="not a regular file"):
        load(tmp_path)
    with pytest.raises(FileNotFoundError, match="missing.tok"):
        load(tmp_path / "missing.tok")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(GOOD) - 1), st.sampled_from(list('0123456789 "\\[]{}\n-eabx\x00\xff'))),
        min_size=1,
        max_size=6,
    ),
    cut=st.booleans(),
)
def test_any_damaged_file_is_a_value_error_naming_it(tmp_path, edits, cut):
    data = bytearray(GOOD.encode())
    for pos, ch in edits:
        data[pos] = ord(ch)
    if cut:
        data = data[: edits[0][0]]
    path = tmp_path / "fuzz.tok"
    path.write_bytes(bytes(data))
    try:
        tok = load(path)
    except ValueError as e:
        assert "fuzz.tok" in str(e)
    else:
        assert isinstance(tok.decode(list(range(tok.vocab_size))), str)  # a file that still loads works
