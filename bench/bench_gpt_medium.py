"""The gpt_medium workload (../shared/bench/workloads.json: 4 layers, 8 heads, n_embd 512, block 256, batch 4,
vocab 1024, AdamW) in float32 and under bfloat16 autocast, plast and torch side by side in one run.

    python bench/bench_gpt_medium.py                 # 1 and 2 threads
    python bench/bench_gpt_medium.py --threads 1 --steps 5

torch runs the shared anchor (../shared/bench/anchors_torch.py, ``bench_train("gpt_medium", ...)``: nanoGPT's
model with scaled_dot_product_attention; autocast around forward and loss). plast runs plast.nn.GPT with the same
configuration and optimizer, eager and under @plast.jit, with ``plast.autocast("cpu")`` around forward and loss.
Reported: median ms per step and the ratios plast/torch in each precision, and plast fp32/bf16. torch is a
bench-only dependency (pip install torch==2.13.0).
"""

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "bench"


def plast_steps(spec, threads, bf16, jit, warmup, steps):
    import numpy as np

    import plast
    from plast import nn

    plast.set_num_threads(threads)
    plast.manual_seed(spec["common"]["seed"] if "common" in spec else 0)
    w = spec["gpt_medium"]
    cfg = nn.GPTConfig(
        block_size=w["block_size"],
        vocab_size=w["vocab_size"],
        n_layer=w["n_layer"],
        n_head=w["n_head"],
        n_embd=w["n_embd"],
        dropout=w["dropout"],
        bias=w["bias"],
        gelu_approximate="tanh",
    )
    model = nn.GPT(cfg)
    o = w["optim"]
    opt = plast.optim.AdamW(
        model.parameters(), lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], weight_decay=o["weight_decay"]
    )
    rng = np.random.default_rng(0)
    x, y = (plast.tensor(rng.integers(0, w["vocab_size"], (w["batch"], w["block_size"]))) for _ in range(2))

    def step(x, y):
        opt.zero_grad()
        with plast.autocast("cpu", enabled=bf16):
            _, loss = model(x, y)
        loss.backward()
        opt.step()
        return loss

    run = plast.jit(step) if jit else step
    ts = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        loss = run(x, y).item()
        plast.reset_transient_arenas()
        if i >= warmup:
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), loss


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--steps", type=int, default=None, help="timed steps (default: the workload's)")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args()
    if not (SHARED / "anchors_torch.py").is_file():
        sys.exit(f"bench_gpt_medium: the torch anchor {SHARED / 'anchors_torch.py'} is missing")
    sys.path.insert(0, str(SHARED))
    import anchors_torch
    import torch

    spec = anchors_torch.WORKLOADS
    w = spec["gpt_medium"]
    warmup, steps = w.get("warmup", 3), args.steps or w.get("steps", 10)
    rows = []
    for nt in args.threads:
        torch.set_num_threads(nt)
        for bf16 in (False, True):
            w["steps"] = steps
            t = anchors_torch.bench_train("gpt_medium", nt, bf16=bf16)
            row = {
                "threads": nt,
                "precision": "bf16" if bf16 else "fp32",
                "torch_ms": t["ms_per_step"]["median"],
            }
            row["torch_loss"] = t["final_loss"]
            for jit in (False, True):
                ms, loss = plast_steps(spec, nt, bf16, jit, warmup, steps)
                row["plast_jit_ms" if jit else "plast_ms"] = ms
                row["plast_loss"] = loss
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"gpt_medium, {platform.processor() or platform.machine()}; median ms per step ({steps} steps)")
    head = f"{'thr':>3} {'precision':>9} {'torch':>8} {'plast':>8} {'plast.jit':>9} {'eager/torch':>11} {'jit/torch':>9}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['threads']:>3} {r['precision']:>9} {r['torch_ms']:8.1f} {r['plast_ms']:8.1f} {r['plast_jit_ms']:9.1f} "
            f"{r['plast_ms'] / r['torch_ms']:11.2f} {r['plast_jit_ms'] / r['torch_ms']:9.2f}"
        )
    for nt in args.threads:
        f, b = (next(r for r in rows if r["threads"] == nt and r["precision"] == p) for p in ("fp32", "bf16"))
        print(
            f"{nt} thread(s): plast bf16 is {f['plast_jit_ms'] / b['plast_jit_ms']:.2f}x faster than plast fp32 "
            f"(jit); torch bf16 {f['torch_ms'] / b['torch_ms']:.2f}x faster than torch fp32"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"bench": "gpt_medium", "results": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
