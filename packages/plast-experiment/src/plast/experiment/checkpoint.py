"""Checkpoints: one directory per saved step, written atomically, verified by checksum when read.

A checkpoint directory ``ckpt-00000600/`` holds

- ``model.safetensors``: the model's state dict (``plast.save``), loadable on its own (``plast sample``);
- ``state.safetensors``: everything else a resume needs, as one nested dict (``plast.save``): the optimizer and
  scheduler state dicts, the RNG states, the data loader's position and the trainer's counters;
- extra files the caller adds (the run keeps the tokenizer and the resolved ``config.yaml`` there, so a
  checkpoint directory alone is enough to sample from);
- ``meta.json``, written last: format, step, metrics, and the size and sha256 of every other file.

Writing goes to a hidden temporary directory next to the final one; every file is fsynced, then the directory is
renamed into place (and its parent fsynced). A crash at any point leaves either the complete new checkpoint or
none; leftover temporary directories are removed by the next ``Checkpointer``. Reading checks ``meta.json`` (its
format, a ``step`` that is an integer equal to the directory's, a ``files`` mapping of plain names to sizes and
checksums, numeric ``metrics``) and every checksum; anything else is a CheckpointError, and
``Checkpointer.latest()`` warns about a damaged newest checkpoint and falls back to the newest one that verifies.

Extra file names (``save(files=...)``) are plain names inside the checkpoint directory: 1 to 255 letters,
digits, ``.``, ``_`` and ``-``, not starting with ``.`` and not one of the checkpoint's own files. Anything else
(an absolute path, ``..``, a ``/`` or ``\\``) raises ValueError, and a ``meta.json`` listing such a name, or a file
that is not a regular file (a symlink, a FIFO), does not verify.

A NaN (or missing, or non-numeric) best metric is never the best checkpoint.

>>> import os, tempfile, plast
>>> ck = Checkpointer(tempfile.mkdtemp(), keep_last=2)
>>> for step in (10, 20, 30):
...     _ = ck.save(step, {"w": plast.ones(2) * step}, {"step": step})
>>> [c.step for c in ck.list()]
[20, 30]
>>> ck.latest().load_state()["step"]
30
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import shutil
import stat
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import plast
from plast.errors import CheckpointError

__all__ = ["Checkpoint", "CheckpointError", "Checkpointer", "load_checkpoint", "verify_checkpoint"]

FORMAT = "plast-checkpoint/1"
MODEL_FILE = "model.safetensors"
STATE_FILE = "state.safetensors"
META_FILE = "meta.json"
_NAME = re.compile(r"^ckpt-(\d{8,})$")
_TMP_PREFIX = ".tmp-ckpt-"
_TRASH_PREFIX = ".old-ckpt-"
_FILE_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}$")
_RESERVED = {META_FILE, META_FILE + ".part"}


def _plain_name(name) -> bool:
    return isinstance(name, str) and _FILE_NAME.match(name) is not None


def check_file_name(name) -> str:
    """`name` if it is a plain file name a checkpoint may hold (see the module docstring), else ValueError."""
    if not _plain_name(name):
        raise ValueError(
            f"checkpoint file name {name!r} is not a plain name inside the checkpoint directory: use 1-255 "
            "letters, digits, '.', '_' or '-', not starting with '.' (no '/', '\\', '..' or absolute paths)"
        )
    if name in _RESERVED or name in (MODEL_FILE, STATE_FILE):
        raise ValueError(f"checkpoint file name {name!r} is reserved for the checkpoint's own files")
    return name


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


@dataclass
class Checkpoint:
    """A verified checkpoint directory (see the module docstring for its files)."""

    path: Path
    step: int
    metrics: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def load_model_state(self) -> dict:
        """The model's state dict (plast tensors, on the CPU: load_state_dict copies them to the model's device,
        so a GPU run's checkpoint also loads where there is no GPU)."""
        return plast.load(self.path / MODEL_FILE, map_location="cpu")

    def load_state(self) -> dict:
        """The training state saved with the model (optimizer, scheduler, RNG, data, counters), on the CPU."""
        return plast.load(self.path / STATE_FILE, map_location="cpu")

    def file(self, name: str) -> Path:
        """The path of an extra file saved with the checkpoint (e.g. ``tokenizer.txt``)."""
        if not _plain_name(name) or name not in self.meta.get("files", {}):
            raise CheckpointError(f"checkpoint {self.path} has no file {name!r}")
        p = self.path / name
        if not p.is_file():
            raise CheckpointError(f"checkpoint {self.path} has no file {name!r}")
        return p


