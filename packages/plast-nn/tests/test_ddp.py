"""DistributedDataParallel and DiLoCo on 2 MPI ranks (the checks are in ddp_checks.py; one mpiexec launch runs
them all, since starting the ranks costs more than a check): DDP on half batches equals 1 process on the whole
batch after 20 AdamW steps of a small GPT, buckets in reverse order with gradients as bucket views, no_sync
accumulation equals one big batch, find_unused_parameters, DiLoCo (H=1, outer lr 1, momentum 0) equals DDP, and
DDP under @plast.jit (its allreduces are plan steps) equals eager DDP."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECKS = Path(__file__).with_name("ddp_checks.py")
NAMES = ["ddp", "buckets", "no_sync", "unused", "diloco", "jit"]


def _launch(n, args, env, timeout):
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip('mpi4py is not installed (pip install "./packages/plast-core[mpi]")')
    from plast.distributed import run

    try:
        run.find_mpiexec()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    cmd = [sys.executable, "-m", "plast.distributed.run", "-n", str(n), str(CHECKS), *args]
    env = dict(os.environ, OMP_NUM_THREADS="1", **env)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the ranks ran past {timeout} s (a hang):\n{e.stdout}\n{e.stderr}")


def test_ddp_and_diloco_on_two_ranks():
    proc = _launch(2, [",".join(NAMES)], {"PLAST_DIST_TIMEOUT": "30"}, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for name in NAMES:
        assert out.count(f"ok {name}") == 2, out


def test_killed_rank_is_named_and_the_last_checkpoint_resumes_on_another_number_of_ranks(tmp_path):
    ckpt = tmp_path / "ckpt.safetensors"
    env = {"PLAST_DIST_TIMEOUT": "20", "CKPT": str(ckpt)}
    crash = _launch(2, ["crash"], env, timeout=60)
    out = crash.stdout + crash.stderr
    assert crash.returncode != 0 and "plast.distributed.run: rank 1 (pid" in out, out
    assert ckpt.exists()
    # one rank takes over from the checkpoint of step 6 (global batch unchanged) and ends where 2 ranks would
    resume = _launch(1, ["resume"], env, timeout=60)
    out = resume.stdout + resume.stderr
    assert resume.returncode == 0 and "ok resume" in out, out


def test_ddp_needs_an_initialized_process_group():
    import plast.distributed as dist
    import plast.nn as nn

    if dist.is_initialized():
        pytest.skip("a process group is initialized in this process")
    with pytest.raises(dist.DistError, match="init_process_group"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
