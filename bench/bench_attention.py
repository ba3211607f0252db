"""Causal attention on the CPU: plast's blocked kernel against plast's composite and torch, time and memory.

    python bench/bench_attention.py                       # B=8, H=4, D=32, T=64/256/1024, 1 thread
    python bench/bench_attention.py --threads 2 --T 256 --json /tmp/attn.json
    python bench/bench_attention.py --no-mem              # timings only (no child processes)
    python bench/bench_attention.py --gpt                 # the gpt_sdpa training step, kernel on vs off


Columns (ms, median over interleaved rounds, so background load hits every implementation alike):
  fused      plast.scaled_dot_product_attention(q, k, v, is_causal=True): the blocked kernel (ops/attention.py)
  composite  the same call with the kernel switched off: matmul, scale, mask add, softmax, matmul
  torch      torch.nn.functional.scaled_dot_product_attention (its CPU flash kernel)
--gpt times run.py's gpt_sdpa workload (the gpt workload with scaled_dot_product_attention; run.py's "gpt"
itself writes attention out as matmul/masked_fill/softmax and never reaches the kernel), eager and under
@plast.jit, with the kernel on and off in interleaved steps of one process.
"fwd" realizes the output; "fwd+bwd" also runs backward with a random upstream gradient into q, k, v.
Peak memory: one child process per (implementation, T, mode), reporting the growth of peak RSS (VmHWM) over
the resident size just before the measured calls, in MB; plast's rows also give the transient arena's peak.
"""

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

IMPLS = ("fused", "composite", "torch")
MODES = ("fwd", "fwd+bwd")


def _rss_mb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.contextmanager
def _composite():
    """scaled_dot_product_attention with the blocked kernel switched off (its routing test says no)."""
    from plast.ops import nn

    fits = nn._flash_fits
    nn._flash_fits = lambda *a: False
    try:
        yield
    finally:
        nn._flash_fits = fits


def make_case(impl, B, H, T, D, mode, seed=0):
    """A no-argument function running one call of `impl`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((B, H, T, D)).astype(np.float32) for _ in range(4)]
    grad = mode == "fwd+bwd"
    if impl == "torch":
        import torch

        q, k, v = (torch.tensor(a, requires_grad=grad) for a in arrays[:3])
        g = torch.tensor(arrays[3])
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def run():
            if not grad:
                with torch.no_grad():
                    sdpa(q, k, v, is_causal=True)
                return
            sdpa(q, k, v, is_causal=True).backward(g)
            for t in (q, k, v):
                t.grad = None

        return run
    import plast

    q, k, v = (plast.tensor(a, requires_grad=grad) for a in arrays[:3])
    g = plast.tensor(arrays[3])
    switch = _composite if impl == "composite" else contextlib.nullcontext

    def run():
        with switch():
            out = plast.scaled_dot_product_attention(q, k, v, is_causal=True)
        if grad:
            out.backward(g)
            for t in (q, k, v):
                t.grad = None
        else:
            plast.forward(out)
        del out
        plast.reset_transient_arenas()

    return run


def time_cases(cases, budget_s):
    """{name: median seconds} for {name: fn}, calls interleaved in rounds until the budget is spent."""
    for fn in cases.values():
        fn()  # warm-up
    per = {n: [] for n in cases}
    t_end = time.perf_counter() + budget_s
    rounds = 0
    while rounds < 3 or (time.perf_counter() < t_end and rounds < 200):
        for name, fn in cases.items():
            t = time.perf_counter()
            fn()
            per[name].append(time.perf_counter() - t)
        rounds += 1
    return {n: statistics.median(ts) for n, ts in per.items()}


def gpt_child(jit, fused, steps):
    """Runs in a child: median ms of `steps` gpt_sdpa training steps after 3 warm-up steps, printed as JSON."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run
    import workloads_plast as W

    spec, _ = run.load_spec()
    with contextlib.nullcontext() if fused else _composite():
        wl = W.build_train("gpt_sdpa", run.workload_spec(spec, "gpt_sdpa"), jit=jit)
        for _ in range(3):
            wl.step()
        ts, cpu = [], []
        for _ in range(steps):
            t, c = time.perf_counter(), time.process_time()
            wl.step()
            ts.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    print(json.dumps({"median_ms": statistics.median(ts) * 1e3, "cpu_ms": statistics.median(cpu) * 1e3}))


def gpt_steps(threads, rounds, steps):
    """{(label, fused/composite): (wall, cpu)}: medians over rounds of each child's median wall-clock and CPU ms
    per step; the four variants run in separate processes (one model each, as run.py measures them),
    alternating, `rounds` times. On a shared machine the CPU time is the steadier of the two."""
    per = {}
    for _ in range(rounds):
        for jit in (False, True):
            for fused in (True, False):
                cmd = [sys.executable, __file__, "--gpt-child", str(int(jit)), str(int(fused)), str(steps)]
                r = subprocess.run(
                    cmd + ["--threads", str(threads)], capture_output=True, text=True, timeout=600
                )
                if r.returncode:
                    raise RuntimeError(f"gpt child failed: {r.stderr[-800:]}")
                key = ("plast.jit" if jit else "plast", "fused" if fused else "composite")
                res = json.loads(r.stdout.strip().splitlines()[-1])
                per.setdefault(key, []).append((res["median_ms"], res["cpu_ms"]))
    return {k: tuple(statistics.median(x[i] for x in v) for i in (0, 1)) for k, v in per.items()}


