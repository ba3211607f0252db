"""Instructions per eager training step, counted by valgrind's callgrind: a figure that does not move with the
machine's load (timings on the shared development machine move by 2x from one hour to the next).

    python bench/count_instructions.py                  # xor, full step
    python bench/count_instructions.py --part forward   # zero_grad + model + loss (+ reset), no backward/step
    python bench/count_instructions.py --steps 3000 --keep /tmp/cg   # keep the callgrind files to annotate

Each part runs in two child processes under callgrind, one with `--steps` extra steps and one with a fifth of
them, after the same warm-up; the difference divided by the step difference is the per-step count (imports,
warm-up and start-up cancel out). Hash randomization and numpy's BLAS threads (whose idle loop callgrind counts)
are turned off so two runs give the same number. Needs valgrind; takes about a minute per part.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = ("step", "forward", "model", "forward_backward", "optimizer")

CHILD = r"""
import json, sys
sys.path.insert(0, {here!r})
import plast, workloads_plast as wp
spec = dict(json.load(open({spec!r}))[{workload!r}]) if {spec!r} else {{}}
spec.setdefault("seed", 0)
plast.set_num_threads(1)
w = wp.build_train({workload!r}, spec)
opt, model, lossfn, x, y = w.opt, w.model, w.lossfn, w.x, w.y

def step():
    w.step()

def forward():
    opt.zero_grad(); lossfn(model(x), y); plast.reset_transient_arenas()

def model_():
    model(x); plast.reset_transient_arenas()

def forward_backward():
    opt.zero_grad(); lossfn(model(x), y).backward(); plast.reset_transient_arenas()

def optimizer():
    opt.step()

fn = {{"step": step, "forward": forward, "model": model_, "forward_backward": forward_backward,
      "optimizer": optimizer}}[{part!r}]
forward_backward()
for _ in range(100):
    fn()
for _ in range(int(sys.argv[1])):
    fn()
"""


def _spec_path():
    p = HERE.parent.parent / "shared" / "bench" / "workloads.json"
    return str(p) if p.is_file() else ""


def _count(code, steps, out):
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", code]
    r = subprocess.run(
        cmd + [str(steps)],
        capture_output=True,
        text=True,
        env=env,
    )
    m = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode != 0 or m is None:
        raise RuntimeError(f"callgrind run failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="xor")
    ap.add_argument("--part", choices=PARTS, action="append", help="what to count (default: step)")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--keep", help="a folder to keep the callgrind output files in (callgrind_annotate them)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("count_instructions.py needs valgrind (Debian: apt install valgrind)")
    parts = args.part or ["step"]
    keep = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="plast-cg-"))
    keep.mkdir(parents=True, exist_ok=True)
    few = max(1, args.steps // 5)
    result = {}
    for part in parts:
        code = CHILD.format(here=str(HERE), spec=_spec_path(), workload=args.workload, part=part)
        lo = _count(code, few, keep / f"{args.workload}-{part}-{few}.cg")
        hi = _count(code, args.steps, keep / f"{args.workload}-{part}-{args.steps}.cg")
        result[part] = (hi - lo) / (args.steps - few)
        print(f"{args.workload} {part}: {result[part]:,.0f} instructions per call")
    if not args.keep:
        shutil.rmtree(keep, ignore_errors=True)
    print(json.dumps({"workload": args.workload, "instructions_per_call": result}))


if __name__ == "__main__":
    main()
