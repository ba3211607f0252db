"""Benchmark plast.data's BPE tokenizer on the built-in corpus (``plast.data.corpora.python_docs()``).

Measures training time to vocab 1024 and 4096, encode throughput (cold: empty chunk cache, warm: second pass)
and decode throughput. If tiktoken is importable, it encodes the same text with the same vocabulary (plast's
4096 merges handed to ``tiktoken.Encoding``; nothing is downloaded) so the speeds compare side by side.
Single-threaded throughout. Timings are medians of ``--repeat`` runs.

    python bench/bench_tokenizer.py
    python bench/bench_tokenizer.py --repeat 5 --json bench/results/tokenizer.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

from plast.data.corpora import python_docs
from plast.data.tokenizers import GPT4_SPLIT_PATTERN, BPETokenizer


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def tiktoken_twin(tok: BPETokenizer):
    """A tiktoken Encoding with plast's vocabulary, or None (with the reason) when tiktoken is missing."""
    try:
        import tiktoken
    except ImportError:
        return None, "tiktoken is not installed"
    ranks: dict[bytes, int] = {}
    for i, b in sorted(tok.vocab.items()):
        if i < 256 + len(tok.merges):
            ranks.setdefault(
                b, i
            )  # NOTE: tiktoken keys ranks by bytes; a repeated byte string keeps its first id
    enc = tiktoken.Encoding(
        name="plast-bench", pat_str=GPT4_SPLIT_PATTERN, mergeable_ranks=ranks, special_tokens={}
    )
    return enc, f"tiktoken {tiktoken.__version__}"


def hf_train_seconds(text: str, vocab: int, repeat: int):
    """Seconds Hugging Face `tokenizers` takes to train a byte-level BPE of `vocab` on `text` (a benchmark peer
    only, never a dependency), or the reason it can't be measured."""
    try:
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    except ImportError as e:
        return f"tokenizers is not installed ({e})"

    def train():
        t = Tokenizer(models.BPE())
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tr = trainers.BpeTrainer(
            vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
        )
        t.train_from_iterator([text], trainer=tr)

    return median_time(train, repeat)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    args = ap.parse_args(argv)

    text = python_docs()
    nbytes = len(text.encode("utf-8"))
    mb = nbytes / 1e6
    res: dict = {
        "corpus": "python_docs",
        "corpus_bytes": nbytes,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "repeat": args.repeat,
        "train_s": {},
    }
    print(f"corpus python_docs(): {nbytes:,} bytes (Python {res['python']})")

    tok = None
    for vocab in (512, 1024, 4096):
        t = median_time(lambda v=vocab: BPETokenizer().train(text, v), args.repeat)
        res["train_s"][str(vocab)] = t
        n_tok = len(BPETokenizer().train(text, vocab).encode(text))
        res.setdefault("tokens_per_byte", {})[str(vocab)] = n_tok / nbytes
        print(f"train to vocab {vocab:5d}: {t:8.3f} s   {n_tok / nbytes:.3f} tokens/byte")
    hf = hf_train_seconds(text, 4096, args.repeat)
    res["hf_tokenizers_train_s"] = hf
    if isinstance(hf, float):
        ratio = res["train_s"]["4096"] / hf
        res["train_ratio_to_hf"] = ratio
        print(f"Hugging Face tokenizers' BPE trainer, vocab 4096: {hf:.3f} s -> plast/HF {ratio:.2f}x")
    else:
        print(f"(no Hugging Face tokenizers comparison: {hf})")
    tok = BPETokenizer().train(text, 4096)

    def cold():
        tok._cache.clear()
        tok.encode(text)

    t_cold = median_time(cold, args.repeat)
    ids = tok.encode(text)
    t_warm = median_time(lambda: tok.encode(text), args.repeat)
    t_dec = median_time(lambda: tok.decode(ids), args.repeat)
    res.update(
        vocab=4096,
        tokens=len(ids),
        bytes_per_token=nbytes / len(ids),
        encode_cold_mb_s=mb / t_cold,
        encode_warm_mb_s=mb / t_warm,
        decode_mb_s=mb / t_dec,
    )
    print(f"vocab 4096: {len(ids):,} tokens, {nbytes / len(ids):.2f} bytes/token")
    print(f"{'':24s}{'plast':>12s}", end="")

    enc, why = tiktoken_twin(tok)
    res["tiktoken"] = why
    if enc is None:
        print(f"\n(no side-by-side: {why})")
        rows = [
            ("encode, cold cache", mb / t_cold),
            ("encode, warm cache", mb / t_warm),
            ("decode", mb / t_dec),
        ]
        for name, v in rows:
            print(f"{name:24s}{v:9.2f} MB/s")
    else:
        tk_ids = enc.encode_ordinary(text)
        t_tk = median_time(lambda: enc.encode_ordinary(text), args.repeat)
        t_tk_dec = median_time(lambda: enc.decode(tk_ids), args.repeat)
        same = sum(a == b for a, b in zip(ids, tk_ids)) / max(len(ids), len(tk_ids))
        res.update(
            tiktoken_encode_mb_s=mb / t_tk,
            tiktoken_decode_mb_s=mb / t_tk_dec,
            tiktoken_tokens=len(tk_ids),
            tiktoken_same_ids_fraction=same,
        )
        print(f"{'tiktoken':>12s}{'plast/tiktoken':>16s}")
        rows = [
            ("encode, cold cache", mb / t_cold, mb / t_tk),
            ("encode, warm cache", mb / t_warm, mb / t_tk),
            ("decode", mb / t_dec, mb / t_tk_dec),
        ]
        for name, p, k in rows:
            print(f"{name:24s}{p:7.2f} MB/s{k:7.2f} MB/s{p / k:15.2f}x")
        print(f"({why}, same vocabulary; {same:.1%} of ids identical, {len(tk_ids):,} tokens)")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
