"""Checkpoints: atomic writes, checksums, keep-last-N and best, and recovery from damaged or partial writes."""

import doctest
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import plast
from plast.errors import CheckpointError
from plast.experiment import checkpoint as checkpoint_module
from plast.experiment.checkpoint import Checkpointer, load_checkpoint, verify_checkpoint


def _model_state(step):
    return {"w": plast.full((64, 32), float(step)), "b": plast.arange(5).float() * step}


def _state(step):
    return {
        "step": step,
        "opt": {"state": {0: {"m": plast.ones(3) * step}}, "betas": (0.9, 0.99)},
        "rng": [1, 2],
    }


def _save(ck, step, **kw):
    return ck.save(step, _model_state(step), _state(step), files={"tokenizer.txt": f"tok {step}"}, **kw)


def test_round_trip_and_files(tmp_path):
    ck = Checkpointer(tmp_path / "checkpoints")
    saved = _save(ck, 7, metrics={"val_loss": 1.5})
    assert saved.path.name == "ckpt-00000007"
    got = load_checkpoint(saved.path)
    assert got.step == 7 and got.metrics == {"val_loss": 1.5}
    model = got.load_model_state()
    np.testing.assert_array_equal(model["w"].numpy(), np.full((64, 32), 7.0, np.float32))
    state = got.load_state()
    assert state["step"] == 7 and state["opt"]["betas"] == (0.9, 0.99) and state["rng"] == [1, 2]
    assert state["opt"]["state"][0]["m"].tolist() == [7.0, 7.0, 7.0]
    assert got.file("tokenizer.txt").read_text() == "tok 7"
    meta = json.loads((saved.path / "meta.json").read_text())
    assert set(meta["files"]) == {"model.safetensors", "state.safetensors", "tokenizer.txt"}
    assert all(len(f["sha256"]) == 64 for f in meta["files"].values())
    with pytest.raises(CheckpointError, match="no file"):
        got.file("nope.txt")
    # a run directory (with checkpoints/) or the checkpoints directory itself resolve to the newest
    assert load_checkpoint(tmp_path).step == 7 and load_checkpoint(tmp_path / "checkpoints").step == 7


def test_keep_last_and_best(tmp_path):
    ck = Checkpointer(tmp_path, keep_last=2, best_metric="val_loss")
    for step, val in [(10, 3.0), (20, 1.0), (30, 2.0), (40, 2.5), (50, 2.2)]:
        _save(ck, step, metrics={"val_loss": val})
    assert [c.step for c in ck.list()] == [20, 40, 50]  # the last two, and the best (step 20)
    assert ck.best().step == 20 and ck.latest().step == 50
    ck_max = Checkpointer(tmp_path / "m", keep_last=1, best_metric="acc", best_mode="max")
    for step, acc in [(1, 0.5), (2, 0.9), (3, 0.7)]:
        _save(ck_max, step, metrics={"acc": acc})
    assert [c.step for c in ck_max.list()] == [2, 3]


def test_saving_a_step_again_replaces_it(tmp_path):
    ck = Checkpointer(tmp_path)
    _save(ck, 5)
    ck.save(5, {"w": plast.zeros(2)}, {"step": -1})
    assert ck.latest().load_state() == {"step": -1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00000005"]


def test_error_midway_leaves_previous_checkpoint(tmp_path, monkeypatch):
    ck = Checkpointer(tmp_path)
    _save(ck, 1)
    calls = []

    def broken_write(obj, path):
        calls.append(path)
        if len(calls) == 2:  # the second tensor file: write part of it, then fail
            with open(path, "wb") as f:
                f.write(b"\x00" * 100)
            raise OSError("disk full (simulated)")
        plast.save(obj, path)

    monkeypatch.setattr(Checkpointer, "_write_tensors", staticmethod(broken_write))
    with pytest.raises(OSError, match="simulated"):
        _save(ck, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00000001"]  # no temp dir, no ckpt-2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ck.latest().step == 1


KILLED_WRITER = textwrap.dedent(
    """
    import os, sys
    import plast
    from plast.experiment.checkpoint import Checkpointer

    def dying_write(obj, path):
        with open(path, "wb") as f:
            f.write(b"partial")
            f.flush()
        os._exit(9)  # the process dies mid-write: no cleanup, no exception handling

    ck = Checkpointer(sys.argv[1])
    Checkpointer._write_tensors = staticmethod(dying_write)
    ck.save(2, {"w": plast.ones(3)}, {"step": 2})
    """
)


def test_process_killed_midway_leaves_previous_checkpoint(tmp_path):
    ck = Checkpointer(tmp_path)
    _save(ck, 1)
    out = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(tmp_path)], capture_output=True, timeout=120
    )
    assert out.returncode == 9, out.stderr.decode()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "ckpt-00000001"]
    assert leftovers and all(name.startswith(".tmp-ckpt-") for name in leftovers)
    ck2 = Checkpointer(tmp_path)  # removes what the dead writer left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00000001"]
    assert ck2.latest().load_state()["step"] == 1


