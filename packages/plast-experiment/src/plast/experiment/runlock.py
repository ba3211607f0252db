"""One process at a time trains a run directory: an exclusive ``flock`` on ``<run>/.lock``.

The lock belongs to the open file, so the kernel drops it when the process exits in any way (a crash or
``kill -9`` included); there is never a stale lock to delete by hand. The file holds the owner's pid and command
line, only to name it in the error the second process gets. POSIX only (``fcntl``); where it is missing the run
is not locked.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> with RunLock(d):
...     try:
...         RunLock(d).acquire()
...     except RunLockedError as e:
...         print("locked")
locked
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["LOCK_FILE", "RunLock", "RunLockedError"]

LOCK_FILE = ".lock"


class RunLockedError(RuntimeError):
    """The run directory is being trained by another process (or another Trainer in this one)."""


class RunLock:
    """An exclusive, non-blocking lock on a run directory, held from ``acquire()`` to ``release()``."""

    def __init__(self, run_dir: str | os.PathLike):
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: documented as unlocked
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunLockedError(
                f"{self.path.parent} is being trained by another process ({holder}); wait for it to finish "
                "or stop it, then run again"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}: {' '.join(sys.argv)[:500]}\n".encode("utf-8", "replace"))
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the file drops the flock

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 600, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "owner unknown"
