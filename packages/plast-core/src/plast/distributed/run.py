"""``python -m plast.distributed.run -n N script.py [args...]``: start N ranks of a script with ``mpiexec`` (the
one the mpich wheel installs next to this Python; torchrun's role).

When a rank dies (killed, or crashed in native code), mpiexec stops the others at once and names only a process
id; the launcher says which rank it was (each rank keeps a socket to the launcher open: see _Watch). A rank that hangs is found by its peers instead: their waits time out
(``--timeout``, PLAST_DIST_TIMEOUT; 60 s) with a DistTimeoutError naming it, and the job aborts. Without
``OMP_NUM_THREADS`` set, each rank gets the machine's cores divided by N.

    python -m plast.distributed.run -n 2 train.py --epochs 3
    python -m plast.distributed.run -n 4 --hostfile hosts.txt -m mypkg.train
"""

import argparse
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# mpiexec (hydra)'s report of the first process that failed: "PID 5486 RUNNING AT host" ... "EXIT CODE: 9"
_EXIT_CODE = re.compile(rb"EXIT CODE: (\d+)")


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
    cmd = [find_mpiexec(), "-n", str(nproc)]
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


def _pump(src, dst, seen):
    """Copy a stream of mpiexec to ours line by line, noting the exit code hydra reports for a failed process."""
    for line in iter(src.readline, b""):
        dst.write(line)
        dst.flush()
        m = _EXIT_CODE.search(line)
        if m and "code" not in seen:
            seen["code"] = int(m.group(1))


class _Watch:
    """Which ranks ended without finishing, in the order they ended. Each rank connects to a Unix socket the
    launcher listens on (``PLAST_DIST_RUN_SOCKET``) when it initializes, says its rank, and says "exit" when it
    ends on its own; the kernel closes a dead process's socket at once, before mpiexec has even noticed the death
    and stopped the others, so the first connection to close without "exit" is the rank that died."""

    def __init__(self, path):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(128)
        self.conns = {}  # socket -> [bytes read, rank or None, finished]
        self.died = []  # [(rank, pid)] in the order their connections closed, one entry per wake-up
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            ready, _, _ = select.select([self.listener, *self.conns], [], [], 0.05)
            ended = []
            for s in ready:
                if s is self.listener:
                    conn, _ = s.accept()
                    self.conns[conn] = [b"", None, None, False]
                    continue
                data = s.recv(4096)
                state = self.conns[s]
                if data:
                    state[0] += data
                    lines = state[0].split(b"\n")
                    if state[1] is None and len(lines) > 1:
                        rank, pid = lines[0].split()
                        state[1], state[2] = int(rank), int(pid)
                    state[3] = state[3] or b"exit" in lines[1:]
                    continue
                if not state[3] and state[1] is not None:
                    ended.append((state[1], state[2]))
                del self.conns[s]
                s.close()
            if ended:
                self.died.append(sorted(ended))

    def close(self):
        self.stop.set()
        self.listener.close()


def launch(cmd, env):
    """Run mpiexec, passing its output through; when a rank died, say which (module docstring). Returns the exit
    code."""
    seen = {}
    with tempfile.TemporaryDirectory(prefix="plast-run-") as run_dir:
        path = os.path.join(run_dir, "ranks.sock")
        watch = _Watch(path)
        env = dict(env, PLAST_DIST_RUN_SOCKET=path)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        threads = [
            threading.Thread(target=_pump, args=(proc.stdout, sys.stdout.buffer, seen), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, sys.stderr.buffer, seen), daemon=True),
            threading.Thread(target=watch.run, daemon=True),
        ]
        for t in threads:
            t.start()
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            code = proc.wait()
        for t in threads[:2]:
            t.join()
        watch.stop.set()
        threads[2].join()
        watch.close()
        if code != 0 and watch.died:
            how = seen.get("code")
            what = f"exit code {how}" if how is not None else f"mpiexec exit code {code}"
            what += f", killed by signal {how}" if how in (6, 9, 11, 15) else ""
            first = watch.died[0]
            if len(first) == 1:
                rank, pid = first[0]
                msg = f"rank {rank} (pid {pid}) died ({what}); mpiexec stopped the other ranks"
            else:
                # they ended while the launcher was not looking: which was first is not known here
                names = ", ".join(f"{r} (pid {p})" for r, p in first)
                msg = f"ranks {names} ended at once ({what})"
            sys.stderr.write(f"plast.distributed.run: {msg}\n")
    return code


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
    return launch(cmd, environment(ns.nproc, ns.timeout))


if __name__ == "__main__":
    sys.exit(main())