@pytest.mark.parametrize("damage", ["truncate", "flip", "no-meta", "bad-meta", "missing-file"])
def test_damaged_newest_falls_back_with_a_warning(tmp_path, damage):
    ck = Checkpointer(tmp_path)
    _save(ck, 1)
    newest = _save(ck, 2).path
    model = newest / "model.safetensors"
    if damage == "truncate":
        os.truncate(model, model.stat().st_size // 2)
    elif damage == "flip":
        data = bytearray(model.read_bytes())
        data[-3] ^= 0xFF
        model.write_bytes(bytes(data))
    elif damage == "no-meta":
        (newest / "meta.json").unlink()
    elif damage == "bad-meta":
        (newest / "meta.json").write_text("{not json")
    else:
        (newest / "state.safetensors").unlink()
    with pytest.raises(CheckpointError):
        verify_checkpoint(newest)
    with pytest.warns(RuntimeWarning, match="using the previous good checkpoint ckpt-00000001"):
        got = ck.latest()
    assert got.step == 1 and got.load_state()["step"] == 1
    with pytest.warns(RuntimeWarning, match="damaged"):
        assert load_checkpoint(tmp_path).step == 1


def _rewrite_meta(ckpt_dir, edit):
    path = ckpt_dir / "meta.json"
    meta = json.loads(path.read_text())
    edit(meta)
    path.write_text(json.dumps(meta))


META_DAMAGE = {
    "step not a number": lambda m: m.update(step="abc"),
    "step NaN": lambda m: m.update(step=float("nan")),
    "step negative": lambda m: m.update(step=-2),
    "step a bool": lambda m: m.update(step=True),
    "step a float": lambda m: m.update(step=2.5),
    "step of another directory": lambda m: m.update(step=7),
    "files a string": lambda m: m.update(files="model.safetensors"),
    "files a list": lambda m: m.update(files=["model.safetensors", "state.safetensors"]),
    "file entry a string": lambda m: m["files"].update({"model.safetensors": "abc"}),
    "file size a string": lambda m: m["files"]["model.safetensors"].update(bytes="12"),
    "file outside the directory": lambda m: m["files"].update(
        {"../../escaped.txt": {"bytes": 1, "sha256": "0"}}
    ),
    "metrics a list": lambda m: m.update(metrics=[1, 2]),
    "metric a string": lambda m: m.update(metrics={"val_loss": "low"}),
    "not a mapping": lambda m: (m.clear(), m.update(format=["plast"])),
}


@pytest.mark.parametrize("damage", list(META_DAMAGE))
def test_damaged_meta_json_falls_back_to_the_previous_checkpoint(tmp_path, damage):
    ck = Checkpointer(tmp_path)
    _save(ck, 1)
    newest = _save(ck, 2).path
    _rewrite_meta(newest, META_DAMAGE[damage])
    with pytest.raises(CheckpointError, match="meta.json"):
        verify_checkpoint(newest)
    with pytest.warns(RuntimeWarning, match="using the previous good checkpoint ckpt-00000001"):
        assert ck.latest().step == 1
    assert [c.step for c in ck.list()] == [1]


@pytest.mark.parametrize(
    "text",
    ["[" * 100000 + "]" * 100000, '{"format": "plast-checkpoint/1", "step": 1e999999}', "\xff\xfe{}", ""],
    ids=["deep nesting", "huge number", "not UTF-8", "empty"],
)
def test_hostile_meta_json_text_is_a_checkpoint_error(tmp_path, text):
    ck = Checkpointer(tmp_path)
    _save(ck, 1)
    newest = _save(ck, 2).path
    (newest / "meta.json").write_bytes(text.encode("latin-1"))
    with pytest.raises(CheckpointError, match="meta.json"):
        verify_checkpoint(newest)
    with pytest.warns(RuntimeWarning, match="ckpt-00000001"):
        assert ck.latest().step == 1


def test_a_listed_fifo_or_symlink_does_not_verify_and_never_blocks(tmp_path):
    ck = Checkpointer(tmp_path)
    _save(ck, 1)
    newest = _save(ck, 2).path
    tok = newest / "tokenizer.txt"
    tok.unlink()
    os.mkfifo(tok)  # reading it would block for ever
    with pytest.raises(CheckpointError, match="not a regular file"):
        verify_checkpoint(newest)
    tok.unlink()
    tok.symlink_to(tmp_path / "ckpt-00000001" / "tokenizer.txt")
    with pytest.raises(CheckpointError, match="not a regular file"):
        verify_checkpoint(newest)


@pytest.mark.parametrize(
    "name",
    [
        "../../escaped.txt",
        "../escaped.txt",
        "<absolute>",
        "sub/file.txt",
        "sub\\file.txt",
        "..",
        ".",
        ".hidden",
        "",
        "a\0b",
        "x" * 256,
        "meta.json",
        "model.safetensors",
        "state.safetensors",
        7,
    ],
)
def test_extra_file_names_must_be_plain_names_inside_the_checkpoint(tmp_path, name):
    ck = Checkpointer(tmp_path / "run" / "checkpoints")
    if name == "<absolute>":
        name = str(tmp_path / "escaped-abs.txt")
    with pytest.raises(ValueError, match="checkpoint file name"):
        ck.save(1, _model_state(1), _state(1), files={name: "escaped"})
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "run" / "escaped.txt").exists()
    assert not any(tmp_path.rglob("*escaped*"))
    assert ck.list() == [] and not any((tmp_path / "run" / "checkpoints").glob("*"))
    ck.save(1, _model_state(1), _state(1), files={"notes-1.v2_txt": "fine"})  # plain names still work
    assert ck.latest().file("notes-1.v2_txt").read_text() == "fine"
    with pytest.raises(CheckpointError, match="no file"):
        ck.latest().file("../checkpoints/ckpt-00000001/meta.json")


