"""The one-call GPU check of the CUDA backend: ``python bench/gpu_check.py [--out DIR]`` (bench/gpu_check.sh runs it).

On a machine with a usable GPU it (1) compiles every kernel module for the device (timed), (2) runs the tests
marked ``cuda`` (every op replayed against the CPU backend, plus attention, TF32, philox and error checks), and
(3) times a few kernels against torch on the GPU when torch has CUDA: SGEMM at 4096 (FP32 and TF32, GFLOP/s;
FP32 once more through plast tensors and the engine), elementwise add against a device-to-device copy (GB/s),
softmax, layer_norm and a fused Adam step. It prints a short table last and writes ``gpu_check.json`` and the
pytest log under --out (default $OUT, else the current directory).

Without a GPU it prints ``no GPU: skipped (<reason>)`` and exits 0.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _tests_dir():
    """plast-core's tests/ (they hold the CPU-side reference harness, cuda_harness.py)."""
    cand = Path(__file__).resolve().parents[1] / "packages" / "plast-core" / "tests"
    return cand if (cand / "test_cuda.py").is_file() else None


if _tests_dir() is not None:
    sys.path.insert(0, str(_tests_dir()))


def _timer(drv):
    def run(fn, warmup=3, iters=20):
        for _ in range(warmup):
            fn()
        start, end = drv.Event(), drv.Event()
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.time_till(end) / iters  # ms

    return run


def _torch_timer():
    try:
        import torch
    except ImportError:
        return None, None
    if not torch.cuda.is_available():
        return None, None

    def run(fn, warmup=3, iters=20):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / iters

    return torch, run


