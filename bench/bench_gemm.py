"""GEMM throughput: plast's CPU kernel against numpy's BLAS (``a @ b``), in one run, 1 and 2 threads.

    python bench/bench_gemm.py                 # float32, 1 and 2 threads, table on stdout
    python bench/bench_gemm.py --json out.json --dtype float64 --threads 1

Columns, in GFLOP/s (2*M*N*K / seconds, median of several repetitions):
  plast    the C kernel, timed in C around each call (no Python overhead)  -> the kernel's own speed
  best     the fastest single kernel call seen (useful on a shared, noisy machine)
  plast.py plast's Python entry point (_gemm.gemm), timed like numpy      -> what a numpy caller gets
  numpy    np.matmul(a, b, out=c) with its BLAS limited to the same thread count
Each thread count runs in its own child process, because BLAS thread pools are sized when numpy is imported.
"""

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import time

SQUARE = [64, 128, 256, 512, 1024, 2048]
# (M, K, N, trans_b): the xor and mlp workloads' shapes; "nt" is the Linear layer's x @ W.T
SKINNY = [
    (4, 2, 8, False),
    (64, 64, 64, False),
    (128, 784, 512, False),
    (128, 784, 512, True),
    (1024, 128, 384, False),
]
# (batch, M, K, N, trans_b): the gpt workload's attention products, q @ k^T and p @ v for 16 x 4 heads
BATCHED = [(64, 64, 32, 64, True), (64, 64, 64, 32, False)]


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _loop(fn, reps, rounds):
    """Median seconds per call of fn() over `rounds` timed loops of `reps` calls."""
    fn()  # warm-up: packing buffers, thread pool, caches
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t) / reps)
    return _median(out)


def _child(args):
    import numpy as np

    from plast.kernels.cpu import _gemm, _runtime

    threads = args.child
    _runtime.set_num_threads(threads)
    if args.simd:
        _runtime.set_simd(args.simd)
    dtype = np.dtype(args.dtype)
    rng = np.random.default_rng(0)
    shapes = [(1, n, n, n, False) for n in (SQUARE if not args.quick else [64, 256, 1024])]
    shapes += [(1,) + s for s in SKINNY] + BATCHED
    rows = []
    for bs, m, k, n, tb in shapes:
        lead = (bs,) if bs > 1 else ()
        a = rng.uniform(-1, 1, lead + (m, k)).astype(dtype)
        if tb:
            b = np.swapaxes(rng.uniform(-1, 1, lead + (n, k)).astype(dtype), -1, -2)
        else:
            b = rng.uniform(-1, 1, lead + (k, n)).astype(dtype)
        c = np.empty(lead + (m, n), dtype)
        flops = 2.0 * bs * m * n * k
        plast_fn = _gemm.bmm if bs > 1 else _gemm.gemm
        # calls per repetition: about args.budget seconds per measured series at ~100 GFLOP/s
        reps = int(max(1, min(20000, args.budget * 1e11 / flops / args.rounds)))

        _gemm._time_calls(a, b, c, reps=2, batched=bs > 1)
        per_round = [_gemm._time_calls(a, b, c, reps=reps, batched=bs > 1) for _ in range(args.rounds)]
        kern = _median([float(np.median(t)) for t in per_round])
        best = min(float(t.min()) for t in per_round)
        py = _loop(functools.partial(plast_fn, a, b, c), reps, args.rounds)
        ref = _loop(functools.partial(np.matmul, a, b, out=c), reps, args.rounds)
        rows.append(
            {
                "batch": bs,
                "m": m,
                "k": k,
                "n": n,
                "trans_b": tb,
                "threads": threads,
                "dtype": dtype.name,
                "simd": _runtime.get_simd(),
                "plast_s": kern,
                "plast_best_s": best,
                "plast_py_s": py,
                "numpy_s": ref,
                "plast_gflops": flops / kern / 1e9,
                "plast_best_gflops": flops / best / 1e9,
                "plast_py_gflops": flops / py / 1e9,
                "numpy_gflops": flops / ref / 1e9,
            }
        )
    json.dump(rows, sys.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--simd", default=None, help="force a SIMD path (scalar, avx2, avx512)")
    p.add_argument("--rounds", type=int, default=5, help="repetitions per measurement (median is reported)")
    p.add_argument("--budget", type=float, default=0.15, help="seconds per measured series (approx.)")
    p.add_argument("--quick", action="store_true", help="fewer square sizes")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return _child(args)

    rows = []
    for t in args.threads:
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(t)
        cmd = (
            [
                sys.executable,
                __file__,
                "--child",
                str(t),
                "--dtype",
                args.dtype,
                "--rounds",
                str(args.rounds),
                "--budget",
                str(args.budget),
            ]
            + (["--simd", args.simd] if args.simd else [])
            + (["--quick"] if args.quick else [])
        )
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if res.returncode:
            sys.stderr.write(res.stderr)
            sys.exit(res.returncode)
        rows += json.loads(res.stdout)

    print(
        f"GEMM {args.dtype}, {platform.processor() or platform.machine()}, simd={rows[0]['simd']}; GFLOP/s, "
        f"median of {args.rounds}"
    )
    head = f"{'[B*] M x K x N':>20} {'thr':>3} {'plast':>8} {'best':>6} {'plast.py':>8} {'numpy':>8} {'plast/np':>8} {'py/np':>6}"
    print(head)
    print("-" * len(head))
    for r in rows:
        shape = (f"{r['batch']}*" if r["batch"] > 1 else "") + f"{r['m']}x{r['k']}x{r['n']}"
        shape += "^T" if r["trans_b"] else ""
        print(
            f"{shape:>20} {r['threads']:>3} {r['plast_gflops']:8.1f} {r['plast_best_gflops']:6.1f} "
            f"{r['plast_py_gflops']:8.1f} "
            f"{r['numpy_gflops']:8.1f} {r['plast_gflops'] / r['numpy_gflops']:8.2f} "
            f"{r['plast_py_gflops'] / r['numpy_gflops']:6.2f}"
        )
    print("(^T: b is a transposed view, as in the Linear layer's x @ W.T; B*: batched, as in attention)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "gemm", "dtype": args.dtype, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
