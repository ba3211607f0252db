"""Recurrent layers on the CPU: plast.nn.LSTM / GRU (a fused cell op per step, plast.fused_lstm_cell /
fused_gru_cell, after the h @ W_hh^T addmm; Python loop over time) against torch.nn's, from the same weights.

    python bench/bench_rnn.py                  # T=35, B=20, in=64, hidden=128, 1 and 2 layers, 1 thread
    python bench/bench_rnn.py --threads 2 --hidden 256

Columns (ms, median over interleaved rounds, so background load hits every implementation alike):
  fwd        forward under no_grad, output realized
  train      forward + backward of the mean square of the output + an SGD step (plast eager and @plast.jit)
Timings are reported, never asserted.
"""

import argparse
import time

import numpy as np
import torch

import plast
import plast.nn as nn


def _median_interleaved(fns, rounds):
    times = {k: [] for k in fns}
    for f in fns.values():
        f()
        f()
    for _ in range(rounds):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: 1e3 * float(np.median(v)) for k, v in times.items()}


def bench(kind, T, B, n_in, H, layers, rounds):
    x = np.random.default_rng(0).standard_normal((T, B, n_in)).astype(np.float32)
    tm = getattr(torch.nn, kind)(n_in, H, layers)
    pm = getattr(nn, kind)(n_in, H, layers)
    pm.load_state_dict({k: plast.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tx, px = torch.tensor(x), plast.tensor(x)
    topt = torch.optim.SGD(tm.parameters(), lr=1e-3)
    popt = plast.optim.SGD(pm.parameters(), lr=1e-3)

    def t_fwd():
        with torch.no_grad():
            tm(tx)[0].sum().item()

    def p_fwd():
        with plast.no_grad():
            pm(px)[0].sum().item()

    def t_train():
        topt.zero_grad()
        out, _ = tm(tx)
        (out * out).mean().backward()
        topt.step()

    def p_step(xx):
        popt.zero_grad()
        out, _ = pm(xx)
        loss = (out * out).mean()
        loss.backward()
        popt.step()
        return loss

    p_jit = plast.jit(p_step)
    r = _median_interleaved(
        {
            "torch fwd": t_fwd,
            "plast fwd": p_fwd,
            "torch train": t_train,
            "plast train": lambda: p_step(px).item(),
            "plast jit train": lambda: p_jit(px).item(),
        },
        rounds,
    )
    t_f, t_t = r["torch fwd"], r["torch train"]
    print(
        f"{kind:4s} layers={layers}: fwd torch {t_f:7.1f}  plast {r['plast fwd']:7.1f} ({r['plast fwd'] / t_f:.2f}x) | "
        f"train torch {t_t:7.1f}  plast {r['plast train']:7.1f} ({r['plast train'] / t_t:.2f}x)  "
        f"jit {r['plast jit train']:7.1f} ({r['plast jit train'] / t_t:.2f}x)"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--T", type=int, default=35)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--input", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    plast.set_num_threads(a.threads)
    print(f"T={a.T} B={a.batch} in={a.input} hidden={a.hidden}, {a.threads} thread(s), ms per call")
    for kind in ("LSTM", "GRU"):
        for layers in (1, 2):
            bench(kind, a.T, a.batch, a.input, a.hidden, layers, a.rounds)


if __name__ == "__main__":
    main()
