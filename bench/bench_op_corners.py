"""The op set's corners (layer_norm double backward, scatter_reduce, matrix norms, prod's higher derivatives,
embedding with max_norm / scale_grad_by_freq) next to PyTorch: milliseconds per call (forward + backward through
the public API, engine included), medians of several runs.

    python bench/bench_op_corners.py                 # 1 thread
    python bench/bench_op_corners.py --threads 2 --reps 20
"""

import argparse

import numpy as np
import torch
from timing import median_time

import plast


def timeit(fn, reps, warm=2):
    """Median milliseconds per call."""
    return 1e3 * median_time(fn, reps, warm)


def cases(rng):
    """(name, plast fn, torch fn): each call builds inputs' graphs afresh and runs backward."""
    x = rng.standard_normal((1024, 128)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 128).astype(np.float32)
    up = rng.standard_normal((1024, 128)).astype(np.float32)

    def ln(m, create):
        F = plast if m is plast else torch.nn.functional

        def run():
            a = m.tensor(x, requires_grad=True)
            b = m.tensor(w, requires_grad=True)
            y = F.layer_norm(a, (128,), b)
            gs = m.autograd.grad(y, [a, b], m.tensor(up), create_graph=create)
            if create:
                m.autograd.grad(sum((g * g).sum() for g in gs), [a, b])

        return run

    yield "layer_norm fwd+bwd", ln(plast, False), ln(torch, False)
    yield "layer_norm double bwd", ln(plast, True), ln(torch, True)

    base = rng.standard_normal((1000, 64)).astype(np.float32)
    idx = rng.integers(0, 1000, (5000, 64))
    src = rng.standard_normal((5000, 64)).astype(np.float32)
    g = rng.standard_normal((1000, 64)).astype(np.float32)
    for red in ("sum", "prod", "mean", "amax"):

        def sr(m, red=red):
            def run():
                a = m.tensor(base, requires_grad=True)
                s = m.tensor(src, requires_grad=True)
                a.scatter_reduce(0, m.tensor(idx), s, red).backward(m.tensor(g))

            return run

        yield f"scatter_reduce {red} 5000x64->1000x64", sr(plast), sr(torch)

    mats = rng.standard_normal((64, 32, 32))
    for ord_ in ("nuc", 2):

        def mn(m, ord_=ord_):
            norm = plast.ops.reduce.matrix_norm if m is plast else torch.linalg.matrix_norm

            def run():
                a = m.tensor(mats, requires_grad=True)
                norm(a, ord_).sum().backward()

            return run

        yield f"matrix_norm {ord_} 64x32x32 f64", mn(plast), mn(torch)

    px = rng.uniform(0.5, 1.5, (256, 16))

    def prod3(m):
        def run():
            a = m.tensor(px, requires_grad=True)
            (g1,) = m.autograd.grad(a.prod(1).sum(), [a], create_graph=True)
            (g2,) = m.autograd.grad((g1 * g1).sum(), [a], create_graph=True)
            m.autograd.grad((g2 * g2).sum(), [a])

        return run

    yield "prod(1) third derivative 256x16 f64", prod3(plast), prod3(torch)

    ew = rng.standard_normal((5000, 128)).astype(np.float32) * 3
    ids = rng.integers(0, 5000, (64, 64))
    eg = rng.standard_normal((64, 64, 128)).astype(np.float32)

    def emb(m):
        F = plast if m is plast else torch.nn.functional

        def run():
            wt = m.tensor(ew, requires_grad=True)
            F.embedding(m.tensor(ids), wt, max_norm=1.0, scale_grad_by_freq=True).backward(m.tensor(eg))

        return run

    yield "embedding max_norm+freq 64x64 of 5000x128", emb(plast), emb(torch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    plast.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    print(f"{'case':44s} {'plast ms':>10s} {'torch ms':>10s} {'ratio':>7s}")
    for name, fp, ft in cases(np.random.default_rng(0)):
        tp, tt = timeit(fp, args.reps), timeit(ft, args.reps)
        print(f"{name:44s} {tp:10.2f} {tt:10.2f} {tp / tt:7.2f}")


if __name__ == "__main__":
    main()
