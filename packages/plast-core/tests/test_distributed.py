"""plast.distributed on 2 MPI ranks: every collective against numpy on every dtype, the lazy graph around in-place
collectives, clear errors, and a dead or hung peer turning into an error within the timeout (the checks
themselves are in distributed_checks.py; each test is one mpiexec launch)."""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed_launch import run_ranks

CHECKS = Path(__file__).with_name("distributed_checks.py")


def _ok(proc, names):
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for name in names:
        assert out.count(f"ok {name}") == 2, out


def test_import_plast_does_not_start_mpi():
    code = "import sys, plast, plast.distributed as d; print('mpi4py' in sys.modules, d.is_initialized())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_collectives_lazy_graph_and_errors_on_two_ranks():
    names = ["collectives", "lazy", "errors", "jit"]
    _ok(run_ranks(CHECKS, [",".join(names)]), names)


def test_not_initialized_is_a_clear_error():
    import plast
    import plast.distributed as dist

    with pytest.raises(dist.DistError, match="init_process_group"):
        dist.all_reduce(plast.ones(2))
    with pytest.raises(dist.DistError, match="not been initialized"):
        dist.get_rank()


def test_killed_rank_is_named_by_the_launcher_at_once():
    # mpiexec stops the job as soon as a rank dies; the launcher says which rank it was
    t0 = time.monotonic()
    proc = run_ranks(CHECKS, ["timeout"], env={"CHECK_MODE": "kill", "PLAST_DIST_TIMEOUT": "20"}, timeout=30)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "plast.distributed.run: rank 1 (pid" in out and "killed by signal 9" in out, out
    assert time.monotonic() - t0 < 15, out


def test_hung_rank_is_a_timeout_error_naming_it():
    t0 = time.monotonic()
    proc = run_ranks(CHECKS, ["timeout"], env={"CHECK_MODE": "hang", "PLAST_DIST_TIMEOUT": "2"}, timeout=30)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "DistTimeoutError" in out and "rank 1 did not answer" in out, out
    assert "ok timeout" in out, out
    assert time.monotonic() - t0 < 15, out


def test_launcher_runs_a_script_on_two_ranks(tmp_path):
    import importlib.util

    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed")
    script = tmp_path / "hello.py"
    # (each rank writes its own file: mpiexec interleaves the ranks' stdout in chunks, not lines)
    script.write_text(
        "import sys, pathlib, plast, plast.distributed as dist\n"
        "dist.init_process_group('mpi')\n"
        "t = plast.ones(2) * (dist.get_rank() + 1)\n"
        "dist.all_reduce(t)\n"
        "out = pathlib.Path(sys.argv[1]) / f'rank{dist.get_rank()}'\n"
        "out.write_text(f'{dist.get_rank()} of {dist.get_world_size()} {t.tolist()} {sys.argv[2:]}')\n"
    )
    cmd = [sys.executable, "-m", "plast.distributed.run", "-n", "2", "--timeout", "20", str(script)]
    proc = subprocess.run(cmd + [str(tmp_path), "x"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for r in range(2):
        assert (tmp_path / f"rank{r}").read_text() == f"{r} of 2 [3.0, 3.0] ['x']"
