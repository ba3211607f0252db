"""plast.matmul against torch.matmul on the exact GEMMs of the workloads' training steps (issue 20).

    python bench/bench_gemm_shapes.py                      # gpt + mlp shapes, 1 and 2 threads
    python bench/bench_gemm_shapes.py --workloads gpt gpt_medium --threads 1 --rounds 9

Every case builds its operands the way the step does (a Linear layer's ``x @ W.T``, its backward ``dY @ W`` and
``dY^T @ X`` with dY^T a transposed view, attention's per-head views of the fused qkv projection), from the same
numpy arrays in both frameworks, and times ``a @ b`` (out-of-place, as autograd calls it, no grad recording).
plast and torch run interleaved, round by round, in one process with the same thread count; the ratio column is
the median over rounds of plast's time / torch's time (< 1: plast is faster). The machine is shared: compare
ratios, and read ``load`` (the 1-minute load average at the start) before believing one.
"""

import argparse
import functools
import json
import os
import time

import numpy as np


def linear_cases(tag, rows, dims):
    """(name, builder) for each Linear layer in_f -> out_f over `rows` tokens: forward, dX and dW."""
    out = []
    for in_f, out_f in dims:
        out.append((f"{tag} fwd x@W^T {rows}x{in_f}x{out_f}", ("nt", rows, in_f, out_f)))
        out.append((f"{tag} dX dY@W {rows}x{out_f}x{in_f}", ("nn", rows, out_f, in_f)))
        out.append((f"{tag} dW dY^T@X {out_f}x{rows}x{in_f}", ("tn", out_f, rows, in_f)))
    return out


def cases_for(name):
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "bench", "workloads.json")) as f:
        wl = json.load(f)
    if name in ("gpt", "gpt_medium"):
        w = wl[name]
        C, B, T, nh, V = w["n_embd"], w["batch"], w["block_size"], w["n_head"], w["vocab_size"]
        hs = C // nh
        rows = B * T
        out = linear_cases(name, rows, [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)])
        # tied head: x (B, T, C) @ wte.weight^T; its weight gradient is the batched (C x T) @ (T x V), summed
        out.append((f"{name} head x@W^T {rows}x{C}x{V}", ("nt", rows, C, V)))
        out.append((f"{name} head dX {rows}x{V}x{C}", ("nn", rows, V, C)))
        out.append((f"{name} head dW {B}*{C}x{T}x{V} (A^T)", ("head_dw", B, T, C, V)))
        if name == "gpt":  # explicit attention (gpt_medium uses scaled_dot_product_attention)
            for kind in ("qk", "pv", "d_pv_att", "d_pv_v", "d_qk_q", "d_qk_k"):
                out.append((f"{name} attn {kind} {B}x{nh} T={T} hs={hs}", ("attn", kind, B, T, nh, hs)))
        return out
    if name == "mlp":
        w = wl["mlp"]
        L, rows = w["layers"], w["batch"]
        out = []
        for i, (fi, fo) in enumerate(zip(L[:-1], L[1:])):
            out.append((f"mlp fwd {rows}x{fi}x{fo}", ("nt", rows, fi, fo)))
            if i > 0:
                out.append((f"mlp dX {rows}x{fo}x{fi}", ("nn", rows, fo, fi)))
            out.append((f"mlp dW {fo}x{rows}x{fi}", ("tn", fo, rows, fi)))
        return out
    raise SystemExit(f"unknown workload {name}")