def benchmarks():
    """Rows (name, plast ms, torch ms or None, figure, unit) of the timed kernels."""
    import cuda_harness as harness
    import numpy as np

    import plast._core.cuda_driver as cuda
    from plast.kernels.cuda import kernels, kernels_nn
    from plast.memory import cuda as memory
    from plast.ops.registry import OPS

    drv = cuda.driver()
    timeit = _timer(drv)
    torch, ttimeit = _torch_timer()
    arena = memory.transient_arena()
    rows = []

    def put(a):
        a = np.ascontiguousarray(a)
        st = arena.new(a.nbytes)
        memory.from_host(st, a.view(np.uint8).reshape(-1))
        import plast._core.dtypes as D

        code = {np.float32: 3, np.float64: 4, np.int64: 2}[a.dtype.type]
        return harness.DevTensor(
            st, a.shape, kernels.contiguous_strides(a.shape), 0, next(d for d in D.ALL if d.code == code)
        )

    rng = np.random.default_rng(0)
    n = 4096
    a, b = (put(rng.standard_normal((n, n)).astype(np.float32)) for _ in range(2))
    c = put(np.zeros((n, n), np.float32))
    flops = 2 * n**3
    for tf32 in (False, True):
        cuda.matmul.allow_tf32 = tf32
        ms = timeit(lambda: kernels_nn.gemm(kernels.operand(a), kernels.operand(b), c), iters=10)
        tms = None
        if torch is not None:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            ta, tb = (torch.randn(n, n, device="cuda") for _ in range(2))
            tms = ttimeit(lambda ta=ta, tb=tb: torch.matmul(ta, tb), iters=10)
        rows.append((f"matmul {n} {'tf32' if tf32 else 'fp32'}", ms, tms, flops / ms / 1e6, "GFLOP/s"))
    cuda.matmul.allow_tf32 = False

    # the same product through tensors and the engine (record, schedule, allocate, launch)
    import plast

    pa, pb = (plast.randn(n, n, device="cuda") for _ in range(2))
    ms = timeit(lambda: (pa @ pb)._realized(), iters=10)
    rows.append((f"plast.matmul {n} fp32 (engine)", ms, rows[0][2], flops / ms / 1e6, "GFLOP/s"))

    m = 1 << 26
    x, y, z = (put(rng.standard_normal(m).astype(np.float32)) for _ in range(3))
    node = harness._ArgsNode(OPS["add"], ())
    ms = timeit(lambda: kernels.binary(node, [x, y], [z]))
    copy_ms = timeit(lambda: drv.memcpy_dtod(kernels.addr(z), kernels.addr(x), m * 4))
    rows.append(("add 64M fp32", ms, copy_ms, 3 * m * 4 / ms / 1e6, "GB/s (torch col: d2d copy ms)"))

    r, k = 4096, 4096
    s_in = put(rng.standard_normal((r, k)).astype(np.float32))
    s_out = put(np.zeros((r, k), np.float32))
    node = harness._ArgsNode(OPS["softmax"], (1, False))
    ms = timeit(lambda: kernels_nn.softmax(node, [s_in], [s_out]))
    tms = None
    if torch is not None:
        tx = torch.randn(r, k, device="cuda")
        tms = ttimeit(lambda: torch.softmax(tx, 1))
    rows.append((f"softmax {r}x{k}", ms, tms, 2 * r * k * 4 / ms / 1e6, "GB/s"))

    w = put(np.ones(k, np.float32))
    bias = put(np.zeros(k, np.float32))
    mean, rstd = put(np.zeros(r, np.float32)), put(np.zeros(r, np.float32))
    node = harness._ArgsNode(OPS["layer_norm"], (1, 1e-5, True, True))
    ms = timeit(lambda: kernels_nn.layer_norm(node, [s_in, w, bias], [s_out, mean, rstd]))
    tms = None
    if torch is not None:
        tw, tb2 = torch.ones(k, device="cuda"), torch.zeros(k, device="cuda")
        tms = ttimeit(lambda: torch.nn.functional.layer_norm(tx, (k,), tw, tb2))
    rows.append((f"layer_norm {r}x{k}", ms, tms, 2 * r * k * 4 / ms / 1e6, "GB/s"))

    sizes = [(1 << 20)] * 8 + [4096] * 32
    ps = [put(rng.standard_normal(s).astype(np.float32)) for s in sizes]
    gs = [put(rng.standard_normal(s).astype(np.float32)) for s in sizes]
    ms_ = [put(np.zeros(s, np.float32)) for s in sizes]
    vs = [put(np.zeros(s, np.float32)) for s in sizes]
    steps = [put(np.zeros(1, np.float64)) for _ in sizes]
    hyper = put(np.array([1e-3, 0.9, 0.999, 1e-8, 0.01]))
    nparam = len(sizes)
    node = harness._ArgsNode(OPS["adam_update"], (nparam, 1, (0,) * nparam, False, True, False))
    inputs = [hyper, *ps, *gs, *ms_, *vs, *steps]
    ms = timeit(lambda: kernels_nn.adam_update(node, inputs, []))
    tms = None
    if torch is not None:
        tp = [torch.randn(s, device="cuda", requires_grad=True) for s in sizes]
        for t in tp:
            t.grad = torch.randn_like(t)
        opt = torch.optim.AdamW(tp, lr=1e-3, fused=True)
        tms = ttimeit(opt.step)
    total = sum(sizes)
    rows.append(
        (f"adamw {nparam} tensors, {total / 1e6:.1f}M params", ms, tms, total * 4 * 7 / ms / 1e6, "GB/s")
    )
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default=os.environ.get("OUT") or ".", help="where to write gpu_check.json and logs"
    )
    ap.add_argument("--no-tests", action="store_true", help="skip the pytest run")
    ap.add_argument("--no-bench", action="store_true", help="skip the timings")
    args = ap.parse_args(argv)

    import plast._core.cuda_driver as cuda

    if not cuda.is_available():
        print(f"plast CUDA GPU check: no GPU: skipped ({cuda.unavailable_reason()})")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from plast.kernels.cuda import loader

    report = {"device": {k: (list(v) if isinstance(v, tuple) else v) for k, v in cuda.device_info().items()}}
    t0 = time.perf_counter()
    loader.build_all()
    report["build_s"] = round(time.perf_counter() - t0, 2)
    print(
        f"built {len(loader.module_names())} modules for {cuda.arch()} in {report['build_s']} s "
        f"(cache: {loader.cache_dir()})"
    )
    rc = 0
    if not args.no_tests:
        tests = _tests_dir()
        if tests is None:
            print("note: plast-core's tests/ directory is not next to this install; cuda tests not run")
        else:
            log = out / "gpu_check_pytest.log"
            cmd = [
                sys.executable,
                "-m",
                "pytest",
                str(tests),
                "-m",
                "cuda",
                "-q",
                "-rfEs",
                "-p",
                "no:cacheprovider",
            ]
            res = subprocess.run(cmd, capture_output=True, text=True)
            log.write_text(res.stdout + res.stderr)
            tail = [ln for ln in res.stdout.splitlines() if ln.strip()][-15:]
            print("\n".join(tail))
            report["tests_rc"] = res.returncode
            report["tests_summary"] = tail[-1] if tail else ""
            rc = res.returncode
    if not args.no_bench:
        rows = benchmarks()
        report["bench"] = [dict(name=n, plast_ms=p, torch_ms=t, figure=f, unit=u) for n, p, t, f, u in rows]
        print(f"\n{'kernel':44s} {'plast ms':>10s} {'torch ms':>10s} {'ratio':>7s}  figure")
        for name, p, t, fig, unit in rows:
            ratio = f"{p / t:7.2f}" if t else "      -"
            tt = f"{t:10.3f}" if t else "         -"
            print(f"{name:44s} {p:10.3f} {tt} {ratio}  {fig:.1f} {unit}")
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2))
    return rc


if __name__ == "__main__":
    sys.exit(main())
