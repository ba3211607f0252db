"""16-bit GEMM throughput: plast's bf16/f16 kernel against torch's bf16/f16 matmul, in one run, 1 and 2 threads.

    python bench/bench_gemm16.py                        # bfloat16 on plast's best path, 1 and 2 threads
    python bench/bench_gemm16.py --path avx512_bf16     # force a path (amx, avx512_bf16, avx512, avx2, scalar)
    python bench/bench_gemm16.py --dtype float16 --json out.json

Columns, in GFLOP/s (2*M*N*K / seconds, median of several repetitions):
  plast     the C kernel, timed in C around each call (no Python overhead); 16-bit operands, float32 out
  plast16   the same with a 16-bit result (out16: rounded once after the epilogue), as torch's bf16 matmul
  torch     torch.matmul(a, b, out=c) on bfloat16/float16 tensors (16-bit result; oneDNN/MKL on the CPU),
            with torch.set_num_threads() at the same count
  peak%     plast / the path's peak at the clock given by --ghz (AMX: 1024 bf16 FLOP/cycle/core;
            AVX512-BF16: 2 x 64; widening: 2 x 32 float32 FMA lanes)
Shapes: square 256-2048, and the gpt_medium workload's products (1024 tokens, n_embd 512; ^T: a transposed
operand as in Linear's x @ W.T and its backward). Each thread count runs in its own child process.
torch is a bench-only dependency here (pip install torch==2.13.0).
"""

import argparse
import functools
import json
import os
import platform
import subprocess
import sys

from bench_gemm import _loop, _median  # bench/ is the script's directory

SQUARE = [256, 512, 1024, 2048]
# (M, K, N, trans_a, trans_b): gpt_medium's linear layers (x @ W.T forward; grad_x = g @ W; grad_W = g.T @ x)
MEDIUM = [
    (1024, 512, 1536, False, True),  # qkv
    (1024, 512, 2048, False, True),  # mlp fc
    (1024, 2048, 512, False, True),  # mlp proj
    (1024, 512, 1024, False, True),  # tied head
    (1024, 2048, 512, False, False),  # grad_x of fc
    (2048, 1024, 512, True, False),  # grad_W of fc
]
PEAK_FLOP_PER_CYCLE = {"amx": 1024, "avx512_bf16": 128, "avx512": 64, "avx2": 32, "scalar": 2}


def _child(args):
    import numpy as np
    import torch

    from plast.kernels.cpu import _gemm, _runtime

    threads = args.child
    _runtime.set_num_threads(threads)
    torch.set_num_threads(threads)
    if args.path:
        _runtime.set_simd(args.path)
    tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
    path = _gemm.gemm16_path(args.dtype)
    peak_key = path if path in PEAK_FLOP_PER_CYCLE else path[len("widen (") : -1]
    peak = PEAK_FLOP_PER_CYCLE[peak_key] * args.ghz * 1e9 * threads
    torch.manual_seed(0)

    def operand(t):  # a torch 16-bit tensor -> the array gemm16 takes (the same memory)
        return t.view(torch.int16).numpy().view(np.uint16) if args.dtype == "bfloat16" else t.numpy()

    shapes = [(n, n, n, False, False) for n in SQUARE] + MEDIUM
    rows = []
    for m, k, n, ta, tb in shapes:
        a = torch.randn((k, m) if ta else (m, k)).to(tdt)
        b = torch.randn((n, k) if tb else (k, n)).to(tdt)
        a_op, b_op = (a.T if ta else a), (b.T if tb else b)
        an, bn = operand(a), operand(b)
        an, bn = (an.T if ta else an), (bn.T if tb else bn)
        c32 = np.empty((m, n), np.float32)
        c16 = np.empty((m, n), np.uint16 if args.dtype == "bfloat16" else np.float16)
        tc = torch.empty((m, n), dtype=tdt)
        flops = 2.0 * m * n * k
        reps = int(max(1, min(2000, args.budget * 5e11 / flops / args.rounds)))
        kern = _median(
            [
                float(np.median(_gemm._time_calls(an, bn, c32, reps=reps, dtype=args.dtype)))
                for _ in range(args.rounds)
            ]
        )
        kern16 = _median(
            [
                float(np.median(_gemm._time_calls(an, bn, c16, reps=reps, dtype=args.dtype, out16=True)))
                for _ in range(args.rounds)
            ]
        )
        ref = _loop(functools.partial(torch.matmul, a_op, b_op, out=tc), reps, args.rounds)
        rows.append(
            {
                "m": m, "k": k, "n": n, "trans_a": ta, "trans_b": tb, "threads": threads, "dtype": args.dtype,
                "path": path, "plast_s": kern, "plast16_s": kern16, "torch_s": ref,
                "plast_gflops": flops / kern / 1e9, "plast16_gflops": flops / kern16 / 1e9,
                "torch_gflops": flops / ref / 1e9, "peak_frac": flops / kern / peak,
            }
        )  # fmt: skip
    json.dump(rows, sys.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    p.add_argument("--path", default=None, help="force a path: amx, avx512_bf16, avx512, avx2, scalar")
    p.add_argument("--rounds", type=int, default=5, help="repetitions per measurement (median is reported)")
    p.add_argument("--budget", type=float, default=0.2, help="seconds per measured series (approx.)")
    p.add_argument("--ghz", type=float, default=2.6, help="core clock for the peak%% column")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return _child(args)

    rows = []
    for t in args.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(t), MKL_NUM_THREADS=str(t))
        cmd = [
            sys.executable,
            __file__,
            "--child",
            str(t),
            "--dtype",
            args.dtype,
            "--rounds",
            str(args.rounds),
        ]
        cmd += ["--budget", str(args.budget), "--ghz", str(args.ghz)] + (
            ["--path", args.path] if args.path else []
        )
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if res.returncode:
            sys.stderr.write(res.stderr)
            sys.exit(res.returncode)
        rows += json.loads(res.stdout)

    print(f"GEMM {args.dtype}, {platform.processor() or platform.machine()}, path={rows[0]['path']}; GFLOP/s, "
          f"median of {args.rounds}")  # fmt: skip
    head = f"{'M x K x N':>22} {'thr':>3} {'plast':>8} {'plast16':>8} {'torch':>8} {'plast16/torch':>13} {'peak%':>6}"
    print(head)
    print("-" * len(head))
    for r in rows:
        shape = (
            f"{r['m']}x{r['k']}x{r['n']}" + (" aT" if r["trans_a"] else "") + (" bT" if r["trans_b"] else "")
        )
        print(
            f"{shape:>22} {r['threads']:>3} {r['plast_gflops']:8.1f} {r['plast16_gflops']:8.1f} "
            f"{r['torch_gflops']:8.1f} {r['plast16_gflops'] / r['torch_gflops']:13.2f} {100 * r['peak_frac']:5.1f}%"
        )
    print(
        "(aT / bT: that operand is a transposed view, as in Linear's forward (bT) and its weight gradient (aT))"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "gemm16", "dtype": args.dtype, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