def verify_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Check a checkpoint directory (meta.json readable, every listed file present with its size and sha256)
    and return it; raise CheckpointError saying what is wrong."""
    path = Path(path)
    meta_path = path / META_FILE
    if not path.is_dir():
        raise CheckpointError(f"{path} is not a checkpoint directory")
    if not meta_path.exists():
        raise CheckpointError(f"{path} has no {META_FILE} (a partial write?)")
    if not _regular(meta_path):
        raise CheckpointError(f"{meta_path} is not a regular file")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{meta_path} is unreadable ({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise CheckpointError(f"{meta_path}: not a plast checkpoint (format {got!r})")
    step = meta.get("step")
    if type(step) is not int or step < 0:
        raise CheckpointError(f"{meta_path}: 'step' must be a non-negative integer, got {step!r}")
    m = _NAME.match(path.name)
    if m and int(m.group(1)) != step:
        raise CheckpointError(f"{meta_path}: 'step' is {step} but the directory is {path.name}")
    metrics = meta.get("metrics") or {}
    if not isinstance(metrics, dict) or not all(
        isinstance(k, str) and type(v) in (int, float) for k, v in metrics.items()
    ):
        raise CheckpointError(f"{meta_path}: 'metrics' must map names to numbers, got {metrics!r:.200}")
    files = meta.get("files")
    if not isinstance(files, dict) or MODEL_FILE not in files:
        raise CheckpointError(f"{meta_path}: 'files' must be a mapping that lists {MODEL_FILE}")
    for name, info in files.items():
        if not _plain_name(name) or name in _RESERVED:
            raise CheckpointError(
                f"{meta_path} lists {name!r}, which is not a plain file name of the checkpoint"
            )
        if (
            not isinstance(info, dict)
            or type(info.get("bytes")) is not int
            or not isinstance(info.get("sha256"), str)
        ):
            raise CheckpointError(
                f"{meta_path}: the entry of {name} must hold 'bytes' and 'sha256', got {info!r:.200}"
            )
        p = path / name
        if not os.path.lexists(p):
            raise CheckpointError(f"{path}: {name} is missing")
        if not _regular(p):
            raise CheckpointError(f"{path}: {name} is not a regular file (a symlink, FIFO or device?)")
        size = p.stat().st_size
        if size != info["bytes"]:
            raise CheckpointError(f"{path}: {name} has {size} bytes, expected {info['bytes']} (truncated?)")
        if _sha256(p) != info["sha256"]:
            raise CheckpointError(f"{path}: {name} does not match its sha256 checksum (corrupt)")
    return Checkpoint(path=path, step=step, metrics={k: float(v) for k, v in metrics.items()}, meta=meta)


def _regular(p: Path) -> bool:
    """A regular file itself, not through a symlink (reading a FIFO or a device would block or never end)."""
    try:
        return stat.S_ISREG(os.lstat(p).st_mode)
    except OSError:
        return False


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """A checkpoint from a checkpoint directory, or the newest good one of a run directory (``<run>/checkpoints``)
    or of a directory of checkpoints; raises CheckpointError when there is none."""
    path = Path(path)
    if (path / META_FILE).exists() or _NAME.match(path.name):
        return verify_checkpoint(path)
    for candidate in (path / "checkpoints", path):
        if candidate.is_dir() and any(_NAME.match(p.name) for p in candidate.iterdir()):
            ck = Checkpointer(candidate, cleanup=False).latest()
            if ck is not None:
                return ck
    raise CheckpointError(f"no usable checkpoint in {path}")


class Checkpointer:
    """Saves checkpoints under `directory`, keeping the newest `keep_last` and the best by `best_metric`
    (``best_mode`` "min" or "max"; a step's metrics are passed to ``save``)."""

    def __init__(
        self,
        directory: str | os.PathLike,
        keep_last: int = 2,
        best_metric: str | None = "val_loss",
        best_mode: str = "min",
        cleanup: bool = True,
    ):
        if keep_last < 1:
            raise ValueError(f"keep_last must be >= 1, got {keep_last}")
        if best_mode not in ("min", "max"):
            raise ValueError(f"best_mode must be 'min' or 'max', got {best_mode!r}")
        self.directory = Path(directory)
        self.keep_last = keep_last
        self.best_metric = best_metric
        self.best_mode = best_mode
        if cleanup and self.directory.is_dir():
            for p in self.directory.iterdir():  # what a crash mid-save left behind
                if p.name.startswith((_TMP_PREFIX, _TRASH_PREFIX)):
                    shutil.rmtree(p, ignore_errors=True)

    def _dirs(self) -> list[tuple[int, Path]]:
        if not self.directory.is_dir():
            return []
        out = []
        for p in self.directory.iterdir():
            m = _NAME.match(p.name)
            if m and p.is_dir():
                out.append((int(m.group(1)), p))
        return sorted(out)

    def save(
        self,
        step: int,
        model_state: dict,
        state: dict,
        *,
        metrics: dict | None = None,
        files: dict | None = None,
    ) -> Checkpoint:
        """Write a checkpoint of `step` atomically and prune old ones; returns it.

        `files` maps extra file names to a ``Path`` to copy, to the file's content (str or bytes), or to a
        callable that writes the file given its path (e.g. ``tokenizer.save``).
        """
        extra = {check_file_name(name): src for name, src in (files or {}).items()}
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"ckpt-{int(step):08d}"
        tmp = self.directory / f"{_TMP_PREFIX}{int(step):08d}-{secrets.token_hex(4)}"
        tmp.mkdir()
        try:
            self._write_tensors(model_state, tmp / MODEL_FILE)
            self._write_tensors(state, tmp / STATE_FILE)
            for name, src in extra.items():
                dst = tmp / name
                if callable(src):
                    src(dst)
                elif isinstance(src, os.PathLike):
                    shutil.copyfile(src, dst)
                else:
                    dst.write_bytes(src.encode("utf-8") if isinstance(src, str) else bytes(src))
                _fsync_file(dst)
            listing = {}
            for p in sorted(tmp.iterdir()):
                listing[p.name] = {"bytes": p.stat().st_size, "sha256": _sha256(p)}
            meta = {
                "format": FORMAT,
                "step": int(step),
                "created": time.time(),
                "metrics": {k: float(v) for k, v in (metrics or {}).items()},
                "files": listing,
            }
            meta_tmp = tmp / (META_FILE + ".part")
            meta_tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
            _fsync_file(meta_tmp)
            os.replace(meta_tmp, tmp / META_FILE)
            _fsync_dir(tmp)
            trash = None
            if final.exists():  # saving the same step again (e.g. after a resume): move the old one aside
                trash = self.directory / f"{_TRASH_PREFIX}{final.name}-{secrets.token_hex(4)}"
                os.replace(final, trash)
            os.replace(tmp, final)
            _fsync_dir(self.directory)
            if trash is not None:
                shutil.rmtree(trash, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        ck = Checkpoint(path=final, step=int(step), metrics=meta["metrics"], meta=meta)
        self._prune()
        return ck

    @staticmethod
    def _write_tensors(obj: dict, path: Path) -> None:
        plast.save(obj, path)

    def _score(self, ck: Checkpoint) -> float | None:
        if self.best_metric is None or self.best_metric not in ck.metrics:
            return None
        v = ck.metrics[self.best_metric]
        if not isinstance(v, (int, float)) or math.isnan(v):
            return None  # NOTE: NaN compares false with everything, so min() would keep whatever came first
        return v if self.best_mode == "min" else -v

    def _prune(self) -> None:
        good = self.list(warn=False)
        keep = {c.path for c in good[-self.keep_last :]}
        best = self.best(good)
        if best is not None:
            keep.add(best.path)
        for c in good:
            if c.path not in keep:
                shutil.rmtree(c.path, ignore_errors=True)

    def list(self, warn: bool = False) -> list[Checkpoint]:
        """The checkpoints that verify, oldest first (damaged ones are skipped, with a warning if `warn`)."""
        out = []
        for _, p in self._dirs():
            try:
                out.append(verify_checkpoint(p))
            except CheckpointError as e:
                if warn:
                    warnings.warn(f"skipping a damaged checkpoint: {e}", RuntimeWarning, stacklevel=3)
        return out

    def latest(self) -> Checkpoint | None:
        """The newest checkpoint that verifies, or None. A damaged newer one is reported with a warning naming
        the checkpoint used instead."""
        bad = []
        for _, p in reversed(self._dirs()):
            try:
                ck = verify_checkpoint(p)
            except CheckpointError as e:
                bad.append(str(e))
                continue
            for reason in bad:
                warnings.warn(
                    f"checkpoint damaged: {reason}; using the previous good checkpoint {ck.path.name} instead",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return ck
        for reason in bad:
            warnings.warn(
                f"checkpoint damaged: {reason}; no good checkpoint is left", RuntimeWarning, stacklevel=2
            )
        return None

    def best(self, checkpoints: list[Checkpoint] | None = None) -> Checkpoint | None:
        """The checkpoint with the best `best_metric` (the newest among equals), or None."""
        scored = [(s, c.step, c) for c in (checkpoints or self.list()) if (s := self._score(c)) is not None]
        if not scored:
            return None
        return min(scored, key=lambda t: (t[0], -t[1]))[2]
