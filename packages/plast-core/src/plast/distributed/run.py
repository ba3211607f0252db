"""``python -m plast.distributed.run -n N script.py [args...]``: start N ranks of a script with ``mpiexec`` (the
one the mpich wheel installs next to this Python; torchrun's role).

The ranks run with ``-disable-auto-cleanup``: when one dies, mpiexec does not kill the others at once, so they
report a DistTimeoutError naming the dead rank within their timeout (``--timeout``, PLAST_DIST_TIMEOUT) and then
abort the job. Without ``OMP_NUM_THREADS`` set, each rank gets the machine's cores divided by N.

    python -m plast.distributed.run -n 2 train.py --epochs 3
    python -m plast.distributed.run -n 4 --hostfile hosts.txt -m mypkg.train
"""

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path


def find_mpiexec():
    """The mpiexec of this Python's environment (the mpich wheel puts it beside the interpreter), else the one on
    PATH; FileNotFoundError naming the extra to install when there is none."""
    here = Path(sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    found = shutil.which("mpiexec")
    if found is None:
        raise FileNotFoundError(
            'mpiexec not found: install plast-core\'s `mpi` extra (pip install "./packages/plast-core[mpi]"), '
            "which brings mpi4py and the mpich library with its mpiexec"
        )
    return found


def command(nproc, argv, hostfile=None, module=False):
    """The mpiexec command line that starts `nproc` ranks of ``python argv...`` (``python -m argv...`` with
    `module`)."""
    if nproc < 1:
        raise ValueError(f"the number of ranks must be at least 1, got {nproc}")
    cmd = [find_mpiexec(), "-disable-auto-cleanup", "-n", str(nproc)]
    if hostfile is not None:
        cmd += ["-f", str(hostfile)]
    return cmd + [sys.executable] + (["-m"] if module else []) + list(argv)


def environment(nproc, timeout=None):
    """The ranks' environment: this one, plus an even share of the cores per rank and the timeout."""
    env = dict(os.environ)
    if "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // nproc))
    if timeout is not None:
        env["PLAST_DIST_TIMEOUT"] = str(timeout)
    return env


def main(args=None):
    parser = argparse.ArgumentParser(
        prog="python -m plast.distributed.run",
        description="Start N ranks of a Python script with mpiexec (plast.distributed's launcher).",
    )
    parser.add_argument("-n", "--nproc", "--nproc-per-node", type=int, default=1, help="number of ranks")
    parser.add_argument("--hostfile", help="mpiexec host file, for ranks on several machines")
    parser.add_argument("--timeout", type=float, help="seconds a rank waits for its peers (default 60)")
    parser.add_argument("-m", dest="module", action="store_true", help="run a module, as python -m")
    parser.add_argument("script", help="the script (or module, with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(args)
    try:
        cmd = command(ns.nproc, [ns.script] + ns.script_args, ns.hostfile, ns.module)
    except (FileNotFoundError, ValueError) as e:
        parser.error(str(e))
    return subprocess.call(cmd, env=environment(ns.nproc, ns.timeout))


if __name__ == "__main__":
    sys.exit(main())
