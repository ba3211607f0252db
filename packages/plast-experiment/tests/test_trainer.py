"""The training loop: exact resume mid-epoch (also from an older checkpoint when the newest is damaged), jit equal
to eager, early stopping, evaluation and tracking."""

import doctest
import os

import numpy as np
import pytest
from conftest import tiny_overrides

import plast
from plast.experiment import trainer as trainer_module
from plast.experiment.config import ConfigError, load_config
from plast.experiment.tracker import Tracker
from plast.experiment.trainer import Trainer

METRICS = ("train_loss", "val_loss", "grad_norm", "lr")


def _fit(root, *extra, stop_at_step=None, resume=None, **kw):
    cfg = None if resume is not None else load_config(overrides=tiny_overrides(root, **kw) + list(extra))
    return Trainer(cfg, resume=resume, quiet=True, stop_at_step=stop_at_step).fit()


def _series(root, run):
    db = Tracker(root / "runs.db")
    out = {name: db.metrics(run, name) for name in METRICS}
    db.close()
    return out


def _params(run_dir):
    from plast.experiment.checkpoint import load_checkpoint

    return {k: v.numpy().copy() for k, v in load_checkpoint(run_dir).load_model_state().items()}


def _assert_same_run(root, a, b):
    sa, sb = _series(root, a.run_id), _series(root, b.run_id)
    for name in METRICS:
        np.testing.assert_array_equal(sa[name].step, sb[name].step, err_msg=name)
        np.testing.assert_array_equal(sa[name].value, sb[name].value, err_msg=name)  # bit for bit
    pa, pb = _params(a.run_dir), _params(b.run_dir)
    assert pa.keys() == pb.keys()
    for k in pa:
        np.testing.assert_array_equal(pa[k], pb[k], err_msg=k)


def test_resume_mid_epoch_is_bit_for_bit(tmp_path):
    full = _fit(tmp_path, "run.name=full")
    assert full.status == "finished" and full.step == 40
    # an epoch is 26 steps here (418 windows / 16 rows): stop mid-way through the second one
    part = _fit(tmp_path, "run.name=part", stop_at_step=31)
    assert part.status == "interrupted" and part.step == 31
    assert part.checkpoint.name == "ckpt-00000031"
    resumed = _fit(tmp_path, resume=part.run_dir)
    assert resumed.status == "finished" and resumed.step == 40 and resumed.run_id == part.run_id
    _assert_same_run(tmp_path, full, resumed)
    db = Tracker(tmp_path / "runs.db")
    assert {r["name"]: r["status"] for r in db.runs()} == {"full": "finished", "part": "finished"}


def test_resume_from_previous_checkpoint_when_newest_is_damaged(tmp_path):
    full = _fit(tmp_path, "run.name=full")
    part = _fit(tmp_path, "run.name=part", stop_at_step=25)
    newest = part.checkpoint / "model.safetensors"
    os.truncate(newest, newest.stat().st_size - 10)
    with pytest.warns(RuntimeWarning, match="using the previous good checkpoint ckpt-00000020"):
        resumed = _fit(tmp_path, resume=part.run_dir)
    assert resumed.step == 40
    _assert_same_run(tmp_path, full, resumed)  # steps 21..25 are recomputed identically


def test_jit_and_eager_agree_exactly(tmp_path):
    a = _fit(tmp_path, "run.name=jit", **{"train.max_steps": 12})
    b = _fit(tmp_path, "run.name=eager", "train.jit=false", **{"train.max_steps": 12})
    _assert_same_run(tmp_path, a, b)


def test_evaluation_checkpoints_and_outputs(tmp_path):
    res = _fit(tmp_path, "run.name=r")
    s = _series(tmp_path, res.run_id)
    assert s["train_loss"].step.tolist() == list(range(1, 41))
    assert s["val_loss"].step.tolist() == [0, 10, 20, 30, 40]
    assert s["val_loss"].value[-1] < s["val_loss"].value[0]  # it learns
    assert s["lr"].value.max() <= 2e-3 + 1e-12 and s["lr"].value[-1] < s["lr"].value.max()
    assert res.val_loss == s["val_loss"].value[-1] and res.best_val_loss <= res.val_loss
    ckpts = sorted(p.name for p in (res.run_dir / "checkpoints").iterdir())
    assert ckpts == ["ckpt-00000030", "ckpt-00000040"]  # keep_last=2; the best is also the newest
    for name in ("config.yaml", "tokenizer.txt", "run.json", "loss.png", "metrics.csv"):
        assert (res.run_dir / name).exists(), name
    assert set(os.listdir(res.checkpoint)) == {
        "meta.json",
        "model.safetensors",
        "state.safetensors",
        "tokenizer.txt",
        "config.yaml",
    }


