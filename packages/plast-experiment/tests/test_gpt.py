"""The trainer with plast.nn.GPT itself (a tiny one): exact resume mid-epoch and sampling from the checkpoint."""

import numpy as np
import pytest
from conftest import tiny_overrides

import plast

if not hasattr(plast.nn, "GPT"):
    pytest.skip("plast.nn.GPT is not in this plast-nn yet (the plast-nn GPT issue)", allow_module_level=True)

from plast.experiment.config import load_config  # noqa: E402
from plast.experiment.tracker import Tracker  # noqa: E402
from plast.experiment.trainer import Trainer, load_for_sampling, sample_text  # noqa: E402

GPT = {
    "model.arch": "gpt",
    "model.n_layer": 2,
    "model.n_head": 2,
    "model.n_embd": 32,
    "model.block_size": 16,
    "model.dropout": 0.1,
    "data.tokenizer": "bpe",
    "data.vocab_size": 300,
    "data.stride": 400,
    "train.max_steps": 24,
    "train.eval_interval": 8,
}


def _fit(root, name, stop_at_step=None, resume=None):
    cfg = None if resume else load_config(overrides=tiny_overrides(root, **GPT, **{"run.name": name}))
    return Trainer(cfg, resume=resume, quiet=True, stop_at_step=stop_at_step).fit()


def test_gpt_resume_is_bit_for_bit_and_samples(tmp_path):
    full = _fit(tmp_path, "full")
    part = _fit(tmp_path, "part", stop_at_step=19)  # ~18 steps an epoch: mid-way through the second
    resumed = _fit(tmp_path, None, resume=part.run_dir)
    db = Tracker(tmp_path / "runs.db")
    for name in ("train_loss", "val_loss", "grad_norm"):
        a, b = db.metrics(full.run_id, name), db.metrics(resumed.run_id, name)
        np.testing.assert_array_equal(a.step, b.step)
        np.testing.assert_array_equal(a.value, b.value, err_msg=name)
    assert db.metrics(full.run_id, "val_loss").value[-1] < db.metrics(full.run_id, "val_loss").value[0]
    model, tok, cfg, ck = load_for_sampling(resumed.run_dir)
    assert ck.step == 24 and cfg.model.n_layer == 2
    plast.manual_seed(0)
    text = sample_text(model, tok, "The ", 10, temperature=0.8, top_k=20)
    assert text.startswith("The ") and len(text) > 4
