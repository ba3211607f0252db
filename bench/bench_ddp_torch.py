"""The `ddp` workload (DESIGN §6) in torch: bench_ddp.py's mlp and gpt steps under torch's
DistributedDataParallel over gloo, on 1 and on N processes at the same global batch, one thread each. The torch
side of ``bench/bench_ddp_pair.py``; alone:

    python bench/bench_ddp_torch.py -n 2

Prints, per workload, ms per step (median, the slowest rank's: every step starts at a barrier) in the same
format as bench_ddp.py. torch's DDP starts each bucket's allreduce while backward runs (it overlaps); the
figure is the whole step. Timings are never asserted anywhere.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workloads_torch import GPT  # noqa: E402

GPT_CONFIG = {"vocab_size": 65, "block_size": 64, "n_layer": 4, "n_head": 4, "n_embd": 128, "dropout": 0.0,
              "bias": True}  # fmt: skip


def mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)

    def loss(net, xs, ys):
        return F.cross_entropy(net(torch.from_numpy(xs)), torch.from_numpy(ys))

    return model, x, y, loss, lambda m: torch.optim.Adam(m.parameters(), lr=1e-3)


def gpt():
    torch.manual_seed(0)
    model = GPT(GPT_CONFIG)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 65, (16, 64))
    y = rng.integers(0, 65, (16, 64))

    def loss(net, xs, ys):
        logits = net(torch.from_numpy(xs))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), torch.from_numpy(ys).view(-1))

    return model, x, y, loss, lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)


def run(name, steps, warmup):
    model, x, y, loss_fn, make_opt = {"mlp": mlp, "gpt": gpt}[name]()
    rank, world = dist.get_rank(), dist.get_world_size()
    n = len(x) // world
    xs, ys = x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n]
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = make_opt(ddp)
    times = []
    for i in range(warmup + steps):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(ddp, xs, ys)
        loss.backward()
        opt.step()
        last = loss.item()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return statistics.median(times) * 1e3, nbytes, last


def _rank(rank, world, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for name in args.only.split(","):
        ms, nbytes, loss = run(name, args.steps, args.warmup)
        if rank == 0:
            print(
                f"{name:4s} ranks {world}  {ms:8.2f} ms/step  bytes/step/rank DDP {nbytes if world > 1 else 0:,}  "
                f"last loss {loss:.4f}",
                flush=True,
            )
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", "--nproc", type=int, default=1)
    ap.add_argument("--only", default="mlp,gpt")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    port = 29500 + os.getpid() % 1000
    mp.spawn(_rank, args=(args.nproc, args, port), nprocs=args.nproc, join=True)


if __name__ == "__main__":
    main()
