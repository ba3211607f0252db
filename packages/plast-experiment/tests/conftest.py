"""Shared helpers: a tiny config (char tokenizer, the TinyLM stand-in of tinylm.py) that trains in about a second."""

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
# the repo's shared test tooling (tests/tooling: the tiny BERT model directory), which ships in no wheel
sys.path.insert(0, str(HERE.parents[2] / "tests" / "tooling"))

import tinylm  # noqa: E402, F401  (registers model.arch "tinylm")


def tiny_overrides(root, **extra) -> list[str]:
    """Overrides for a run of TinyLM under `root` (40 steps of 8 x 2 windows of 16 characters; ~26 steps an
    epoch, so a run crosses an epoch boundary)."""
    values = {
        "model.arch": "tinylm",
        "model.n_embd": 32,
        "model.block_size": 16,
        "model.dropout": 0.1,
        "data.tokenizer": "char",
        "data.stride": 1000,
        "train.max_steps": 40,
        "train.batch_size": 8,
        "train.grad_accum": 2,
        "train.eval_interval": 10,
        "train.eval_batches": 2,
        "train.log_interval": 5,
        "train.sample_tokens": 20,
        "optim.warmup_steps": 5,
        "run.dir": str(root),
    }
    values.update(extra)
    return [f"{k}={v}" for k, v in values.items()]


@pytest.fixture
def subprocess_env():
    """Environment for `python -m tinycli` children (the plast command with TinyLM registered): tinylm
    importable, two threads, no TTY."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("OMP_NUM_THREADS", "2")
    return env
