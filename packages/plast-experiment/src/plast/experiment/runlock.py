"""One process at a time trains a run directory: an exclusive POSIX record lock (``fcntl.lockf``) on
``<run>/.lock``, and within a process a table of the directories it holds.

The kernel drops the lock when the process exits in any way (a crash or ``kill -9`` included); there is never
a stale lock to delete by hand. A record lock, not ``flock``: it belongs to the process, so DataLoader workers
forked while a run trains do not inherit it and cannot keep it past their parent. The file holds the owner's
pid and command line, only to name it in the error the second process gets. POSIX only (``fcntl``); where it is
missing the run is not locked.

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


_HELD: set[str] = set()  # lock files this process holds (a record lock never conflicts with its own process)


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
        key = os.path.realpath(self.path)
        if key in _HELD:
            raise RunLockedError(
                f"{self.path.parent} is being trained by this process (pid {os.getpid()}) already; wait for "
                "that Trainer to finish"
            )
        # NOTE: this process opens the lock file only here and closes it only in release(): closing any
        # descriptor of the file would drop a record lock.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
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
        self._key = key
        _HELD.add(key)
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            _HELD.discard(self._key)
            os.close(fd)  # closing the file drops the lock

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
