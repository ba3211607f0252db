"""`plast train`'s default step against the same model, data and optimizer written for torch, in one run.

    python bench/bench_train.py [--steps 40] [--rounds 3] [--threads N]

plast: the default config's GPT (4 layers, 4 heads, 128 wide, block 128, vocab 1024, dropout 0.1, no biases) on
batches of 32 windows of `plast train`'s data (the BPE-tokenized python docs), AdamW in nanoGPT's two groups (lr
2e-3, betas 0.9/0.99, weight decay 0.1), gradient clipping at 1.0, warm-up/cosine learning rate: the trainer's
own step (plast.experiment.trainer, jitted as `plast train` runs it, and eager). torch: the same model written
in torch here (nanoGPT's architecture and parameter names, exact GELU, scaled_dot_product_attention), started
from plast's initial weights, fed the same batches, with torch.optim.AdamW and clip_grad_norm_. Each round times
`--steps` steps of each mode after a warm-up, each mode in a process of its own; prints medians of the per-round
medians, and plast/torch. The two start from the same weights; their losses differ only through dropout's random
masks. Timings are never asserted.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as F

import plast
from plast.experiment.config import load_config
from plast.experiment.trainer import Trainer, WarmupCosine


class _Attn(tnn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = tnn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)
        self.c_proj = tnn.Linear(c.n_embd, c.n_embd, bias=c.bias)
        self.resid_dropout = tnn.Dropout(c.dropout)
        self.n_head, self.n_embd, self.p = c.n_head, c.n_embd, c.dropout

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True
        )
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class _Block(tnn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = tnn.LayerNorm(c.n_embd, bias=c.bias)
        self.attn = _Attn(c)
        self.ln_2 = tnn.LayerNorm(c.n_embd, bias=c.bias)
        self.mlp = tnn.Sequential()
        self.mlp.c_fc = tnn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
        self.mlp.gelu = tnn.GELU()
        self.mlp.c_proj = tnn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)
        self.mlp.dropout = tnn.Dropout(c.dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TorchGPT(tnn.Module):
    """plast.nn.GPT's architecture (nanoGPT's) in torch, with the same parameter names."""

    def __init__(self, c):
        super().__init__()
        self.transformer = tnn.ModuleDict(
            dict(
                wte=tnn.Embedding(c.vocab_size, c.n_embd),
                wpe=tnn.Embedding(c.block_size, c.n_embd),
                drop=tnn.Dropout(c.dropout),
                h=tnn.ModuleList([_Block(c) for _ in range(c.n_layer)]),
                ln_f=tnn.LayerNorm(c.n_embd, bias=c.bias),
            )
        )
        self.lm_head = tnn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as nanoGPT's

    def forward(self, idx, targets):
        tr = self.transformer
        x = tr.drop(tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1])))
        for blk in tr.h:
            x = blk(x)
        logits = self.lm_head(tr.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def _torch_twin(pmodel, cfg):
    from plast.nn import GPTConfig

    m = cfg.model
    c = GPTConfig(block_size=m.block_size, vocab_size=pmodel.config.vocab_size, n_layer=m.n_layer,
                  n_head=m.n_head, n_embd=m.n_embd, dropout=m.dropout, bias=m.bias)  # fmt: skip
    model = TorchGPT(c)
    state = {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in pmodel.state_dict().items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not [k for k in missing if k != "lm_head.weight"], missing
    return model


def _torch_step(model, cfg, total_steps):
    o = cfg.optim
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": o.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=o.lr, betas=(o.beta1, o.beta2))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, WarmupCosine(o.warmup_steps, total_steps, o.min_lr / o.lr))

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, o.grad_clip)
        opt.step()
        sched.step()
        return loss.item()

    return step


def _time(step, batches, n, warmup):
    for x, y in batches[:warmup]:
        step(x, y)
    times = []
    for x, y in batches[warmup : warmup + n]:
        t0 = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


MODES = ("plast jit", "plast eager", "torch eager")


def _one(mode, steps, warmup):
    """Time `steps` steps of one mode in this process; returns the median ms per step."""
    cfg = load_config(overrides=["train.sample_tokens=0", "run.plot=false", "run.dir=/tmp/plast-bench-train",
                                 f"train.jit={mode == 'plast jit'}"])  # fmt: skip
    t = Trainer(cfg, quiet=True)
    t.ranks, t.is_main = None, True
    t._setup_run()
    t._setup()
    it = iter(t.loader)
    batches = [next(it) for _ in range(warmup + steps)]
    if mode.startswith("torch"):
        batches = [(torch.from_numpy(x.numpy().astype(np.int64)), torch.from_numpy(y.numpy().astype(np.int64)))
                   for x, y in batches]  # fmt: skip
        return _time(_torch_step(_torch_twin(t.model, cfg), cfg, cfg.train.max_steps), batches, steps, warmup)

    def pstep(x, y):
        loss, _ = t._train_step(x, y)
        t.scheduler.step()
        v = loss.item()
        plast.reset_transient_arenas()
        return v

    return _time(pstep, batches, steps, warmup)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="threads for both (default: plast's default)")
    ap.add_argument(
        "--one", choices=MODES, help=argparse.SUPPRESS
    )  # a child: time one mode, print its median
    args = ap.parse_args()
    if args.threads:
        plast.set_num_threads(args.threads)
    torch.set_num_threads(args.threads or plast.get_num_threads())
    if args.one:
        print(f"MEDIAN_MS {_one(args.one, args.steps, args.warmup)!r}")
        return
    # Each mode runs in a process of its own (two trainers in one process shared plast's global state, and the
    # eager figure came out 15x its standalone value), the modes alternating round by round.
    cfg = load_config(overrides=["train.sample_tokens=0", "run.plot=false"])
    res = {k: [] for k in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            cmd = [
                sys.executable,
                __file__,
                "--one",
                mode,
                "--steps",
                str(args.steps),
                "--warmup",
                str(args.warmup),
            ]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            res[mode].append(float(out.rsplit("MEDIAN_MS", 1)[1]))
    print(f"threads: plast {plast.get_num_threads()}, torch {torch.get_num_threads()}; "
          f"{cfg.train.batch_size} x {cfg.model.block_size} tokens per step")  # fmt: skip
    med = {k: statistics.median(v) for k, v in res.items()}
    for name, ms in med.items():
        tok_s = cfg.train.batch_size * cfg.model.block_size / (ms / 1e3)
        print(f"{name:12s} {ms:8.2f} ms/step  {tok_s / 1e3:6.1f}k tok/s  (rounds: "
              + ", ".join(f"{v:.1f}" for v in res[name]) + ")")  # fmt: skip
    for mode in ("jit", "eager"):
        print(f"plast {mode} / torch eager: {med[f'plast {mode}'] / med['torch eager']:.2f}")
    assert math.isfinite(med["torch eager"])


if __name__ == "__main__":
    main()
