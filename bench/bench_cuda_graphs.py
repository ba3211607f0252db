"""@plast.jit training steps on a GPU: eager, jit replayed step by step (PLAST_CUDA_GRAPHS=0), and jit replayed
as one CUDA graph per call (kernels/cuda/graphs.py).

    python bench/bench_cuda_graphs.py               # needs plast._core.cuda_driver.is_available()
    python bench/bench_cuda_graphs.py --json out.json

Two workloads: the README's xor model (2-8-1, Adam; launch-bound: a few dozen tiny kernels per step) and a
wider MLP (512-1024-1024-10, Adam, batch 256). Milliseconds per training step (the returned loss read back each
call, so every call waits for its GPU work), medians of --reps runs after warm-up. Reported, never asserted.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

import plast
import plast._core.cuda_driver as cuda


def _model(widths, device):
    nn, optim = plast.nn, plast.optim
    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1]).to(device)
    return model, optim.Adam(model.parameters(), lr=1e-3)


def _step_fn(model, opt):
    loss_fn = plast.nn.MSELoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def time_mode(widths, batch, mode, reps):
    """Median ms per step for mode "eager", "jit-steps" or "jit-graph"."""
    os.environ["PLAST_CUDA_GRAPHS"] = "0" if mode == "jit-steps" else "1"
    plast.manual_seed(0)
    model, opt = _model(widths, "cuda")
    x = plast.randn(batch, widths[0], device="cuda")
    y = plast.randn(batch, widths[-1], device="cuda")
    step = _step_fn(model, opt)
    if mode != "eager":
        step = plast.jit(step)

    def once():
        step(x, y).item()
        plast.reset_transient_arenas()

    for _ in range(5):
        once()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        once()
        ts.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args()
    if not cuda.is_available():
        print(f"bench_cuda_graphs: no GPU here ({cuda.unavailable_reason()}); nothing to time")
        return 0
    from plast.kernels.cuda import graphs

    res = {"device": cuda.device_info().get("name")}
    for name, widths, batch in (("xor", (2, 8, 1), 4), ("mlp", (512, 1024, 1024, 10), 256)):
        row = {}
        for mode in ("eager", "jit-steps", "jit-graph"):
            before = graphs.stats()["launches"]
            row[mode + "_ms"] = time_mode(widths, batch, mode, args.reps)
            row[mode + "_graph_launches"] = graphs.stats()["launches"] - before
        res[name] = row
        print(
            f"{name:4s}  eager {row['eager_ms']:.3f} ms   jit step by step {row['jit-steps_ms']:.3f} ms   "
            f"jit as a CUDA graph {row['jit-graph_ms']:.3f} ms ({row['jit-graph_graph_launches']} launches)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