def build(spec, rng):
    """numpy arrays and a function f(lib, arrays) -> (a, b) building the operands' views in torch or plast."""
    kind = spec[0]
    if kind in ("nt", "nn", "tn"):
        M, K, N = spec[1:]
        if kind == "nt":  # x [M, K] @ W.T, W [N, K]
            arrs = [rng.standard_normal((M, K)), rng.standard_normal((N, K))]
            return arrs, lambda L, t: (t[0], t[1].transpose(0, 1))
        if kind == "nn":  # dY [M, K] @ W [K, N]
            arrs = [rng.standard_normal((M, K)), rng.standard_normal((K, N))]
            return arrs, lambda L, t: (t[0], t[1])
        # dY^T @ X: dY [K, M] (tokens x out), X [K, N]
        arrs = [rng.standard_normal((K, M)), rng.standard_normal((K, N))]
        return arrs, lambda L, t: (t[0].transpose(0, 1), t[1])
    if kind == "head_dw":
        B, T, C, V = spec[1:]
        arrs = [rng.standard_normal((B, T, C)), rng.standard_normal((B, T, V))]
        return arrs, lambda L, t: (t[0].transpose(-1, -2), t[1])
    _, which, B, T, nh, hs = spec
    C = nh * hs
    arrs = [
        rng.standard_normal((B, T, 3 * C)),
        rng.standard_normal((B, nh, T, T)),
        rng.standard_normal((B, nh, T, hs)),
    ]

    def heads(t, i):  # q, k or v of the fused projection: (B, nh, T, hs) views with batch strides (T*3C, hs)
        return t[:, :, i * C : (i + 1) * C].reshape(B, T, nh, hs).transpose(1, 2)

    def f(L, t):
        q, k, v = heads(t[0], 0), heads(t[0], 1), heads(t[0], 2)
        att, g = t[1], t[2]
        if which == "qk":
            return q, k.transpose(-2, -1)
        if which == "pv":
            return att, v
        if which == "d_pv_att":  # g @ v^T
            return g, v.transpose(-2, -1)
        if which == "d_pv_v":  # att^T @ g
            return att.transpose(-2, -1), g
        if which == "d_qk_q":  # g_att @ k
            return att, k
        return q.transpose(-2, -1), att  # d_qk_k: q^T @ g_att, (hs x T) @ (T x T)

    return arrs, f


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", nargs="+", default=["gpt", "mlp"])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--budget", type=float, default=0.02, help="seconds per framework per round (approx.)")
    p.add_argument("--filter", default="", help="only cases whose name contains this")
    p.add_argument("--json", metavar="PATH")
    p.add_argument(
        "--cpu-time",
        action="store_true",
        help="time with the process's CPU time instead of wall time: robust to other work on the machine at 1 thread "
        "(time spent descheduled is not counted); at 2 threads it also counts threads waiting for each other",
    )
    p.add_argument(
        "--best",
        action="store_true",
        help="compare each framework's fastest round instead of the median ratio: on a machine whose other work "
        "takes the cores away for whole time slices (2 threads on 2 busy cores), the fastest round is the one "
        "that ran undisturbed (use many short rounds)",
    )
    args = p.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter

    import torch

    import plast

    rng = np.random.default_rng(0)
    load = os.getloadavg()[0]
    cases = [c for w in args.workloads for c in cases_for(w) if args.filter in c[0]]
    results = []
    print(
        f"plast vs torch {torch.__version__}; load {load:.2f}; {'CPU' if args.cpu_time else 'wall'} time, "
        f"{'fastest round' if args.best else 'median over rounds'}"
    )
    print(f"{'case':<44} {'thr':>3} {'plast us':>9} {'torch us':>9} {'p/t':>6}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        plast.set_num_threads(threads)
        for name, spec in cases:
            arrs, f = build(spec, rng)
            arrs = [a.astype(np.float32) for a in arrs]
            ta, tb = f(torch, [torch.from_numpy(a) for a in arrs])
            pa, pb = f(plast, [plast.tensor(a) for a in arrs])
            ref = (ta.double() @ tb.double()).numpy()
            got = (pa @ pb).numpy()
            err = float(np.abs(got - ref).max() / (np.abs(ref).max() + 1e-30))
            assert err < 1e-4, (name, err)

            def run(fn, reps):
                t0 = clock()
                for _ in range(reps):
                    fn()
                return (clock() - t0) / reps

            fp = functools.partial(lambda x, y: plast.forward(x @ y), pa, pb)  # ops are lazy: compute now
            ft = functools.partial(torch.matmul, ta, tb)
            with torch.no_grad():
                one = max(run(ft, 3), 1e-6)
                reps = max(3, int(args.budget / one))
                run(fp, reps)
                run(ft, reps)
                tp, tt = [], []
                for _ in range(args.rounds):
                    tp.append(run(fp, reps))
                    tt.append(run(ft, reps))
            if args.best:
                mp, mt = min(tp), min(tt)
                ratio = mp / mt
            else:
                ratio = float(np.median(np.array(tp) / np.array(tt)))
                mp, mt = float(np.median(tp)), float(np.median(tt))
            print(f"{name:<44} {threads:>3} {mp * 1e6:9.1f} {mt * 1e6:9.1f} {ratio:6.2f}", flush=True)
            results.append({"case": name, "threads": threads, "plast_s": mp, "torch_s": mt, "ratio": ratio})
    for threads in args.threads:
        rs = [r for r in results if r["threads"] == threads]
        tot_p = sum(r["plast_s"] for r in rs)
        tot_t = sum(r["torch_s"] for r in rs)
        print(
            f"sum of medians, {threads} thread(s): plast/torch {tot_p / tot_t:.3f}; worst ratio "
            f"{max(r['ratio'] for r in rs):.2f}"
        )
    print(f"load at end {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load": load, "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
