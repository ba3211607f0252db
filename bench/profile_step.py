"""Where one training step's time goes: plast (eager and @plast.jit) and torch, per kind of kernel, side by side.

    python bench/profile_step.py                       # gpt, 1 thread, 20 profiled steps each
    python bench/profile_step.py --workload gpt_sdpa --threads 2
    python bench/profile_step.py --workload mlp --top 15 --json /tmp/profile.json

The three start from the same weights and batch (torch's, as bench/run.py does). torch is profiled with
torch.profiler (self CPU time per ATen op), plast with plast.profiler (time per kernel call: ops, fused groups,
optimizer updates). Each op name is put in a category by the patterns in CATEGORIES; what neither profiler
attributes to a kernel is "outside kernels": for plast, Python, recording the lazy graph, planning and memory;
for torch, Python, dispatch and autograd bookkeeping (torch's own rows for the autograd engine, view ops and
allocation count there too, since they do no arithmetic). Every figure is ms per step; "step" is the median
unprofiled step time measured just before, so the profilers' own overhead shows as the difference.
Timings only: nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# (category, pattern on the lower-cased op name); the first match wins. torch's names are ATen's ("aten::mm"),
# plast's its op table's ("matmul", "addmm+gelu" for a fused group, "adam_update").
CATEGORIES = [
    ("optimizer update", r"adam|_foreach_|sgd_update|rmsprop|lerp|addcdiv|addcmul"),
    ("attention", r"attention|sdpa|flash"),
    ("GEMM (matmul, linear)", r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear)$|matmul|addmm|bmm|^mm"),
    ("layer norm", r"layer_norm|layernorm"),
    ("softmax + cross-entropy", r"softmax|cross_entropy|nll_loss|xent"),
    ("GELU", r"gelu"),
    ("embedding", r"embedding"),
    (
        "copies and layout",
        r"copy|contiguous|clone|^aten::cat$|^cat|stack|transpose|permute|index|gather|scatter",
    ),
    ("reductions", r"sum|mean|max|min|norm"),
    (
        "framework (dispatch, autograd, views)",
        r"^autograd::|backward0|#|^aten::(empty|empty_like|empty_strided|view|_unsafe_view|reshape|t|as_strided|"
        r"expand|detach|alias|zero_|zeros|ones|fill_|resize_|select|slice|unsqueeze|squeeze|split|chunk|"
        r"transpose|permute|_reshape_alias|to|_to_copy|lift_fresh|scalar_tensor|item|_local_scalar_dense)$",
    ),
    ("elementwise (other)", r".*"),
]
ORDER = [c for c, _ in CATEGORIES] + ["outside kernels"]


def category(name: str) -> str:
    low = name.lower()
    for cat, pat in CATEGORIES:
        if cat.startswith("framework") and not _torch_side(low):
            continue  # plast's rows are kernel calls: none is framework
        if re.search(pat, low):
            return cat
    return "elementwise (other)"


def _torch_side(low: str) -> bool:
    return low.startswith(("aten::", "autograd::")) or "#" in low or low.endswith("backward0")


def time_steps(w, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        w.step()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def profile_torch(w, steps):
    import torch.profiler as tp

    t0 = time.perf_counter()
    with tp.profile(activities=[tp.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            w.step()
    wall_ms = (time.perf_counter() - t0) * 1e3
    rows = {e.key: e.self_cpu_time_total / 1e3 for e in prof.key_averages()}  # ms
    # record_function regions (Optimizer.step#AdamW.step...) have self time = their Python: framework
    return rows, wall_ms


def profile_plast(w, steps):
    import plast

    with plast.profiler.profile() as prof:
        for _ in range(steps):
            w.step()
    rows = {e.key: e.self_cpu_time_total / 1e3 for e in prof.key_averages()}
    return rows, prof.wall_time_us / 1e3


def breakdown(rows, wall_ms, steps):
    cats = dict.fromkeys(ORDER, 0.0)
    for k, ms in rows.items():
        cats[category(k)] += ms / steps
    cats["outside kernels"] = max(wall_ms / steps - sum(rows.values()) / steps, 0.0)
    return cats


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="gpt", choices=["xor", "mlp", "gpt", "gpt_sdpa"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20, help="profiled steps per framework")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument(
        "--rounds", type=int, default=4, help="the profiled steps are split into this many rounds"
    )
    ap.add_argument("--top", type=int, default=12, help="rows of each framework's own table")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    import run as harness
    import workloads_plast as wp
    import workloads_torch as wt

    spec, _ = harness.load_spec()
    w = harness.workload_spec(spec, args.workload)
    wt.set_threads(args.threads)
    wp.set_threads(args.threads)
    tw = wt.build_train(args.workload, w)
    state, data = tw.state()
    frameworks = {"torch": tw}
    for jit in (False, True):
        pw = wp.build_train(args.workload, w, state, data, jit=jit)
        frameworks[pw.label] = pw

    result = {
        "workload": args.workload,
        "threads": args.threads,
        "steps": args.steps,
        "cpu": harness._cpu_name(),
    }
    for fw in frameworks.values():
        for _ in range(args.warmup):
            fw.step()
    # rounds, each framework in turn, so that load from other processes falls on all three alike
    rounds = max(1, min(args.rounds, args.steps))
    acc = {lb: {"rows": {}, "wall": 0.0, "times": []} for lb in frameworks}
    for r in range(rounds):
        n = args.steps // rounds + (1 if r < args.steps % rounds else 0)
        for label, fw in frameworks.items():
            a = acc[label]
            a["times"].append(time_steps(fw, max(2, n // 2)))
            rows, wall = (profile_torch if label == "torch" else profile_plast)(fw, n)
            a["wall"] += wall
            for k, v in rows.items():
                a["rows"][k] = a["rows"].get(k, 0.0) + v
    for label, a in acc.items():
        rows, wall = a["rows"], a["wall"]
        result[label] = {
            "step_ms": statistics.median(a["times"]),
            "profiled_step_ms": wall / args.steps,
            "categories": breakdown(rows, wall, args.steps),
            "rows": {k: v / args.steps for k, v in sorted(rows.items(), key=lambda kv: -kv[1])},
        }

    labels = list(frameworks)
    print(
        f"# {args.workload}, {args.threads} thread(s), {args.steps} profiled steps; CPU: {result['cpu']}; "
        f"{platform.python_implementation()} {platform.python_version()}"
    )
    head = (
        f"{'ms per step':<40}"
        + "".join(f"{lb:>12}" for lb in labels)
        + f"{'plast/torch':>13}{'jit/torch':>11}"
    )
    print(head)
    print("-" * len(head))
    for cat in ORDER:
        vals = [result[lb]["categories"][cat] for lb in labels]
        if max(vals) < 0.005:
            continue
        r1 = f"{vals[1] / vals[0]:.2f}" if vals[0] > 0.005 else "-"
        r2 = f"{vals[2] / vals[0]:.2f}" if vals[0] > 0.005 else "-"
        print(f"{cat:<40}" + "".join(f"{v:>12.2f}" for v in vals) + f"{r1:>13}{r2:>11}")
    print("-" * len(head))
    for key, name in (("profiled_step_ms", "step, profiled"), ("step_ms", "step, not profiled (median)")):
        vals = [result[lb][key] for lb in labels]
        print(
            f"{name:<40}"
            + "".join(f"{v:>12.2f}" for v in vals)
            + f"{vals[1] / vals[0]:>13.2f}{vals[2] / vals[0]:>11.2f}"
        )
    for lb in labels:
        print(f"\n## {lb}: top {args.top} rows (ms per step, category)")
        for k, v in list(result[lb]["rows"].items())[: args.top]:
            print(f"  {v:8.3f}  {k[:70]:<70}  {category(k)}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
