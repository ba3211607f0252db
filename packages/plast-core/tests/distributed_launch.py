"""How the distributed tests start ranks: mpiexec from the mpich wheel (next to this Python), with a hard
timeout, or a skip saying what is missing. Shared by plast-core's and plast-nn's distributed tests."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def mpiexec():
    """The mpiexec next to this interpreter (the mpich wheel installs it into the environment's bin/), else the
    one on PATH; skip the test when there is none or mpi4py is missing."""
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip('mpi4py is not installed (pip install "./packages/plast-core[mpi]")')
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.skip('mpiexec not found (the mpich wheel brings it: pip install "./packages/plast-core[mpi]")')
    return found


def run_ranks(script, args, n=2, timeout=60, env=None, auto_cleanup=True):
    """Run ``python script *args`` on `n` ranks; returns the CompletedProcess (stdout and stderr as text).
    A job that runs past `timeout` is killed and fails the test (a hang is a bug)."""
    cmd = [mpiexec()]
    if not auto_cleanup:
        cmd.append("-disable-auto-cleanup")  # the survivors must see the dead rank themselves
    cmd += ["-n", str(n), sys.executable, str(script), *args]
    full_env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} ran past {timeout} s (a hang):\n{e.stdout}\n{e.stderr}")
