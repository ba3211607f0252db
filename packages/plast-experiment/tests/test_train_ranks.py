"""``plast train --nproc N``: the command starts its own ranks (mpiexec), each computes its share of every batch,
rank 0 alone writes the run; DDP on 2 ranks trains like 1 process, a run resumes on another number of ranks, and
DiLoCo runs its outer steps. Child processes with time limits; skipped without plast-core's `mpi` extra."""

import importlib.util
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import tiny_overrides

from plast.experiment.checkpoint import load_checkpoint
from plast.experiment.config import ConfigError, load_config
from plast.experiment.tracker import Tracker

CLI = [sys.executable, "-m", "tinycli"]  # the plast command with TinyLM registered


def _needs_mpi():
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip('mpi4py is not installed (pip install "./packages/plast-core[mpi]")')
    from plast.distributed import run

    try:
        run.find_mpiexec()
    except FileNotFoundError as e:
        pytest.skip(str(e))


def _plast(args, env, cwd, timeout=120):
    try:
        out = subprocess.run(CLI + args, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"plast {' '.join(args)} ran past {timeout} s (a hang):\n{e.stdout}\n{e.stderr}")
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def _series(root, run, name):
    db = Tracker(root / "runs.db")
    try:
        steps, values, _ = db.metrics(db.find_run(run)["id"], name)
    finally:
        db.close()
    return np.asarray(steps), np.asarray(values, dtype=np.float64)


def _overrides(root, name, **extra):
    values = {
        "train.max_steps": 20,
        "train.jit": "false",  # several ranks step eagerly; the one-process reference does too
        "train.sample_tokens": 0,
        "run.name": name,
        "model.dropout": 0.0,  # ranks after 0 draw their own dropout masks: with dropout no run equals another
    }
    values.update(extra)
    return tiny_overrides(root, **values)


@pytest.fixture
def ranks_env(subprocess_env):
    _needs_mpi()
    return dict(subprocess_env, OMP_NUM_THREADS="1", PLAST_DIST_TIMEOUT="30")


def test_two_ddp_ranks_train_like_one_process(tmp_path, ranks_env):
    root = tmp_path / "runs"
    _plast(["train"] + _overrides(root, "one"), ranks_env, tmp_path)
    two = _plast(["train"] + _overrides(root, "two") + ["--nproc", "2"], ranks_env, tmp_path)
    # rank 0 alone reports and writes the run
    assert len(re.findall(r"finished at step 20 ", two.stdout)) == 1, two.stdout
    assert (root / "two" / "checkpoints" / "ckpt-00000020" / "model.safetensors").exists()
    assert sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "cache") == ["one", "two"]
    for name in ("train_loss", "val_loss"):
        s1, v1 = _series(root, "one", name)
        s2, v2 = _series(root, "two", name)
        assert list(s1) == list(s2) and len(s1) > 1
        # the same batches, split in two halves whose gradients DDP averages: equal up to float summation order
        np.testing.assert_allclose(v2, v1, rtol=1e-4)
    assert load_config(root / "two" / "config.yaml").train.nproc == 2
    # DDP sends every parameter's float32 gradient every step
    steps, sent = _series(root, "two", "comm_bytes")
    ck = load_checkpoint(root / "two" / "checkpoints" / "ckpt-00000020")
    n = sum(v.numel() for v in ck.load_model_state().values())  # TinyLM: parameters only
    np.testing.assert_array_equal(sent, 4 * n * steps)


def test_a_two_rank_run_resumes_on_one_rank(tmp_path, ranks_env):
    root = tmp_path / "runs"
    over = _overrides(root, "r", **{"train.checkpoint_interval": 5, "train.keep_last": 10})
    _plast(["train"] + over + ["--nproc", "2"], ranks_env, tmp_path)
    steps, full = _series(root, "r", "train_loss")
    # as if the ranks had died after step 10: its newer checkpoints are gone
    for ck in (root / "r" / "checkpoints").iterdir():
        if ck.name > "ckpt-00000010":
            shutil.rmtree(ck)
    out = _plast(["train", "--resume", str(root / "r"), "train.nproc=1"], ranks_env, tmp_path)
    assert "resuming run" in out.stdout and "at step 10" in out.stdout
    steps2, resumed = _series(root, "r", "train_loss")
    assert list(steps2) == list(steps) and len(steps) == 20
    np.testing.assert_array_equal(resumed[:10], full[:10])
    # the same global batches (one loader for all ranks): one rank continues where two would have gone
    np.testing.assert_allclose(resumed[10:], full[10:], rtol=1e-4)


def test_diloco_ranks_take_outer_steps(tmp_path, ranks_env):
    root = tmp_path / "runs"
    over = _overrides(root, "d", **{"train.max_steps": 30})
    out = _plast(["train"] + over + ["--nproc", "2", "--strategy", "diloco", "--inner-steps", "5"], ranks_env,
                 tmp_path)  # fmt: skip
    assert len(re.findall(r"finished at step 30 ", out.stdout)) == 1, out.stdout
    cfg = load_config(root / "d" / "config.yaml")
    assert (cfg.train.strategy, cfg.train.inner_steps, cfg.train.nproc) == ("diloco", 5, 2)
    _, train = _series(root, "d", "train_loss")
    _, val = _series(root, "d", "val_loss")
    assert np.isfinite(train).all() and val[-1] < val[0]
    # the checkpoint holds DiLoCo's state: the global copy and the outer step count
    state = load_checkpoint(root / "d" / "checkpoints" / "ckpt-00000030").load_state()
    assert state["optimizer"]["local_step"] == 30 and len(state["optimizer"]["global_params"]) > 0
    # DiLoCo sends one model's worth of float32 pseudo-gradients every 5 steps
    steps, sent = _series(root, "d", "comm_bytes")
    n = sum(g.numel() for g in state["optimizer"]["global_params"])
    np.testing.assert_array_equal(sent, 4 * n * (steps // 5))


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.nproc=0", "train.nproc"),
        ("train.strategy=allreduce", "train.strategy must be ddp or diloco"),
        ("train.inner_steps=0", "train.inner_steps"),
        ("train.outer_lr=0", "train.outer_lr must be > 0"),
        ("train.outer_lr=nan", "train.outer_lr must be a finite"),
        ("train.outer_momentum=1.0", r"train.outer_momentum must be in \[0, 1\)"),
    ],
)
def test_rank_settings_are_checked(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[override])


def test_batch_must_split_evenly_among_ranks():
    with pytest.raises(ConfigError, match="multiple of train.nproc=3"):
        load_config(overrides=["train.batch_size=8", "train.nproc=3"])
