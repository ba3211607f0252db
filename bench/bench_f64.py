"""float64 kernel microbenchmarks: plast's C kernels (through _fast) next to the numpy code they replaced for
float64 and PyTorch, on 1M-element operands.

    python bench/bench_f64.py                   # 1 and 2 threads, table on stdout
    python bench/bench_f64.py --threads 1 --reps 30 --json out.json

Columns: plast (the C kernel's _fast entry with dtype F64, no engine), numpy (the expression the kernel ran for
float64 before: kernels.sum_'s np.sum, kernels_nn's numpy softmax / layer_norm), torch (the same op, out= where
it has one). Microseconds per call, medians of --reps runs.
"""

# ruff: noqa: B023
# NOTE: every lambda below is timed (called) inside the loop iteration that made it, so late binding is moot.

import argparse
import json

import numpy as np
import torch
from timing import address as _a
from timing import median_time as timeit

from plast.kernels.cpu import _fast, _runtime

F64 = _fast.F64


def _np_softmax(x, out):
    """kernels_nn's numpy softmax (the float64 path before the C kernel took it)."""
    m = np.max(x, axis=-1, keepdims=True)
    np.subtract(x, m, out=out)
    np.exp(out, out=out)
    s = np.sum(out, axis=-1, keepdims=True)
    np.divide(out, s, out=out)


def _np_log_softmax(x, out):
    """kernels_nn's numpy log_softmax."""
    m = np.max(x, axis=-1, keepdims=True)
    np.subtract(x, m, out=out)
    s = np.sum(np.exp(out), axis=-1, keepdims=True)
    out -= np.log(s)


def _np_layer_norm(x, w, b, eps, y):
    """kernels_nn's numpy layer_norm forward."""
    mean = x.mean(1, keepdims=True, dtype=x.dtype)
    xc = x - mean
    var = np.mean(xc * xc, axis=1, keepdims=True, dtype=x.dtype)
    rstd = 1.0 / np.sqrt(var + eps)
    y[...] = xc * rstd * w + b
    return mean, rstd


def cases(rows, n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, n))
    flat = x.reshape(-1)
    y = np.empty_like(x)
    w, b = rng.standard_normal(n), rng.standard_normal(n)
    mean, rstd = np.empty(rows), np.empty(rows)
    out_rows, out1 = np.empty(rows), np.empty(1)
    tx, ty, tflat = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(flat)
    tw, tb = torch.from_numpy(w), torch.from_numpy(b)
    t_rows, t1 = torch.from_numpy(out_rows), torch.from_numpy(out1.reshape(()))
    st = (n, 1, 1)
    size = rows * n
    return [
        (
            f"sum all ({size})",
            lambda: _fast.reduce3d(_fast.RD_SUM, 1, size, 1, _a(flat), (0, 1, 1), _a(out1), F64),
            lambda: np.sum(flat),
            lambda: torch.sum(tflat, 0, out=t1),
        ),
        (
            f"sum rows ({rows}x{n})",
            lambda: _fast.reduce3d(_fast.RD_SUM, rows, n, 1, _a(x), st, _a(out_rows), F64),
            lambda: np.sum(x, axis=1),
            lambda: torch.sum(tx, 1, out=t_rows),
        ),
        (
            f"sum dim 0 ({rows}x{n})",
            lambda: _fast.reduce3d(_fast.RD_SUM, 1, rows, n, _a(x), (0, n, 1), _a(y), F64),
            lambda: np.sum(x, axis=0),
            lambda: torch.sum(tx, 0),
        ),
        (
            f"amax rows ({rows}x{n})",
            lambda: _fast.reduce3d(_fast.RD_MAX, rows, n, 1, _a(x), st, _a(out_rows), F64),
            lambda: np.max(x, axis=1),
            lambda: torch.amax(tx, 1),
        ),
        (
            f"softmax ({rows}x{n})",
            lambda: _fast.softmax3d(0, rows, n, 1, _a(x), st, _a(y), st, F64),
            lambda: _np_softmax(x, y),
            lambda: torch.softmax(tx, -1),
        ),
        (
            f"log_softmax ({rows}x{n})",
            lambda: _fast.softmax3d(2, rows, n, 1, _a(x), st, _a(y), st, F64),
            lambda: _np_log_softmax(x, y),
            lambda: torch.log_softmax(tx, -1),
        ),
        (
            f"layer_norm ({rows}x{n})",
            lambda: _fast.layer_norm(rows, n, _a(x), n, _a(w), _a(b), 1e-5, _a(y), _a(mean), _a(rstd), F64),
            lambda: _np_layer_norm(x, w, b, 1e-5, y),
            lambda: torch.nn.functional.layer_norm(tx, (n,), tw, tb, 1e-5),
        ),
        (
            f"exp ({size})",
            lambda: _fast.unary_nd(_fast.UNARY_CODES["exp"], F64, (size,), _a(flat), (1,), _a(y), (1,)),
            lambda: np.exp(flat, out=y.reshape(-1)),
            lambda: torch.exp(tflat, out=ty.reshape(-1)),
        ),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--cols", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    results = []
    print(f"simd {_runtime.get_simd()}, float64, microseconds per call (median of {args.reps})")
    for nt in args.threads:
        _runtime.set_num_threads(nt)
        torch.set_num_threads(nt)
        print(f"\n{nt} thread(s)")
        print(f"{'kernel':<28}{'plast':>10}{'numpy':>10}{'torch':>10}{'vs numpy':>10}{'vs torch':>10}")
        for name, c_fn, np_fn, t_fn in cases(args.rows, args.cols):
            tc, tn, tt = (timeit(f, args.reps) * 1e6 for f in (c_fn, np_fn, t_fn))
            print(f"{name:<28}{tc:>10.0f}{tn:>10.0f}{tt:>10.0f}{tn / tc:>9.1f}x{tt / tc:>9.2f}x")
            results.append(dict(kernel=name, threads=nt, plast_us=tc, numpy_us=tn, torch_us=tt))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
