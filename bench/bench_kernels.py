"""Kernel microbenchmarks: plast's vectorized CPU kernels next to PyTorch (and the numpy code they replaced).

    python bench/bench_kernels.py                      # 1 and 2 threads, table on stdout
    python bench/bench_kernels.py --threads 1 --json out.json --size 16777216

Elementwise and reductions run at --size float32 elements (64M by default) and report GB/s of memory traffic
(bytes read + bytes written, so a copy moves 8 bytes per element) and the ratio to this run's copy bandwidth;
NN kernels run at typical sizes (B*T = 1024 rows, 128 features, 65 classes) and report microseconds per call.
Columns: plast (the C kernel through its _fast/_fused/_kernels entry, no engine), numpy (the numpy expression
the kernel used before), torch (the same op in PyTorch, out= where it has one). Medians of several runs.
"""

# ruff: noqa: B023
# NOTE: every lambda below is timed (called) inside the loop iteration that made it, so late binding is moot.

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
from timing import address as _a
from timing import median_time

from plast.kernels.cpu import _fast, _fused, _kernels, _runtime


def timeit(fn, reps, warm=1):
    return median_time(fn, reps, warm)


U = _fast.UNARY_CODES


def unary(op, x, y):
    return lambda: _fast.unary_nd(U[op], 3, x.shape, _a(x), (1,), _a(y), (1,))


def elementwise_rows(n, reps):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    z = rng.standard_normal(n, dtype=np.float32)
    y = np.empty_like(x)
    tx, tz, ty = torch.from_numpy(x), torch.from_numpy(z), torch.from_numpy(y)
    rows = []
    copy_np = timeit(lambda: np.copyto(y, x), reps)
    copy_t = timeit(lambda: ty.copy_(tx), reps)
    copy = max(8 * n / copy_np, 8 * n / copy_t) / 1e9
    rows.append(("copy", 8 * n, None, copy_np, copy_t))
    chain = _fused.assemble(
        [
            ("load", 0, 0),
            ("load", 1, 1),
            ("silu", 2, 0),
            ("mul", 2, 2, 1),
            ("const", 3, 0.5),
            ("add", 2, 2, 3),
            ("store", 0, 2),
        ]
    )
    cases = [
        (
            "add",
            12 * n,
            lambda: _kernels.binary_nd(0, 3, (n,), _a(x), (1,), _a(z), (1,), _a(y), (1,)),
            lambda: np.add(x, z, out=y),
            lambda: torch.add(tx, tz, out=ty),
        ),
        (
            "relu",
            8 * n,
            unary("relu", x, y),
            lambda: np.maximum(x, 0, out=y),
            lambda: torch.clamp_min(tx, 0, out=ty),
        ),
        ("exp", 8 * n, unary("exp", x, y), lambda: np.exp(x, out=y), lambda: torch.exp(tx, out=ty)),
        ("tanh", 8 * n, unary("tanh", x, y), lambda: np.tanh(x, out=y), lambda: torch.tanh(tx, out=ty)),
        (
            "sigmoid",
            8 * n,
            unary("sigmoid", x, y),
            lambda: np.divide(1, 1 + np.exp(-x), out=y),
            lambda: torch.sigmoid(tx, out=ty),
        ),
        (
            "gelu_tanh",
            8 * n,
            unary("gelu_tanh", x, y),
            None,
            lambda: ty.copy_(torch.nn.functional.gelu(tx, approximate="tanh")),
        ),
        ("gelu_erf", 8 * n, unary("gelu_erf", x, y), None, lambda: ty.copy_(torch.nn.functional.gelu(tx))),
        (
            "chain silu(x)*z+.5",
            12 * n,
            lambda: _fused.run_program(chain, [x, z], [y]),
            lambda: np.add(x / (1 + np.exp(-x)) * z, 0.5, out=y),
            lambda: torch.add(torch.nn.functional.silu(tx) * tz, 0.5, out=ty),
        ),
        (
            "sum (all)",
            4 * n,
            lambda: _fast.reduce3d(0, 1, n, 1, _a(x), (0, 1, 1), _a(y)),
            lambda: np.sum(x),
            lambda: torch.sum(tx),
        ),
        (
            "amax (all)",
            4 * n,
            lambda: _fast.reduce3d(1, 1, n, 1, _a(x), (0, 1, 1), _a(y)),
            lambda: np.max(x),
            lambda: torch.amax(tx),
        ),
    ]
    side = int(math.sqrt(n))
    m = side * side
    cases += [
        (
            f"sum rows ({side}x{side})",
            4 * m,
            lambda: _fast.reduce3d(0, side, side, 1, _a(x), (side, 1, 1), _a(y)),
            lambda: np.sum(x[:m].reshape(side, side), 1, out=y[:side]),
            lambda: torch.sum(tx[:m].view(side, side), 1, out=ty[:side]),
        ),
        (
            f"sum cols ({side}x{side})",
            4 * m,
            lambda: _fast.reduce3d(0, 1, side, side, _a(x), (0, side, 1), _a(y)),
            lambda: np.sum(x[:m].reshape(side, side), 0, out=y[:side]),
            lambda: torch.sum(tx[:m].view(side, side), 0, out=ty[:side]),
        ),
    ]
    for name, nbytes, fp, fn, ft in cases:
        rows.append((name, nbytes, timeit(fp, reps), timeit(fn, reps) if fn else None, timeit(ft, reps)))
    return copy, rows


