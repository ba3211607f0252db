"""Optimizer step alone: AdamW over the gpt workload's parameter set, plast against torch.

    python bench/bench_optim.py                 # 1 thread
    python bench/bench_optim.py --threads 2 --reps 300

Rows: torch AdamW with foreach=False (the single-tensor path plast's arithmetic follows), foreach=True and
fused=True; plast.optim.AdamW.step() eager (Python bookkeeping + the fused op), the same step replayed by
@plast.jit (the kernel with its packed table), and the numpy fallback the C kernel replaced (for reference).
Gradients are set once; every row then steps repeatedly, the rows interleaved round by round. Best and median
microseconds per step over the rounds (best is the least disturbed by other processes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

import plast
import plast.optim

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as bench_run  # noqa: E402
import workloads_torch  # noqa: E402


def _measure(rows, reps, rounds):
    """Time every (name, fn, reps_scale) row in interleaved rounds, so load from other processes hits all of them;
    returns (name, best, median) in microseconds per call."""
    for _, fn, _ in rows:
        fn()
        fn()
    per = {name: [] for name, _, _ in rows}
    for _ in range(rounds):
        for name, fn, scale in rows:
            n = max(1, int(reps * scale))
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            per[name].append((time.perf_counter() - t0) / n * 1e6)
    return [(name, min(v), statistics.median(v)) for name, v in per.items()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=40, help="steps per round (fewer for the slow rows)")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    plast.set_num_threads(args.threads)

    spec, _ = bench_run.load_spec()
    c = dict(spec["gpt"], seed=0)
    o = c["optim"]
    torch.manual_seed(0)
    shapes = [tuple(p.shape) for p in workloads_torch.GPT(c).parameters()]
    total = sum(int(np.prod(s)) for s in shapes)
    print(f"gpt parameter set: {len(shapes)} tensors, {total} float32 elements; {args.threads} thread(s)")
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s).astype(np.float32) * 0.02 for s in shapes]
    grads = [rng.standard_normal(s).astype(np.float32) * 1e-3 for s in shapes]
    kw = dict(lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], weight_decay=o["weight_decay"])

    rows = []  # (name, step function, share of --reps)
    for label, extra in (
        ("foreach=False", dict(foreach=False)),
        ("foreach=True", dict(foreach=True)),
        ("fused=True", dict(fused=True)),
    ):
        tp = [torch.nn.Parameter(torch.tensor(a)) for a in init]
        for t, g in zip(tp, grads):
            t.grad = torch.tensor(g)
        opt = torch.optim.AdamW(tp, **kw, **extra)
        rows.append((f"torch AdamW {label}", opt.step, 0.25 if label == "foreach=False" else 1.0))

    def plast_opt():
        pp = [plast.nn.Parameter(plast.tensor(a)) for a in init]
        for p, g in zip(pp, grads):
            p.grad = plast.tensor(g)
        return plast.optim.AdamW(pp, **kw)

    eager = plast_opt()
    rows.append(("plast AdamW.step() eager", eager.step, 1.0))
    traced = plast_opt()
    rows.append(("plast AdamW.step() @plast.jit", plast.jit(lambda: traced.step()), 1.0))

    from plast.kernels.cpu import kernels_optim as K

    numpy_path = types.SimpleNamespace(
        ADAM=K._optim.ADAM, run=lambda kind, node, inputs: tuple(range(node.args[0]))
    )
    before = plast_opt()

    def fallback_step():
        real, K._optim = K._optim, numpy_path
        try:
            before.step()
        finally:
            K._optim = real

    rows.append(("plast eager, numpy fallback (before)", fallback_step, 0.25))
    results = _measure(rows, args.reps, args.rounds)
    width = max(len(r[0]) for r in results)
    print(f"  {'':<{width}}  {'best':>9}  {'median':>9}  us/step")
    for name, best, med in results:
        print(f"  {name:<{width}}  {best:9.1f}  {med:9.1f}")


if __name__ == "__main__":
    main()
