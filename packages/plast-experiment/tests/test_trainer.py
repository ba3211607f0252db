"""The training loop: exact resume mid-epoch (also from an older checkpoint when the newest is damaged), jit equal
to eager, early stopping, evaluation and tracking."""

import doctest
import os

import numpy as np
import pytest
from conftest import tiny_overrides

import plast
from plast.experiment import trainer as trainer_module
from plast.experiment.config import load_config
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


def test_no_gpt_message_or_bad_arch(tmp_path):
    cfg = load_config(overrides=tiny_overrides(tmp_path, **{"model.arch": "nocolon"}))
    with pytest.raises(ValueError, match="'gpt' or 'module:function'"):
        trainer_module.build_model(cfg.model, 10)


def test_docstring_examples_run():
    result = doctest.testmod(trainer_module)
    assert result.attempted > 0 and result.failed == 0


@pytest.fixture(autouse=True)
def _fresh_global_rng():
    state = plast.get_rng_state()
    yield
    plast.set_rng_state(state)