def nn_rows(reps):
    rng = np.random.default_rng(1)
    rows = []
    B, C, K, V = 1024, 128, 65, 65
    for n in (C, K):
        x = rng.standard_normal((B, n), dtype=np.float32)
        y = np.empty_like(x)
        g = rng.standard_normal((B, n), dtype=np.float32)
        gx = np.empty_like(x)
        tx, tg = torch.from_numpy(x), torch.from_numpy(g)

        def np_softmax():
            m = x.max(1, keepdims=True)
            np.subtract(x, m, out=y)
            np.exp(y, out=y)
            np.divide(y, y.sum(1, keepdims=True), out=y)

        rows.append(
            (
                f"softmax ({B}x{n})",
                timeit(lambda: _fast.softmax3d(0, B, n, 1, _a(x), (n, 1, 1), _a(y), (n, 1, 1)), reps),
                timeit(np_softmax, reps),
                timeit(lambda: torch._softmax(tx, 1, False), reps),
            )
        )
        rows.append(
            (
                f"log_softmax ({B}x{n})",
                timeit(lambda: _fast.softmax3d(2, B, n, 1, _a(x), (n, 1, 1), _a(y), (n, 1, 1)), reps),
                timeit(
                    lambda: (
                        x
                        - x.max(1, keepdims=True)
                        - np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True))
                    ),
                    reps,
                ),
                timeit(lambda: torch._log_softmax(tx, 1, False), reps),
            )
        )
        ys = torch.softmax(tx, 1)
        yn = ys.numpy()
        rows.append(
            (
                f"softmax backward ({B}x{n})",
                timeit(
                    lambda: _fast.softmax_bw3d(
                        0, B, n, 1, _a(g), (n, 1, 1), _a(yn), (n, 1, 1), _a(gx), (n, 1, 1)
                    ),
                    reps,
                ),
                timeit(lambda: (g - (g * yn).sum(1, keepdims=True)) * yn, reps),
                timeit(lambda: torch._softmax_backward_data(tg, ys, 1, torch.float32), reps),
            )
        )
    # layer norm (B, C)
    x = rng.standard_normal((B, C), dtype=np.float32)
    w = rng.standard_normal(C, dtype=np.float32)
    b = rng.standard_normal(C, dtype=np.float32)
    y, mean, rstd = np.empty_like(x), np.empty(B, np.float32), np.empty(B, np.float32)
    tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)

    def np_ln():
        mu = x.mean(1, keepdims=True)
        xc = x - mu
        r = 1 / np.sqrt((xc * xc).mean(1, keepdims=True) + 1e-5)
        return xc * r * w + b

    rows.append(
        (
            f"layer_norm ({B}x{C})",
            timeit(
                lambda: _fast.layer_norm(B, C, _a(x), C, _a(w), _a(b), 1e-5, _a(y), _a(mean), _a(rstd)), reps
            ),
            timeit(np_ln, reps),
            timeit(lambda: torch.native_layer_norm(tx, (C,), tw, tb, 1e-5), reps),
        )
    )
    gy = rng.standard_normal((B, C), dtype=np.float32)
    gx, gw, gb = np.empty_like(x), np.empty(C, np.float32), np.empty(C, np.float32)
    _, tm, tr = torch.native_layer_norm(tx, (C,), tw, tb, 1e-5)
    tgy = torch.from_numpy(gy)

    def np_ln_bw():
        mr, rr = mean.reshape(-1, 1), rstd.reshape(-1, 1)
        xhat = (x - mr) * rr
        _ = (gy * xhat).sum(0), gy.sum(0)
        gxh = gy * w
        return rr * (gxh - gxh.mean(1, keepdims=True) - xhat * (gxh * xhat).mean(1, keepdims=True))

    rows.append(
        (
            f"layer_norm backward ({B}x{C})",
            timeit(
                lambda: _fast.layer_norm_bw(
                    B, C, _a(gy), C, _a(x), C, _a(mean), _a(rstd), _a(w), _a(gx), _a(gw), _a(gb)
                ),
                reps,
            ),
            timeit(np_ln_bw, reps),
            timeit(
                lambda: torch.ops.aten.native_layer_norm_backward(
                    tgy, tx, (C,), tm, tr, tw, tb, [True, True, True]
                ),
                reps,
            ),
        )
    )
    # cross-entropy (B, K) with class indices
    x = rng.standard_normal((B, K), dtype=np.float32)
    t = rng.integers(0, K, B)
    out = np.empty((), np.float32)
    gx = np.empty_like(x)
    one = np.ones((), np.float32)
    tx, tt = torch.from_numpy(x), torch.from_numpy(t)

    def np_xent():
        m = x.max(1, keepdims=True)
        z = x - m
        lp = z - np.log(np.exp(z).sum(1, keepdims=True))
        return -lp[np.arange(B), t].mean()

    rows.append(
        (
            f"cross_entropy ({B}x{K})",
            timeit(
                lambda: _fast.cross_entropy(
                    B, K, 1, _a(x), (K, 1, 1), _a(t), True, 0, -100, 0.0, "mean", _a(out)
                ),
                reps,
            ),
            timeit(np_xent, reps),
            timeit(lambda: torch.nn.functional.cross_entropy(tx, tt), reps),
        )
    )

    def torch_xent_bw():
        lp = torch._log_softmax(tx, 1, False)
        gl = torch.ops.aten.nll_loss_backward(torch.ones(()), lp, tt, None, 1, -100, torch.ones(()))
        return torch._log_softmax_backward_data(gl, lp, 1, torch.float32)

    def np_xent_bw():
        m = x.max(1, keepdims=True)
        p = np.exp(x - m)
        p /= p.sum(1, keepdims=True)
        c = np.zeros_like(p)
        c[np.arange(B), t] = 1.0 / B
        return p * c.sum(1, keepdims=True) - c

    rows.append(
        (
            f"cross_entropy backward ({B}x{K})",
            timeit(
                lambda: _fast.cross_entropy_bw(
                    B, K, 1, _a(x), (K, 1, 1), _a(t), True, 0, -100, 0.0, "mean", _a(one), _a(gx), (K, 1, 1)
                ),
                reps,
            ),
            timeit(np_xent_bw, reps),
            timeit(torch_xent_bw, reps),
        )
    )
    # embedding: 1024 ids into a (V, C) table (the gpt workload's token embedding)
    wt = rng.standard_normal((V, C), dtype=np.float32)
    ids = rng.integers(0, V, B)
    out = np.empty((B, C), np.float32)
    g = rng.standard_normal((B, C), dtype=np.float32)
    gw = np.empty((V, C), np.float32)
    twt, tids, tg = torch.from_numpy(wt), torch.from_numpy(ids), torch.from_numpy(g)

    def np_emb_bw():
        gw.fill(0)
        np.add.at(gw, ids, g)

    rows.append(
        (
            f"embedding ({B} ids, {V}x{C})",
            timeit(
                lambda: _fast.embedding(B, _a(ids), True, V, _a(wt), C * 4, C * 4, _a(out), None, False), reps
            ),
            timeit(lambda: np.take(wt, ids, axis=0, out=out), reps),
            timeit(lambda: torch.embedding(twt, tids), reps),
        )
    )
    rows.append(
        (
            f"embedding backward ({B} ids, {V}x{C})",
            timeit(lambda: _fast.embedding_bw(3, B, _a(ids), True, V, C, _a(g), C, _a(gw), None), reps),
            timeit(np_emb_bw, reps),
            timeit(lambda: torch.ops.aten.embedding_dense_backward(tg, tids, V, -1, False), reps),
        )
    )
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--size", type=int, default=64 * 1024 * 1024, help="elements for elementwise/reductions")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    print(
        f"# plast kernels vs torch {torch.__version__}; SIMD {_runtime.get_simd()}; "
        f"{_runtime.usable_cores()} usable cores; size {args.size} float32",
        file=sys.stderr,
    )
    results = {"simd": _runtime.get_simd(), "size": args.size, "threads": {}}
    for nt in args.threads:
        _runtime.set_num_threads(nt)
        torch.set_num_threads(nt)
        os.environ["OMP_NUM_THREADS"] = str(nt)
        copy, erows = elementwise_rows(args.size, args.reps)
        nrows = nn_rows(max(args.reps, 50))
        print(f"\n## {nt} thread(s): copy bandwidth {copy:.1f} GB/s")
        print(
            f"{'kernel':34s} {'plast GB/s':>10s} {'%copy':>6s} {'numpy GB/s':>10s} {'torch GB/s':>10s} "
            f"{'plast/torch':>11s}"
        )
        res = {"copy_gbs": copy, "elementwise": {}, "nn": {}}
        for name, nbytes, tp, tn, tt in erows:
            f = lambda t: f"{nbytes / t / 1e9:10.1f}" if t else f"{'-':>10s}"  # noqa: E731
            pct = f"{100 * nbytes / tp / 1e9 / copy:5.0f}%" if tp else f"{'-':>6s}"
            ratio = f"{tt / tp:10.2f}x" if tp else f"{'-':>11s}"
            print(f"{name:34s} {f(tp)} {pct} {f(tn)} {f(tt)} {ratio}")
            res["elementwise"][name] = {"bytes": nbytes, "plast_s": tp, "numpy_s": tn, "torch_s": tt}
        print(f"\n{'kernel':40s} {'plast us':>9s} {'numpy us':>9s} {'torch us':>9s} {'torch/plast':>11s}")
        for name, tp, tn, tt in nrows:
            print(f"{name:40s} {tp * 1e6:9.1f} {tn * 1e6:9.1f} {tt * 1e6:9.1f} {tt / tp:10.2f}x")
            res["nn"][name] = {"plast_s": tp, "numpy_s": tn, "torch_s": tt}
        results["threads"][nt] = res
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
