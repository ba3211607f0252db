"""Kernel microbenchmarks: GEMM GFLOP/s against numpy's BLAS, plast.matmul's per-call overhead through the API,
and elementwise / reduction bandwidth at 64M floats against measured copy bandwidth.

    python bench/micro.py                          # 1 and 2 threads, table on stdout
    python bench/micro.py --quick --threads 1 --json /tmp/micro.json

GEMM comes from bench/bench_gemm.py (run as a child process per thread count: n = 64..2048 and the workloads'
skinny shapes, the kernel timed in C, numpy's BLAS limited to the same threads). The rest runs here:

* matmul overhead: ``plast.matmul(a, b)`` realized with ``plast.forward`` and followed by
  ``reset_transient_arenas()``, per call, against the kernel alone (``_gemm._time_calls``) on the same shape;
  the difference is what the API costs (op layer, graph, scheduler, arena). torch.matmul and numpy for scale.
* bandwidth: bytes moved / time, counting each operand once (add and mul read two arrays and write one; sum reads
  one; np.copyto reads one and writes one). add/mul call the C kernel directly
  (``plast.kernels.cpu._kernels.binary_arrays``); ``plast.add`` and ``plast.sum`` go through the API.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
N_BIG = 64 * 2**20  # 64M floats, 256 MiB per array
OVERHEAD_SHAPES = [(4, 4, 4), (4, 2, 8), (64, 64, 64), (128, 784, 512)]


def _median_time(fn, reps, rounds):
    fn()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t) / reps)
    return statistics.median(out), min(out), max(out)


def gemm(threads, quick):
    """bench_gemm.py's rows, or a status string when it cannot run."""
    script = HERE / "bench_gemm.py"
    if not script.is_file():
        return "skipped: bench/bench_gemm.py is not there"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "gemm.json"
        cmd = [sys.executable, str(script), "--threads", *map(str, threads), "--json", str(out)]
        if quick:
            cmd += ["--quick", "--rounds", "3", "--budget", "0.08"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode or not out.is_file():
            return f"failed: bench_gemm.py exit {p.returncode}: {p.stderr.strip()[-400:]}"
        return json.loads(out.read_text())["results"]


def matmul_overhead(nt, quick):
    import torch

    import plast

    plast.set_num_threads(nt)
    torch.set_num_threads(nt)

    try:
        from plast.kernels.cpu import _gemm
    except ImportError:
        _gemm = None
    rows = []
    rng = np.random.default_rng(0)
    rounds = 3 if quick else 5
    for m, k, n in OVERHEAD_SHAPES:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c = np.empty((m, n), np.float32)
        reps = max(20, int((3e3 if quick else 1e4) / max(1.0, 2 * m * k * n / 1e6)))
        pa, pb = plast.tensor(a), plast.tensor(b)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)

        def api(pa=pa, pb=pb):
            plast.forward(plast.matmul(pa, pb))
            plast.reset_transient_arenas()

        row = {"m": m, "k": k, "n": n}
        row["plast_api_us"] = _median_time(api, reps, rounds)[0] * 1e6
        if _gemm is not None:
            row["kernel_us"] = float(np.median(_gemm._time_calls(a, b, c, reps=reps))) * 1e6
            row["overhead_us"] = row["plast_api_us"] - row["kernel_us"]
        row["torch_us"] = _median_time(lambda ta=ta, tb=tb: torch.matmul(ta, tb), reps, rounds)[0] * 1e6
        row["numpy_us"] = _median_time(lambda a=a, b=b, c=c: np.matmul(a, b, out=c), reps, rounds)[0] * 1e6
        rows.append(row)
    return rows


def bandwidth(threads, quick):
    import plast
    from plast.kernels.cpu import _kernels

    rounds = 3 if quick else 7
    nbytes = N_BIG * 4
    a = np.random.default_rng(0).standard_normal(N_BIG, dtype=np.float32)
    b = a[::-1].copy()
    c = np.empty_like(a)
    pa, pb = plast.from_numpy(a), plast.from_numpy(b)

    def api_add():
        plast.forward(plast.add(pa, pb))
        plast.reset_transient_arenas()

    # (name, threads or None, bytes moved, fn)
    cases = [
        ("copy (np.copyto)", None, 2 * nbytes, lambda: np.copyto(c, a)),
        ("add (numpy)", None, 3 * nbytes, lambda: np.add(a, b, out=c)),
        ("sum (numpy)", None, nbytes, lambda: a.sum()),
    ]
    for nt in threads:
        cases += [
            (f"add kernel t{nt}", nt, 3 * nbytes, lambda: _kernels.binary_arrays(_kernels.BIN_ADD, a, b, c)),
            (f"mul kernel t{nt}", nt, 3 * nbytes, lambda: _kernels.binary_arrays(_kernels.BIN_MUL, a, b, c)),
            (f"plast.add t{nt}", nt, 3 * nbytes, api_add),
            (f"plast.sum t{nt}", nt, nbytes, lambda: plast.sum(pa).item()),
        ]
    # NOTE: rounds interleave the cases, so a busy moment on the machine hits all of them, not one
    times = {name: [] for name, *_ in cases}
    for r in range(rounds + 1):
        for name, nt, _, fn in cases:
            if nt is not None:
                plast.set_num_threads(nt)
            t = time.perf_counter()
            fn()
            if r:  # round 0 warms up: page faults, arena blocks, thread pool
                times[name].append(time.perf_counter() - t)
    rows = {}
    for name, _, moved, _ in cases:
        ts = times[name]
        rows[name] = {
            "gb_s": moved / statistics.median(ts) / 1e9,
            "gb_s_min": moved / max(ts) / 1e9,
            "gb_s_max": moved / min(ts) / 1e9,
        }
    copy = rows["copy (np.copyto)"]["gb_s"]
    for r in rows.values():
        r["of_copy"] = r["gb_s"] / copy
    return rows


