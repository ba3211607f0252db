"""The `plast` command end to end, in child processes: train (with a progress log, a checkpoint, a loss-curve
PNG and a sample), runs, plot, sample, export, --show, show-config, Ctrl-C and --resume."""

import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import tiny_overrides

CLI = [sys.executable, "-m", "tinycli"]  # the plast command with TinyLM registered
PLAST = [sys.executable, "-m", "plast.experiment.cli"]  # the plain plast command


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


EVILMOD = "open({marker!r}, 'w').write('ran')\ndef build(mcfg, vocab_size):\n    raise SystemExit(0)\n"


def test_sample_never_imports_a_module_named_by_a_checkpoint(tmp_path, subprocess_env):
    import yaml

    import plast
    from plast.data.tokenizers import CharTokenizer
    from plast.experiment.checkpoint import Checkpointer
    from plast.experiment.config import load_config

    marker = tmp_path / "marker"
    (tmp_path / "evilmod.py").write_text(EVILMOD.format(marker=str(marker)))  # in the working directory
    cfg = load_config(overrides=tiny_overrides(tmp_path)).to_dict()
    cfg["model"]["arch"] = "evilmod:build"  # what a downloaded checkpoint may say
    CharTokenizer().train("abc ").save(tmp_path / "tok.txt")
    ck = Checkpointer(tmp_path / "downloaded").save(
        1,
        {"w": plast.ones(2)},
        {"step": 1},
        files={"config.yaml": yaml.safe_dump(cfg), "tokenizer.txt": tmp_path / "tok.txt"},
    )
    for command in (PLAST, CLI):
        out = subprocess.run(
            command + ["sample", str(ck.path), "--max-new-tokens", "3"],
            capture_output=True,
            text=True,
            env=subprocess_env,
            cwd=tmp_path,
            timeout=120,
        )
        assert out.returncode == 2, (out.stdout, out.stderr)
        assert "model.arch 'evilmod:build' is not a registered architecture" in out.stderr
        assert "Traceback" not in out.stderr
        assert not marker.exists()


def test_two_resumes_of_one_run_do_not_both_train_it(tmp_path, subprocess_env):
    from plast.experiment.config import load_config
    from plast.experiment.tracker import Tracker
    from plast.experiment.trainer import Trainer

    cfg = load_config(overrides=tiny_overrides(tmp_path, **{"run.name": "twice", "run.plot": "false"}))
    part = Trainer(cfg, quiet=True, stop_at_step=5).fit()
    steps = 2000  # long enough that the first one still trains while the second starts
    args = CLI + [
        "train",
        "--resume",
        str(part.run_dir),
        f"train.max_steps={steps}",
        f"train.eval_interval={steps}",
    ]
    first = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env, cwd=tmp_path
    )
    try:
        for line in first.stdout:  # the first one has the run (and its lock) once it says so
            if "resuming run" in line:
                break
        second = _plast(args[len(CLI) :], subprocess_env, tmp_path)
        assert first.poll() is None, "the first resume ended before the second started: raise steps"
        assert second.returncode == 2, second.stdout
        assert f"is being trained by another process (pid {first.pid}" in second.stderr
        assert "Traceback" not in second.stderr
        rest, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    db = Tracker(tmp_path / "runs.db")
    assert db.metrics(part.run_id, "train_loss").step.tolist() == list(range(1, steps + 1))
    # a lock dies with its process: after the first one (or a crash of it), the run can be resumed again
    again = _plast(args[len(CLI) :] + [f"train.max_steps={steps + 2}"], subprocess_env, tmp_path)
    assert again.returncode == 0, again.stderr
