"""The op table's last CUDA rows: scatter_reduce, multinomial, reduce_svd (matrix norms) and reduce_prod_excl.

    python bench/bench_cuda_last_rows.py                # host side everywhere; the GPU part where one is available
    python bench/bench_cuda_last_rows.py --json out.json

Host side (any machine): each launcher run against the harness's recorder instead of a GPU: its Python cost per
call (microseconds, the launches themselves are no-ops) and how many kernels it launches (scatter_reduce and
multinomial without replacement sort, and a long sort is one launch per bitonic step).
GPU (plast._core.cuda_driver.is_available()): milliseconds per call through plast tensors on the device, next to
the same call on plast's CPU backend and, when torch has CUDA, torch on the GPU. Medians of --reps runs; a GPU
call ends with a host read, so it includes the synchronization. Timings are reported, never asserted.
"""

import argparse
import json

import cuda_harness as harness
import numpy as np
from timing import median_time

import plast
import plast._core.cuda_driver as cuda
from plast.kernels.cuda import table as cuda_table


def cases(device):
    """name -> a function running one call of the op on `device` (inputs made once, outside the timing)."""
    g = plast.Generator().manual_seed(0)
    rng = np.random.default_rng(0)

    def t(a, **kw):
        return plast.tensor(a, device=device, **kw)

    x = t(rng.standard_normal(10_000).astype(np.float32))
    idx = t(rng.integers(0, 10_000, 1_000_000))
    src = t(rng.standard_normal(1_000_000).astype(np.float32))
    w = t(rng.random((64, 50_000)).astype(np.float32))
    mats32 = t(rng.standard_normal((1024, 16, 16)).astype(np.float32))
    mats64 = t(rng.standard_normal((256, 32, 24)))
    p0 = rng.standard_normal((256, 64))

    def prod3():
        p = t(p0, requires_grad=True)
        (g1,) = plast.autograd.grad(p.prod(1).sum(), p, create_graph=True)
        (g2,) = plast.autograd.grad((g1 * g1).sum(), p, create_graph=True)
        (g3,) = plast.autograd.grad((g2 * g2).sum(), p)
        return g3

    return {
        "scatter_reduce sum 1M -> 10k f32": lambda: x.scatter_reduce(0, idx, src, "sum"),
        "scatter_reduce amax 1M -> 10k f32": lambda: x.scatter_reduce(
            0, idx, src, "amax", include_self=False
        ),
        "multinomial 64 x 50k, 256 with replacement": lambda: plast.multinomial(w, 256, True, generator=g),
        "multinomial 64 x 50k, 256 without": lambda: plast.multinomial(w, 256, generator=g),
        "matrix_norm nuc 1024 x 16x16 f32": lambda: plast.linalg.matrix_norm(mats32, "nuc"),
        "matrix_norm 2 256 x 32x24 f64": lambda: plast.linalg.matrix_norm(mats64, 2),
        "prod third derivative 256 x 64 f64": prod3,
    }


def torch_cases():
    import torch

    rng = np.random.default_rng(0)
    dev = "cuda"
    x = torch.tensor(rng.standard_normal(10_000).astype(np.float32), device=dev)
    idx = torch.tensor(rng.integers(0, 10_000, 1_000_000), device=dev)
    src = torch.tensor(rng.standard_normal(1_000_000).astype(np.float32), device=dev)
    w = torch.tensor(rng.random((64, 50_000)).astype(np.float32), device=dev)
    mats32 = torch.tensor(rng.standard_normal((1024, 16, 16)).astype(np.float32), device=dev)
    mats64 = torch.tensor(rng.standard_normal((256, 32, 24)), device=dev)
    p0 = torch.tensor(rng.standard_normal((256, 64)), device=dev)

    def prod3():
        p = p0.clone().requires_grad_()
        (g1,) = torch.autograd.grad(p.prod(1).sum(), p, create_graph=True)
        (g2,) = torch.autograd.grad((g1 * g1).sum(), p, create_graph=True)
        (g3,) = torch.autograd.grad((g2 * g2).sum(), p)
        return g3

    return {
        "scatter_reduce sum 1M -> 10k f32": lambda: x.scatter_reduce(0, idx, src, "sum"),
        "scatter_reduce amax 1M -> 10k f32": lambda: x.scatter_reduce(
            0, idx, src, "amax", include_self=False
        ),
        "multinomial 64 x 50k, 256 with replacement": lambda: torch.multinomial(w, 256, True),
        "multinomial 64 x 50k, 256 without": lambda: torch.multinomial(w, 256),
        "matrix_norm nuc 1024 x 16x16 f32": lambda: torch.linalg.matrix_norm(mats32, "nuc"),
        "matrix_norm 2 256 x 32x24 f64": lambda: torch.linalg.matrix_norm(mats64, 2),
        "prod third derivative 256 x 64 f64": prod3,
    }


def host_side(reps):
    """Per op: the launcher's Python cost (us) and its kernel launches, the GPU replaced by the recorder."""
    names = ("scatter_reduce", "multinomial", "reduce_svd", "reduce_prod_excl")
    run = {n: f for n, f in cases("cpu").items() if "1M" not in n}  # 1M-element sorts only add launches
    calls = harness.capture(lambda: plast.forward(*[f() for f in run.values()]))
    table = cuda_table.table()
    res = {}
    with harness.fake_gpu() as recs:
        for c in calls:
            if c.name not in names:
                continue
            start = len(recs)
            us = 1e6 * median_time(lambda c=c: table[c.name](c.node, c.inputs, c.outputs), reps, warm=1)
            launches = (len(recs) - start) // (reps + 1)
            shapes = "x".join(str(s) for s in c.inputs[0]._shape)
            args = ", ".join(map(str, c.node.args)) if c.name == "multinomial" else ""
            res.setdefault(f"{c.name} ({shapes}) {args}".strip(), (us, launches))
    return res


def gpu_side(reps):
    res = {}
    dev, cpu = cases("cuda"), cases("cpu")
    try:
        import torch

        tor = torch_cases() if torch.cuda.is_available() else {}
    except ImportError:
        tor = {}
    for name, fn in dev.items():
        row = {"plast cuda": 1e3 * median_time(lambda fn=fn: fn().tolist(), reps)}
        row["plast cpu"] = 1e3 * median_time(lambda name=name: cpu[name]().tolist(), max(3, reps // 4))
        if name in tor:
            row["torch cuda"] = 1e3 * median_time(lambda name=name: tor[name]().tolist(), reps)
        res[name] = row
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    out = {"host": host_side(args.reps)}
    print("launcher host cost (recorder instead of a GPU):")
    for name, (us, launches) in out["host"].items():
        print(f"  {name:<40} {us:9.1f} us  {launches:4d} launches")
    if cuda.is_available():
        out["gpu"] = gpu_side(args.reps)
        print("milliseconds per call:")
        for name, row in out["gpu"].items():
            print(f"  {name:<44} " + "  ".join(f"{k} {v:8.3f}" for k, v in row.items()))
    else:
        print(f"GPU part skipped: {cuda.unavailable_reason()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