def test_nan_is_never_the_best(tmp_path):
    ck = Checkpointer(tmp_path, keep_last=1)
    for step, val in [(1, float("nan")), (2, 0.5), (3, 2.0), (4, 3.0)]:
        _save(ck, step, metrics={"val_loss": val})
    assert [c.step for c in ck.list()] == [2, 4]  # the newest, and the best: 0.5, not the NaN of step 1
    assert ck.best().step == 2
    only_nan = Checkpointer(tmp_path / "nan", keep_last=1)
    for step in (1, 2):
        _save(only_nan, step, metrics={"val_loss": float("nan")})
    assert only_nan.best() is None and [c.step for c in only_nan.list()] == [2]
    ck_max = Checkpointer(tmp_path / "max", keep_last=1, best_metric="acc", best_mode="max")
    for step, acc in [(1, float("nan")), (2, 0.9), (3, 0.1)]:
        _save(ck_max, step, metrics={"acc": acc})
    assert [c.step for c in ck_max.list()] == [2, 3]


def test_nothing_good_left(tmp_path):
    ck = Checkpointer(tmp_path)
    only = _save(ck, 1).path
    (only / "meta.json").unlink()
    with pytest.warns(RuntimeWarning, match="no good checkpoint is left"):
        assert ck.latest() is None
    with pytest.warns(RuntimeWarning), pytest.raises(CheckpointError, match="no usable checkpoint"):
        load_checkpoint(tmp_path)
    assert Checkpointer(tmp_path / "empty").latest() is None


def test_docstring_examples_run():
    result = doctest.testmod(checkpoint_module)
    assert result.attempted > 0 and result.failed == 0
