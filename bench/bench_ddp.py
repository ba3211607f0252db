"""The `ddp` workload (DESIGN §6): mlp and gpt training steps on 1 and on N MPI ranks at the same global batch,
with DistributedDataParallel (and DiLoCo's bytes for comparison). Run it under the launcher:

    python -m plast.distributed.run -n 1 bench/bench_ddp.py      # 1 rank: the whole batch
    python -m plast.distributed.run -n 2 bench/bench_ddp.py      # 2 ranks: half the batch each
    python -m plast.distributed.run -n 2 bench/bench_ddp.py --jit  # the step under @plast.jit (named mlp_jit, ...)

Rank 0 prints ms per step (median of the timed steps), the part of it spent waiting for the gradient
allreduces (eager only: plast's backward realizes every gradient at its end, so none of it overlaps backward
today; a jitted step's allreduces are plan steps, not timed apart), and
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
        return plast.cross_entropy(net(xs), ys)

    return model, x, y, loss, lambda m: optim.Adam(m.parameters(), lr=1e-3)


def gpt():
    plast.manual_seed(0)
    cfg = nn.GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128, gelu_approximate="tanh")
    model = nn.GPT(cfg)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 65, (16, 64))
    y = rng.integers(0, 65, (16, 64))

    def loss(net, xs, ys):
        return net(xs, ys)[1]

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


def run(name, steps, warmup, use_jit=False):
    model, x, y, loss_fn, make_opt = {"mlp": mlp, "gpt": gpt}[name]()
    rank, world = dist.get_rank(), dist.get_world_size()
    n = len(x) // world
    xs, ys = plast.tensor(x[rank * n : (rank + 1) * n]), plast.tensor(y[rank * n : (rank + 1) * n])
    ddp = nn.parallel.DistributedDataParallel(model)
    timer = _Timed(ddp)
    opt = make_opt(ddp)

    def step(xs, ys):
        opt.zero_grad()
        loss = loss_fn(ddp, xs, ys)
        loss.backward()
        opt.step()
        return loss

    if use_jit:
        step = plast.jit(step)
    times, comm = [], []
    for i in range(warmup + steps):
        dist.barrier()  # every rank starts the step together: the step time is the slowest rank's
        t0 = time.perf_counter()
        c0 = timer.seconds
        last = step(xs, ys).item()
        plast.reset_transient_arenas()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
            comm.append(None if use_jit else timer.seconds - c0)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    wait = None if use_jit else statistics.median(comm) * 1e3
    return statistics.median(times) * 1e3, wait, nbytes, last


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="mlp,gpt")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--diloco-h", type=int, default=50)
    ap.add_argument("--jit", action="store_true", help="run the step under @plast.jit")
    args = ap.parse_args()
    dist.init_process_group("mpi")
    world = dist.get_world_size()
    for name in args.only.split(","):
        ms, comm_ms, nbytes, loss = run(name, args.steps, args.warmup, args.jit)
        if dist.get_rank() == 0:
            wait = "" if comm_ms is None else (
                f"allreduce wait {comm_ms:6.2f} ms ({100 * comm_ms / ms:4.1f}%, overlapped with backward: 0%)  "
            )  # fmt: skip
            print(
                f"{name + ('_jit' if args.jit else ''):7s} ranks {world}  {ms:8.2f} ms/step  {wait}"
                f"bytes/step/rank DDP {nbytes if world > 1 else 0:,}  DiLoCo(H={args.diloco_h}) "
                f"{nbytes // args.diloco_h if world > 1 else 0:,}  last loss {loss:.4f}",
                flush=True,
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
