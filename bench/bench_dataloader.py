"""Benchmark plast.data.DataLoader on an in-memory TensorDataset (60,000 x 784 float32 images + int64 labels).

For num_workers 0 and 2 it times whole shuffled epochs at batch 128 (469 batches) and reports batches per
second, microseconds per batch, the time to the first batch (worker start-up included) and the loader's
overhead per batch over the bare numpy gather of the same rows (the issue's target: at most 50 us without
workers). When PyTorch is importable, torch's DataLoader runs the same workload as a peer. Timings are medians
of ``--repeat`` epochs after one warm-up epoch.

    python bench/bench_dataloader.py
    python bench/bench_dataloader.py --repeat 5 --json bench/results/dataloader.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import numpy as np

import plast
from plast.data import DataLoader, TensorDataset

N, D, BATCH = 60_000, 784, 128


def epoch_times(make_loader, repeat: int):
    loader = make_loader()
    t0 = time.perf_counter()
    it = iter(loader)
    next(it)
    first = time.perf_counter() - t0
    for _ in it:  # the rest of the warm-up epoch
        pass
    times, nb = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        nb = 0
        for _ in loader:
            nb += 1
        times.append(time.perf_counter() - t0)
    return statistics.median(times), nb, first


def bare_gather(x, y, repeat: int) -> float:
    """Seconds per epoch for the numpy work alone: permutation, one fancy index per tensor per batch."""
    rng = np.random.default_rng(0)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        perm = rng.permutation(N)
        for s in range(0, N, BATCH):
            idx = perm[s : s + BATCH]
            x[idx], y[idx]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed epochs per figure (median)")
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch peer")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    args = ap.parse_args(argv)

    rng = np.random.default_rng(0)
    x = rng.random((N, D), dtype=np.float32)
    y = rng.integers(0, 10, N)
    ds = TensorDataset(plast.tensor(x), plast.tensor(y))
    base = bare_gather(x, y, args.repeat)

    rows = []
    for nw in args.workers:
        make = lambda nw=nw: DataLoader(
            ds,
            batch_size=BATCH,
            shuffle=True,
            num_workers=nw,
            generator=plast.Generator().manual_seed(0),
            persistent_workers=nw > 0,
        )
        sec, nb, first = epoch_times(make, args.repeat)
        rows.append(
            {
                "impl": "plast",
                "num_workers": nw,
                "batches_per_s": nb / sec,
                "us_per_batch": 1e6 * sec / nb,
                "overhead_us_per_batch": 1e6 * (sec - base) / nb,
                "first_batch_s": first,
            }
        )

    # the loader's own cost per batch: the same loop over 60,000 rows of 4 floats, where the gather is ~free
    small = TensorDataset(plast.tensor(x[:, :4].copy()), plast.tensor(y))
    sec, nb, _ = epoch_times(
        lambda: DataLoader(small, batch_size=BATCH, shuffle=True, generator=plast.Generator().manual_seed(0)),
        args.repeat,
    )
    tiny_us = 1e6 * sec / nb

    torch_note = None
    if not args.no_torch:
        try:
            import torch
            from torch.utils.data import DataLoader as TorchLoader
            from torch.utils.data import TensorDataset as TorchTensorDataset

            torch.set_num_threads(1)
            tds = TorchTensorDataset(torch.from_numpy(x), torch.from_numpy(y))
            for nw in args.workers:
                make = lambda nw=nw: TorchLoader(
                    tds,
                    batch_size=BATCH,
                    shuffle=True,
                    num_workers=nw,
                    persistent_workers=nw > 0,
                    multiprocessing_context="forkserver" if nw else None,
                )
                sec, nb, first = epoch_times(make, args.repeat)
                rows.append(
                    {
                        "impl": f"torch {torch.__version__}",
                        "num_workers": nw,
                        "batches_per_s": nb / sec,
                        "us_per_batch": 1e6 * sec / nb,
                        "overhead_us_per_batch": 1e6 * (sec - base) / nb,
                        "first_batch_s": first,
                    }
                )
        except ImportError:
            torch_note = "torch is not installed"

    print(
        f"TensorDataset {N}x{D} float32 + int64 labels, batch {BATCH}, shuffle; bare numpy gather "
        f"{1e6 * base / (N // BATCH + 1):.1f} us/batch"
    )
    print(
        f"{'impl':<22}{'workers':>8}{'batches/s':>12}{'us/batch':>10}{'overhead us':>13}{'first batch s':>15}"
    )
    for r in rows:
        print(
            f"{r['impl']:<22}{r['num_workers']:>8}{r['batches_per_s']:>12.0f}{r['us_per_batch']:>10.1f}"
            f"{r['overhead_us_per_batch']:>13.1f}{r['first_batch_s']:>15.3f}"
        )
    print(f"loader overhead (60000x4 rows, batch {BATCH}, num_workers=0): {tiny_us:.1f} us/batch")
    if torch_note:
        print(f"(PyTorch peer skipped: {torch_note})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "python": sys.version.split()[0],
                    "machine": platform.machine(),
                    "rows": rows,
                    "bare_gather_s_per_epoch": base,
                    "overhead_us_per_batch_narrow_rows": tiny_us,
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
