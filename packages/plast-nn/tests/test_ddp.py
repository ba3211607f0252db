"""DistributedDataParallel and DiLoCo on 2 MPI ranks (the checks are in ddp_checks.py; one mpiexec launch runs
them all, since starting the ranks costs more than a check): DDP on half batches equals 1 process on the whole
batch after 20 AdamW steps of a small GPT, buckets in reverse order with gradients as bucket views, no_sync
accumulation equals one big batch, find_unused_parameters, and DiLoCo (H=1, outer lr 1, momentum 0) equals DDP."""

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

CHECKS = Path(__file__).with_name("ddp_checks.py")
NAMES = ["ddp", "buckets", "no_sync", "unused", "diloco"]


def test_ddp_and_diloco_on_two_ranks():
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip('mpi4py is not installed (pip install "./packages/plast-core[mpi]")')
    from plast.distributed import run

    try:
        cmd = run.command(2, [str(CHECKS), ",".join(NAMES)])
    except FileNotFoundError as e:
        pytest.skip(str(e))
    env = dict(os.environ, OMP_NUM_THREADS="1", PLAST_DIST_TIMEOUT="30")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the ranks ran past 120 s (a hang):\n{e.stdout}\n{e.stderr}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for name in NAMES:
        assert out.count(f"ok {name}") == 2, out


def test_ddp_needs_an_initialized_process_group():
    import plast.distributed as dist
    import plast.nn as nn

    if dist.is_initialized():
        pytest.skip("a process group is initialized in this process")
    with pytest.raises(dist.DistError, match="init_process_group"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