def test_early_stopping(tmp_path):
    res = _fit(
        tmp_path,
        "train.early_stopping_patience=2",
        "train.early_stopping_min_delta=10.0",  # no evaluation can improve by that much
    )
    assert res.status == "stopped early" and res.step == 30  # best at 10, no gain at 20 and 30
    assert res.checkpoint.name == "ckpt-00000030"


def test_warmup_cosine_schedule():
    f = trainer_module.WarmupCosine(warmup=4, total=20, min_ratio=0.1)
    lrs = [f(s) for s in range(25)]
    assert lrs[:4] == [0.25, 0.5, 0.75, 1.0]
    assert all(a >= b for a, b in zip(lrs[4:], lrs[5:]))
    assert lrs[20:] == [pytest.approx(0.1)] * 5


def test_only_registered_architectures_are_built(tmp_path):
    cfg = load_config(overrides=tiny_overrides(tmp_path))
    cfg.model.arch = "tinylm:build"  # the old "module:function" form: no longer imported
    with pytest.raises(ConfigError, match="'tinylm:build' is not a registered architecture"):
        trainer_module.build_model(cfg.model, 10)


def test_eval_batches_beyond_the_validation_split(tmp_path):
    with pytest.raises(ConfigError, match=r"train.eval_batches=1000000000 is more than the validation split"):
        _fit(tmp_path, "train.eval_batches=1000000000")


def test_a_corpus_that_is_not_utf8_names_the_file(tmp_path):
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes("na\xefve caf\xe9 ".encode("latin-1") * 200)
    with pytest.raises(
        ConfigError, match=r"data.corpus: .*latin1.txt is not UTF-8 text \(byte 0xef at offset 2\)"
    ):
        _fit(tmp_path, f"data.corpus={corpus}")