def _section(name, fn, *args):
    t0 = time.time()
    try:
        r = fn(*args)
    except Exception as e:  # noqa: BLE001 - one broken part must not hide the others
        r = f"failed: {type(e).__name__}: {e}"[:400]
    print(f"[micro] {name} {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
    return r


def report(R):
    lines = []
    g = R["gemm"]
    if g == "not run":
        pass
    elif isinstance(g, str):
        lines.append(f"GEMM: {g}")
    else:
        lines.append(
            "GEMM float32, GFLOP/s (median): kernel timed in C, numpy's BLAS at the same thread count (bench_gemm.py)"
        )
        lines.append(f"{'[B*] M x K x N':>16} {'thr':>3} {'plast':>7} {'numpy':>7} {'ratio':>6}")
        for r in g:
            batch = f"{r['batch']}*" if r.get("batch", 1) > 1 else ""
            shape = f"{batch}{r['m']}x{r['k']}x{r['n']}" + ("^T" if r.get("trans_b") else "")
            lines.append(
                f"{shape:>16} {r['threads']:>3} {r['plast_gflops']:7.1f} {r['numpy_gflops']:7.1f} "
                f"{r['plast_gflops'] / r['numpy_gflops']:6.2f}"
            )
    o = R["matmul_overhead"]
    lines.append("")
    if o == "not run":
        pass
    elif isinstance(o, str):
        lines.append(f"plast.matmul per-call overhead: {o}")
    else:
        lines.append(
            f"plast.matmul through the API, us per call (t{R['overhead_threads']}); overhead = API - kernel"
        )
        lines.append(f"{'M x K x N':>16} {'API':>8} {'kernel':>8} {'overhead':>8} {'torch':>8} {'numpy':>8}")
        for r in o:
            kern = f"{r['kernel_us']:8.2f}" if "kernel_us" in r else f"{'-':>8}"
            ovh = f"{r['overhead_us']:8.2f}" if "overhead_us" in r else f"{'-':>8}"
            lines.append(
                f"{r['m']}x{r['k']}x{r['n']:<6}".rjust(16)
                + f" {r['plast_api_us']:8.2f} {kern} {ovh} {r['torch_us']:8.2f} {r['numpy_us']:8.2f}"
            )
    bw = R["bandwidth"]
    lines.append("")
    if bw == "not run":
        pass
    elif isinstance(bw, str):
        lines.append(f"bandwidth: {bw}")
    else:
        lines.append("bandwidth at 64M float32, GB/s median [min-max], share of np.copyto's bandwidth")
        for k, r in bw.items():
            lines.append(
                f"{k:>18}  {r['gb_s']:6.1f} [{r['gb_s_min']:.1f}-{r['gb_s_max']:.1f}]  {r['of_copy']:5.0%}"
            )
    return "\n".join(lines).strip("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--quick", action="store_true", help="fewer GEMM sizes and repetitions")
    p.add_argument("--only", default="gemm,overhead,bandwidth")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args()
    only = args.only.split(",")
    R = {"threads": args.threads, "quick": args.quick, "n_big": N_BIG}
    R["gemm"] = _section("gemm", gemm, args.threads, args.quick) if "gemm" in only else "not run"
    if "overhead" in only:
        R["overhead_threads"] = args.threads[0]
        R["matmul_overhead"] = _section("matmul overhead", matmul_overhead, args.threads[0], args.quick)
    else:
        R["matmul_overhead"] = "not run"
    R["bandwidth"] = (
        _section("bandwidth", bandwidth, args.threads, args.quick) if "bandwidth" in only else "not run"
    )
    R["env"] = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    text = report(R)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(R, indent=1))


if __name__ == "__main__":
    main()
