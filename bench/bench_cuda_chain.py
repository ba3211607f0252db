"""Fused elementwise chains on CUDA (kernels/cuda/codegen.py): what a chain costs on the host, and on a GPU
what fusing saves.

    python bench/bench_cuda_chain.py                # host side everywhere; the GPU part where one is available
    python bench/bench_cuda_chain.py --json out.json

Host side (any machine): generating a chain's source (microseconds per program), the per-launch Python cost of
run_chain (layout merge, operand classes, argument packing; the launch itself replaced by a no-op), and, with
nvcc, the first-use compile of one generated module (the disk cache makes later processes skip it).
GPU (plast._core.cuda_driver.is_available()): a 6-op and a 7-op chain over 16M float32 elements, fused
(one generated kernel) and unfused (PLAST_FUSION=0: one kernel per op), next to a device-to-device copy of the
output's size. Milliseconds per call, medians of --reps runs. Timings are reported, never asserted.
"""

import argparse
import json
import os
import tempfile
import time

import numpy as np
from timing import median_time

import plast
import plast._core.cuda_driver as cuda
from plast.kernels.cpu import _fused
from plast.kernels.cuda import codegen, loader

PROGRAM = _fused.assemble(
    [("load", 0, 0), ("load", 1, 1), ("mul", 2, 0, 1), ("load", 3, 2), ("add", 2, 2, 3)]
    + [("gelu_tanh", 4, 2), ("store", 0, 4)]
)


def host_side(reps):
    res = {}
    res["generate_us"] = 1e6 * median_time(lambda: codegen.generate(PROGRAM, 3, "cgsc", 2), reps)
    # run_chain's host work with the launch made a no-op (stand-in tensors with the attributes it reads)

    class Dev:
        type = "cuda"

    class Storage:
        address = 1 << 40

    class T:
        def __init__(self, shape, strides):
            self._shape, self._strides, self._offset = shape, strides, 0
            self.dtype, self.device, self._storage = plast.float32, Dev(), Storage()

        def numel(self):
            return int(np.prod(self._shape))

    out = T((4096, 1024), (1024, 1))
    ins = [T((4096, 1024), (1, 4096)), T((1024,), (1,)), T((), ())]
    saved = (codegen.function, loader.launch)
    codegen.function = lambda *a: None
    loader.launch = lambda *a, **k: None
    try:
        res["run_chain_host_us"] = 1e6 * median_time(lambda: codegen.run_chain(PROGRAM, out, ins), reps * 10)
    finally:
        codegen.function, loader.launch = saved
    if loader.find_nvcc():
        with tempfile.TemporaryDirectory() as d:
            os.environ["PLAST_CUDA_CACHE"] = d
            src = codegen.generate(PROGRAM, 3, "cgsc", 2)
            t0 = time.perf_counter()
            loader.compile_source("chain", src, "sm_90", options=codegen.NVCC_OPTIONS)
            res["nvcc_first_use_ms"] = 1e3 * (time.perf_counter() - t0)
            t0 = time.perf_counter()
            loader.compile_source("chain", src, "sm_90", options=codegen.NVCC_OPTIONS)
            res["disk_cache_hit_ms"] = 1e3 * (time.perf_counter() - t0)
    return res


def gpu_side(reps, n=1 << 24):
    drv = cuda.driver()
    rng = np.random.default_rng(0)
    x = plast.tensor(rng.standard_normal((n // 1024, 1024)).astype(np.float32), device="cuda")
    w = plast.tensor(rng.standard_normal(1024).astype(np.float32), device="cuda")
    b = plast.tensor(rng.standard_normal((n // 1024, 1)).astype(np.float32), device="cuda")
    chains = {
        "softplus_relu": lambda: (x.abs() * -1.0).exp().log1p() + x.relu(),  # 6 ops
        "mlp_tail": lambda: ((x * w + b).sigmoid() * 0.5 - x.tanh()).relu(),  # 7 ops, broadcast w and b
    }
    res = {}
    for name, fn in chains.items():
        for fuse in ("1", "0"):
            os.environ["PLAST_FUSION"] = fuse

            def step(fn=fn):
                plast.forward(fn())
                drv.Context.synchronize()
                plast.reset_transient_arenas()

            res[f"{name}_{'fused' if fuse == '1' else 'unfused'}_ms"] = 1e3 * median_time(step, reps)
    os.environ.pop("PLAST_FUSION", None)
    dst = plast.empty(n // 1024, 1024, device="cuda")

    def copy():
        drv.memcpy_dtod(dst._storage.address, x._storage.address, n * 4)
        drv.Context.synchronize()

    res["dtod_copy_ms"] = 1e3 * median_time(copy, reps)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    res = {"host": host_side(args.reps)}
    if cuda.is_available():
        res["gpu"] = gpu_side(args.reps)
    else:
        res["gpu"] = f"skipped: {cuda.unavailable_reason()}"
    for section, vals in res.items():
        if isinstance(vals, str):
            print(f"{section}: {vals}")
            continue
        for k, v in vals.items():
            print(f"{section:5s} {k:28s} {v:10.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