def mem_child(impl, B, H, T, D, mode, threads):
    """Runs in a child: peak-RSS growth (MB) of a few calls of one case, printed as JSON."""
    _set_threads(threads, impl)
    fn = make_case(impl, B, H, T, D, mode)
    before = _rss_mb("VmRSS")
    for _ in range(3):
        fn()
    res = {"peak_mb": _rss_mb("VmHWM") - before}
    if impl != "torch":
        import plast

        res["arena_peak_mb"] = plast.arena_stats()["cpu"]["transient"]["peak_in_use_bytes"] / 2**20
    print(json.dumps(res))


def _set_threads(n, impl=None):
    if impl in (None, "torch"):
        import torch

        torch.set_num_threads(n)
    if impl != "torch":
        import plast

        plast.set_num_threads(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--H", type=int, default=4)
    ap.add_argument("--D", type=int, default=32)
    ap.add_argument("--T", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget", type=float, default=4.0, help="seconds of timing per (T, mode)")
    ap.add_argument("--no-mem", action="store_true", help="skip the peak-memory child processes")
    ap.add_argument("--gpt", action="store_true", help="time the gpt_sdpa training step, kernel on and off")
    ap.add_argument("--rounds", type=int, default=3, help="--gpt: alternating rounds of child processes")
    ap.add_argument("--steps", type=int, default=20, help="--gpt: timed steps per child")
    ap.add_argument(
        "--gpt-child", nargs=3, type=int, metavar=("JIT", "FUSED", "STEPS"), help=argparse.SUPPRESS
    )
    ap.add_argument("--json", type=Path)
    ap.add_argument("--mem-child", nargs=3, metavar=("IMPL", "T", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.gpt_child:
        _set_threads(a.threads, "plast")
        return gpt_child(bool(a.gpt_child[0]), bool(a.gpt_child[1]), a.gpt_child[2])
    if a.mem_child:
        impl, T, mode = a.mem_child
        return mem_child(impl, a.B, a.H, int(T), a.D, mode, a.threads)

    if a.gpt:
        ms = gpt_steps(a.threads, a.rounds, a.steps)
        print(f"gpt_sdpa training step, {a.threads} thread(s), median of {a.rounds} child processes' medians")
        for label in ("plast", "plast.jit"):
            (fw, fc), (cw, cc) = ms[(label, "fused")], ms[(label, "composite")]
            print(
                f"{label:>9}: wall fused {fw:.1f} ms, composite {cw:.1f} ms (composite/fused {cw / fw:.2f}); "
                f"cpu fused {fc:.1f} ms, composite {cc:.1f} ms (composite/fused {cc / fc:.2f})"
            )
        if a.json:
            a.json.write_text(json.dumps({f"{k[0]} {k[1]}": v for k, v in ms.items()}, indent=1))
        return
    _set_threads(a.threads)
    import torch

    import plast

    print(
        f"causal attention, B={a.B} H={a.H} D={a.D}, float32, {a.threads} thread(s); plast {plast.__version__}, "
        f"torch {torch.__version__}"
    )
    print(
        f"{'T':>5} {'mode':>8} | {'fused':>9} {'composite':>9} {'torch':>9} | {'comp/fused':>10} "
        f"{'fused/torch':>11} | peak MB: {'fused':>7} {'comp':>7} {'torch':>7}"
    )
    results = []
    for T in a.T:
        for mode in MODES:
            cases = {impl: make_case(impl, a.B, a.H, T, a.D, mode) for impl in IMPLS}
            ms = {n: s * 1e3 for n, s in time_cases(cases, a.budget).items()}
            del cases
            mem = {}
            if not a.no_mem:
                for impl in IMPLS:
                    opts = [f"--B={a.B}", f"--H={a.H}", f"--D={a.D}", f"--threads={a.threads}"]
                    cmd = [sys.executable, __file__, "--mem-child", impl, str(T), mode] + opts
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                    lines = r.stdout.strip().splitlines()
                    mem[impl] = (
                        json.loads(lines[-1]) if r.returncode == 0 and lines else {"error": r.stderr[-400:]}
                    )
            pk = {i: mem.get(i, {}).get("peak_mb", float("nan")) for i in IMPLS}
            print(
                f"{T:>5} {mode:>8} | {ms['fused']:>9.3f} {ms['composite']:>9.3f} {ms['torch']:>9.3f} | "
                f"{ms['composite'] / ms['fused']:>10.2f} {ms['fused'] / ms['torch']:>11.2f} | "
                f"         {pk['fused']:>7.1f} {pk['composite']:>7.1f} {pk['torch']:>7.1f}",
                flush=True,
            )
            results.append({"T": T, "mode": mode, "ms": ms, "mem": mem})
    if a.json:
        meta = {"B": a.B, "H": a.H, "D": a.D, "threads": a.threads, "causal": True, "dtype": "float32"}
        a.json.write_text(json.dumps({"config": meta, "results": results}, indent=1))
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