HOLD_LOCK = """
import sys, time
from plast.experiment.runlock import RunLock
lock = RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_a_run_directory_is_locked_while_it_trains(tmp_path):
    import subprocess
    import sys

    from plast.experiment.runlock import RunLockedError

    part = _fit(tmp_path, "run.name=locked", stop_at_step=5)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(part.run_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunLockedError, match=f"is being trained by another process \\(pid {holder.pid}"):
            _fit(tmp_path, resume=part.run_dir)
    finally:
        holder.kill()  # kill -9: the kernel drops its lock
        holder.wait()
    assert _fit(tmp_path, resume=part.run_dir).step == 40
    db = Tracker(tmp_path / "runs.db")
    assert db.metrics(part.run_id, "train_loss").step.tolist() == list(
        range(1, 41)
    )  # the refused one wrote nothing


def test_resume_falls_back_when_the_newest_meta_json_is_damaged(tmp_path):
    import json

    part = _fit(tmp_path, "run.name=part", stop_at_step=25)
    meta = part.checkpoint / "meta.json"
    for bad in ("abc", float("nan")):
        data = json.loads(meta.read_text())
        data["step"] = bad
        meta.write_text(json.dumps(data))
        with pytest.warns(RuntimeWarning, match="using the previous good checkpoint ckpt-00000020"):
            ck = trainer_module.Checkpointer(part.run_dir / "checkpoints").latest()
        assert ck.step == 20
    data["step"], data["files"] = 25, "model.safetensors"
    meta.write_text(json.dumps(data))
    with pytest.warns(RuntimeWarning, match="using the previous good checkpoint ckpt-00000020"):
        resumed = _fit(tmp_path, resume=part.run_dir)
    assert resumed.step == 40 and resumed.status == "finished"


def test_docstring_examples_run():
    result = doctest.testmod(trainer_module)
    assert result.attempted > 0 and result.failed == 0


@pytest.fixture(autouse=True)
def _fresh_global_rng():
    state = plast.get_rng_state()
    yield
    plast.set_rng_state(state)


def test_a_run_trained_with_forked_workers_is_unlocked_when_it_ends(tmp_path):
    from plast.experiment.runlock import RunLock, RunLockedError

    res = _fit(tmp_path, "run.name=workers", "data.num_workers=2", **{"train.max_steps": 12})
    assert res.status == "finished"
    with RunLock(res.run_dir):  # the workers (forked while the lock was held) never held it
        with pytest.raises(RunLockedError, match="by this process"):
            RunLock(res.run_dir).acquire()
    assert _fit(tmp_path, resume=res.run_dir).status == "finished"  # and it can be trained again


def test_a_damaged_run_json_is_a_config_error(tmp_path):
    part = _fit(tmp_path, "run.name=part", stop_at_step=5)
    for text in ("{not json", "[1, 2]", '{"run_id": "x"}'):
        (part.run_dir / "run.json").write_text(text)
        with pytest.raises(ConfigError, match="run.json is damaged"):
            Trainer(resume=part.run_dir)


def test_bf16_and_fp16_precision(tmp_path):
    """train.precision: bf16 trains under autocast (jitted, resumable bit for bit), fp16 with a GradScaler
    (jitted, and eager to the same losses; its state is checkpointed); both learn about as fp32 does, and the run
    store records the choice."""
    f32 = _fit(tmp_path, "run.name=f32", **{"train.max_steps": 20})
    bf16 = _fit(tmp_path, "run.name=bf16", "train.precision=bf16", **{"train.max_steps": 20})
    fp16 = _fit(tmp_path, "run.name=fp16", "train.precision=fp16", **{"train.max_steps": 20})
    fp16_eager = _fit(
        tmp_path, "run.name=fp16-eager", "train.precision=fp16", "train.jit=false", **{"train.max_steps": 20}
    )
    losses = {r.run_id: _series(tmp_path, r.run_id)["val_loss"].value[-1] for r in (f32, bf16, fp16)}
    assert losses[bf16.run_id] != losses[f32.run_id]  # it did compute in bfloat16
    for r in (bf16, fp16):
        assert abs(losses[r.run_id] - losses[f32.run_id]) < 0.05 * losses[f32.run_id], losses
    db = Tracker(tmp_path / "runs.db")
    precision = {r["name"]: r["config"]["train"]["precision"] for r in db.runs()}
    db.close()
    assert precision == {"f32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp16-eager": "fp16"}
    eager_losses = _series(tmp_path, fp16_eager.run_id)["val_loss"].value
    np.testing.assert_allclose(_series(tmp_path, fp16.run_id)["val_loss"].value, eager_losses, rtol=1e-4)
    from plast.experiment.checkpoint import load_checkpoint

    state = load_checkpoint(fp16.run_dir).load_state()
    assert state["scaler"]["scale"] > 0 and "_growth_tracker" in state["scaler"]
    part = _fit(
        tmp_path, "run.name=bf16-part", "train.precision=bf16", stop_at_step=15, **{"train.max_steps": 20}
    )
    resumed = _fit(tmp_path, resume=part.run_dir)
    _assert_same_run(tmp_path, bf16, resumed)


def test_fp16_with_diloco_needs_eager_steps(tmp_path):
    load_config(overrides=tiny_overrides(tmp_path) + ["train.precision=fp16"])  # jitted: fine
    with pytest.raises(ConfigError, match="train.strategy=diloco needs train.jit=false"):
        load_config(
            overrides=tiny_overrides(tmp_path)
            + ["train.precision=fp16", "train.nproc=2", "train.strategy=diloco"]
        )
    with pytest.raises(ConfigError, match="train.precision must be fp32, bf16 or fp16"):
        load_config(overrides=tiny_overrides(tmp_path) + ["train.precision=fp8"])


def test_a_sample_prompt_the_tokenizer_cannot_encode_is_refused_before_training(tmp_path):
    # a char tokenizer knows only the corpus's characters: the prompt is checked at setup, naming the key,
    # not after the whole run when the final sample fails
    with pytest.raises(ConfigError, match="train.sample_prompt='\u2603' cannot be encoded"):
        _fit(tmp_path, "train.sample_prompt=\u2603 ")
    assert not list((tmp_path).glob("*/checkpoints/ckpt-*"))
    _fit(tmp_path, "train.sample_prompt=\u2603 ", "train.sample_tokens=0", "train.max_steps=2")  # no sample
