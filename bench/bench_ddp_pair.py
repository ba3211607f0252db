"""The `ddp` workload side by side: plast (bench_ddp.py, MPI ranks) and torch (bench_ddp_torch.py, gloo), each on
1 and 2 ranks of one thread at the same global batch, in one run, alternating so that both see the same machine:

    python bench/bench_ddp_pair.py [--rounds 2]

plast runs eagerly and under @plast.jit (mlp_jit, gpt_jit). Prints ms per step for each, the scaling efficiency
t(1) / (2 t(2)) (1.0 is perfect), plast's share of the 2-rank step spent waiting for the allreduces, and
plast/torch per rank count. Timings are never asserted.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINE = re.compile(r"^(\w+)\s+ranks (\d)\s+([\d.]+) ms/step(?:\s+allreduce wait\s+([\d.]+) ms)?")


def _run(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    found = {}
    for line in out.stdout.splitlines():
        m = LINE.match(line.strip())
        if m:
            found[(m[1], int(m[2]))] = (float(m[3]), float(m[4]) if m[4] else None)
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    steps = ["--steps", str(args.steps)]
    res = {}
    for _ in range(args.rounds):
        for n in (1, 2):
            plast_cmd = [
                sys.executable,
                "-m",
                "plast.distributed.run",
                "-n",
                str(n),
                str(HERE / "bench_ddp.py"),
            ]
            torch_cmd = [sys.executable, str(HERE / "bench_ddp_torch.py"), "-n", str(n)]
            runs = (
                ("plast", plast_cmd + steps),
                ("plast", plast_cmd + steps + ["--jit"]),
                ("torch", torch_cmd + steps),
            )
            for lib, cmd in runs:
                for (name, ranks), v in _run(cmd).items():
                    res.setdefault((lib, name, ranks), []).append(v)
    print(
        f"{'workload':8s} {'lib':6s} {'1 rank ms':>10s} {'2 ranks ms':>11s} {'efficiency':>10s} {'wait %':>7s}"
    )
    for name in ("mlp", "gpt"):
        t = {}
        for lib, key in (("plast", name), ("plast", name + "_jit"), ("torch", name)):
            one = statistics.median(v[0] for v in res[(lib, key, 1)])
            two = statistics.median(v[0] for v in res[(lib, key, 2)])
            waits = [v[1] for v in res[(lib, key, 2)] if v[1] is not None]
            wait = f"{100 * statistics.median(waits) / two:6.1f}" if waits else "     -"
            t[(lib, key)] = (one, two)
            print(f"{key:8s} {lib:6s} {one:10.2f} {two:11.2f} {one / (2 * two):10.2f} {wait:>7s}")
        for key in (name, name + "_jit"):
            p, tt = t[("plast", key)], t[("torch", name)]
            print(f"{key:8s} plast/torch: 1 rank {p[0] / tt[0]:.2f}, 2 ranks {p[1] / tt[1]:.2f}")


if __name__ == "__main__":
    main()
