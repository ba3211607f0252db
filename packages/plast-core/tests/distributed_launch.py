"""How the distributed tests start ranks: ``python -m plast.distributed.run`` (the launcher users run, over the
mpich wheel's mpiexec) with a hard timeout, or a skip saying what is missing."""

import importlib.util
import os
import subprocess
import sys

import pytest

from plast.distributed import run


def run_ranks(script, args, n=2, timeout=60, env=None):
    """Run ``python script *args`` on `n` ranks; returns the CompletedProcess (stdout and stderr as text). A job
    that runs past `timeout` is killed and fails the test (a hang is a bug)."""
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip('mpi4py is not installed (pip install "./packages/plast-core[mpi]")')
    try:
        run.find_mpiexec()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    cmd = [sys.executable, "-m", "plast.distributed.run", "-n", str(n), str(script), *args]
    full_env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} ran past {timeout} s (a hang):\n{e.stdout}\n{e.stderr}")
