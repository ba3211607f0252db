"""The `plast` command end to end, in child processes: train (with a progress log, a checkpoint, a loss-curve
PNG and a sample), runs, plot, sample, export, --show, show-config, Ctrl-C and --resume."""

import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import tiny_overrides

CLI = [sys.executable, "-m", "plast.experiment.cli"]


def _plast(args, env, cwd, timeout=120):
    out = subprocess.run(CLI + args, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    return out


def test_train_runs_plot_sample_end_to_end(tmp_path, subprocess_env):
    config = tmp_path / "tiny.yaml"
    config.write_text("train:\n  sample_prompt: 'The '\nrun:\n  name: e2e\n")
    t0 = time.perf_counter()
    overrides = tiny_overrides(tmp_path / "runs", **{"train.max_steps": 30})
    out = _plast(["train", str(config)] + overrides, subprocess_env, tmp_path)
    assert out.returncode == 0, out.stderr
    assert time.perf_counter() - t0 < 60
    text = out.stdout
    assert re.search(r"step +0/30 \| val loss \d", text)
    assert re.search(r"step +30/30 \| train loss [\d.]+ \| val loss [\d.]+ \| lr ", text)
    assert re.search(r"finished at step 30 in \d+s \| final val loss [\d.]+", text)
    assert "sample (20 tokens" in text
    sample = text.split("-" * 72)[1].strip("\n")
    assert sample.startswith("The ") and len(sample) > 4
    run_dir = tmp_path / "runs" / "e2e"
    assert (run_dir / "loss.png").read_bytes()[:4] == b"\x89PNG"
    ckpt = run_dir / "checkpoints" / "ckpt-00000030"
    assert (ckpt / "model.safetensors").exists() and (ckpt / "tokenizer.txt").exists()
    assert (ckpt / "config.yaml").exists()

    db = ["--db", str(tmp_path / "runs" / "runs.db")]
    runs = _plast(["runs"] + db, subprocess_env, tmp_path)
    assert runs.returncode == 0, runs.stderr
    header, row = runs.stdout.splitlines()[:2]
    assert header.split()[:4] == ["run", "name", "status", "step"]
    assert "e2e" in row and "finished" in row and " 30 " in row

    plot = _plast(["plot", str(run_dir), "--out", str(tmp_path / "c.png")], subprocess_env, tmp_path)
    assert plot.returncode == 0, plot.stderr
    assert "2 curves of 1 run(s)" in plot.stdout and (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"

    for where in (run_dir, ckpt):
        s = _plast(
            ["sample", str(where), "--prompt", "def ", "--max-new-tokens", "15", "--seed", "3"],
            subprocess_env,
            tmp_path,
        )
        assert s.returncode == 0, s.stderr
        assert s.stdout.startswith("def ") and len(s.stdout.rstrip("\n")) >= 5
    again = _plast(
        ["sample", str(ckpt), "--prompt", "def ", "--max-new-tokens", "15", "--seed", "3"],
        subprocess_env,
        tmp_path,
    )
    assert again.stdout == s.stdout  # seeded

    csv_out = tmp_path / "m.csv"
    e = _plast(["export", "e2e", "--out", str(csv_out)] + db, subprocess_env, tmp_path)
    assert e.returncode == 0 and csv_out.read_text().startswith("run,step,name,value,wall")


def test_show_and_errors(tmp_path, subprocess_env):
    show = _plast(["train", "--show", "model.n_layer=6"], subprocess_env, tmp_path)
    assert show.returncode == 0 and "n_layer: 6" in show.stdout and "vocab_size: 1024" in show.stdout
    bad = _plast(["train", "model.n_layrs=6"], subprocess_env, tmp_path)
    assert bad.returncode == 2 and "did you mean 'model.n_layer'" in bad.stderr
    cfg = _plast(["show-config"], subprocess_env, tmp_path)
    assert cfg.returncode == 0 and "plast-experiment" in cfg.stdout
    nothing = _plast(["sample", str(tmp_path), "--prompt", "x"], subprocess_env, tmp_path)
    assert nothing.returncode == 2 and "no usable checkpoint" in nothing.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_ctrl_c_saves_a_checkpoint_and_resume_finishes(tmp_path, subprocess_env):
    args = ["train"] + tiny_overrides(
        tmp_path,
        **{"train.max_steps": 100000, "train.eval_interval": 10, "run.name": "stop", "run.plot": "false"},
    )
    proc = subprocess.Popen(
        CLI + args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env,
        cwd=tmp_path,
    )
    try:
        for line in proc.stdout:  # wait until the loop runs
            if re.match(r"step +10/", line):
                break
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    m = re.search(r"interrupted at step (\d+)", rest)
    assert m, rest
    step = int(m.group(1))
    assert "continue with: plast train --resume" in rest
    run_dir = tmp_path / "stop"
    assert (run_dir / "checkpoints" / f"ckpt-{step:08d}" / "meta.json").exists()
    res = _plast(["train", "--resume", str(run_dir), f"train.max_steps={step + 5}"], subprocess_env, tmp_path)
    assert res.returncode == 0, res.stderr
    assert "resuming run" in res.stdout and f"at step {step}" in res.stdout
    assert f"finished at step {step + 5}" in res.stdout
