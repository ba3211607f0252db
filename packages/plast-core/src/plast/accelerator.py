"""plast.accelerator: torch.accelerator's names. The accelerator is CUDA where plast.cuda.is_available(); without
one, as torch does on a machine with no GPU, ``is_available()`` is False and ``current_accelerator()`` is None.

>>> import plast
>>> plast.accelerator.is_available() == plast.cuda.is_available()
True
"""

from __future__ import annotations

from . import cuda as _cuda
from ._core.devices import device as _device


def is_available() -> bool:
    """True when an accelerator (a CUDA GPU plast can use) is present."""
    return _cuda.is_available()


def current_accelerator(check_available: bool = False):
    """``plast.device("cuda")`` when a GPU is usable, else None (torch.accelerator's answer without one)."""
    return _device("cuda") if _cuda.is_available() else None


def device_count() -> int:
    return _cuda.device_count()


def current_device_index() -> int:
    return 0 if _cuda.is_available() else -1


def synchronize(device=None) -> None:
    if _cuda.is_available():
        _cuda.synchronize()


__all__ = ["current_accelerator", "current_device_index", "device_count", "is_available", "synchronize"]
