"""DiLoCo against DDP on `plast train`'s default data and model (DESIGN §7): the same global batch on N MPI ranks,
the final validation loss and the bytes each rank sent. Run it under the launcher:

    python -m plast.distributed.run -n 2 bench/bench_diloco.py --steps 300 --inner-steps 50

Each rank trains on its own share of every global batch (AdamW, constant lr, no clipping: the comparison is of
the two ways of combining the ranks, not a full `plast train` run); rank 0 prints one line per strategy.
"""

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import plast
import plast.distributed as dist
import plast.nn as nn
import plast.optim as optim
from plast.experiment.config import load_config
from plast.experiment.trainer import build_model, prepare_data


def batches(ids, steps, batch, block, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        starts = rng.integers(0, len(ids) - block - 1, batch)
        x = np.stack([ids[s : s + block] for s in starts]).astype(np.int64)
        y = np.stack([ids[s + 1 : s + block + 1] for s in starts]).astype(np.int64)
        yield x, y


def val_loss(model, data, block, batches_n=8):
    model.eval()
    with plast.no_grad():
        losses = [
            model(plast.tensor(x), plast.tensor(y))[1].item()
            for x, y in batches(data.val_ids, batches_n, 16, block, seed=123)
        ]
    model.train()
    return float(np.mean(losses))


def train(strategy, cfg, data, args):
    rank, world = dist.get_rank(), dist.get_world_size()
    plast.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, data.tokenizer.vocab_size)
    lr, wd, betas = cfg.optim.lr, cfg.optim.weight_decay, (cfg.optim.beta1, cfg.optim.beta2)
    if strategy == "ddp":
        net = nn.parallel.DistributedDataParallel(model)
        opt = optim.AdamW(net.parameters(), lr=lr, betas=betas, weight_decay=wd)
    else:
        net = model
        inner = optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=wd)
        opt = optim.DiLoCo(model.parameters(), inner, inner_steps=args.inner_steps)
    n = args.batch // world
    t0 = time.perf_counter()
    block = cfg.model.block_size
    for x, y in batches(data.train_ids, args.steps, args.batch, block, seed=cfg.train.seed):
        opt.zero_grad()
        _, loss = net(plast.tensor(x[rank * n : (rank + 1) * n]), plast.tensor(y[rank * n : (rank + 1) * n]))
        loss.backward()
        opt.step()
        plast.reset_transient_arenas()
    seconds = time.perf_counter() - t0
    nparams = sum(p.numel() for p in model.parameters())
    sent = args.steps * nparams * 4 if strategy == "ddp" else opt.bytes_sent
    return val_loss(model, data, block), sent, seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32, help="global batch (split over the ranks)")
    ap.add_argument("--inner-steps", type=int, default=50)
    ap.add_argument("--only", default="ddp,diloco")
    args = ap.parse_args()
    dist.init_process_group("mpi")
    cfg = load_config()
    data = prepare_data(
        cfg.data, cache_dir=Path(tempfile.gettempdir()) / "plast-bench-cache", log=lambda *a: None
    )
    for strategy in args.only.split(","):
        loss, sent, seconds = train(strategy, cfg, data, args)
        if dist.get_rank() == 0:
            label = strategy if strategy == "ddp" else f"diloco(H={args.inner_steps})"
            print(
                f"{label:14s} ranks {dist.get_world_size()}  steps {args.steps}  val loss {loss:.4f}  "
                f"bytes sent per rank {sent:,}  ({seconds:.0f} s)",
                flush=True,
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
