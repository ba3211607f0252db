"""The `ddp` workload (DESIGN §6): mlp and gpt training steps on 1 and on N MPI ranks at the same global batch,
with DistributedDataParallel (and DiLoCo's bytes for comparison). Run it under the launcher:

    python -m plast.distributed.run -n 1 bench/bench_ddp.py      # 1 rank: the whole batch
    python -m plast.distributed.run -n 2 bench/bench_ddp.py      # 2 ranks: half the batch each

Rank 0 prints ms per step (median of the timed steps), the part of it spent waiting for the gradient
allreduces (plast's backward realizes every gradient at its end, so none of it overlaps backward today), and
the bytes each rank sends per step: DDP's allreduced gradients, DiLoCo's pseudo-gradients every H steps.
Timings are never asserted anywhere.
"""

import argparse
import statistics
import time

import numpy as np

import plast
import plast.distributed as dist
import plast.nn as nn
import plast.optim as optim


def mlp():
    plast.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)

    def loss(net, xs, ys):
        return plast.cross_entropy(net(plast.tensor(xs)), plast.tensor(ys))

    return model, x, y, loss, lambda m: optim.Adam(m.parameters(), lr=1e-3)


def gpt():
    plast.manual_seed(0)
    cfg = nn.GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128, gelu_approximate="tanh")
    model = nn.GPT(cfg)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 65, (16, 64))
    y = rng.integers(0, 65, (16, 64))

    def loss(net, xs, ys):
        return net(plast.tensor(xs), plast.tensor(ys))[1]

    return model, x, y, loss, lambda m: optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)


class _Timed:
    """Wraps DDP's end-of-backward callback to time the wait for the allreduces."""

    def __init__(self, ddp):
        self.seconds = 0.0
        inner = ddp._finish_pass

        def timed():
            t0 = time.perf_counter()
            inner()
            self.seconds += time.perf_counter() - t0

        ddp._finish_pass = timed


def run(name, steps, warmup):
    model, x, y, loss_fn, make_opt = {"mlp": mlp, "gpt": gpt}[name]()
    rank, world = dist.get_rank(), dist.get_world_size()
    n = len(x) // world
    xs, ys = x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n]
    ddp = nn.parallel.DistributedDataParallel(model)
    timer = _Timed(ddp)
    opt = make_opt(ddp)
    times, comm = [], []
    for i in range(warmup + steps):
        dist.barrier()  # every rank starts the step together: the step time is the slowest rank's
        t0 = time.perf_counter()
        c0 = timer.seconds
        opt.zero_grad()
        loss = loss_fn(ddp, xs, ys)
        loss.backward()
        opt.step()
        last = loss.item()
        plast.reset_transient_arenas()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
            comm.append(timer.seconds - c0)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return statistics.median(times) * 1e3, statistics.median(comm) * 1e3, nbytes, last


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="mlp,gpt")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--diloco-h", type=int, default=50)
    args = ap.parse_args()
    dist.init_process_group("mpi")
    world = dist.get_world_size()
    for name in args.only.split(","):
        ms, comm_ms, nbytes, loss = run(name, args.steps, args.warmup)
        if dist.get_rank() == 0:
            print(
                f"{name:4s} ranks {world}  {ms:8.2f} ms/step  allreduce wait {comm_ms:6.2f} ms "
                f"({100 * comm_ms / ms:4.1f}%, overlapped with backward: 0%)  "
                f"bytes/step/rank DDP {nbytes if world > 1 else 0:,}  DiLoCo(H={args.diloco_h}) "
                f"{nbytes // args.diloco_h if world > 1 else 0:,}  last loss {loss:.4f}",
                flush=True,
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
